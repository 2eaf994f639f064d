//! Routing: which actors an informer event concerns, and where each team and alert-source
//! actor lives (docs/design.md §5, ADR 0008). [`index`] is the pure part; the writer that
//! sends its commands to the actors is `tree/writer.rs`.

pub mod claims;
pub mod facts;
pub mod index;
pub mod scope;
pub mod seen;
pub mod selector;

pub use index::{ChildKind, Command, Host, Index, Listed, ServerFacts, SourceFacts, TeamFacts};
pub use seen::{ScopeChange, Seen};
