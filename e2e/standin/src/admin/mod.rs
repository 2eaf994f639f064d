//! The test-only admin surface under `/admin/` (docs/terdut-api.md "Stand-in admin surface"):
//! off unless enabled (`--admin` or `TERDUT_STANDIN_ADMIN=1`), optionally guarded by its own
//! token. It seeds users and open incidents, reads back everything (never a key), checks
//! whether a key is live, counts calls and injects faults. Nothing like it exists on the real
//! server; tests that need it skip themselves against one.

pub mod client;
pub(crate) mod routes;
pub mod types;

pub use client::{AdminClient, AdminError};
pub use types::{AdminIntegration, AdminState, AdminTeam, CallCounts, Fault, FaultRule, KeyCheck};
