//! What the e2e runner (`terdut-e2e`) and the chaos runner (`terdut-chaos`) share: the
//! pass/fail tally behind their verdict lines, and the invariants over the server's state that
//! both check after every fault (docs/reliability.md, promises 1, 2 and 5). Each binary keeps
//! its own narrative (prefix, detail length), so their output stays their own.

pub mod server_invariants;
pub mod tally;
