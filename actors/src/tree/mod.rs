//! The supervision tree as the operator's card draws it (docs/architecture.md, ADR 0008):
//!
//! ```text
//! Root ── ServerActor (one per TerdutServer) ── its TerdutTeams' and TerdutAlertSources' actors
//!      └─ Holding ── the teams and sources no server accepts yet (absent, or refusing)
//! ```
//!
//! A child asks its parent for its server's credentials and consent by message, one question
//! for both ([`Parent::access`]); a server actor answers from its state at once, because its
//! own passes run on a worker task, never inside its message loop.

pub mod children;
pub mod holding;
pub mod messages;
pub mod parent;
pub mod server;
pub mod writer;

pub use messages::{ChildrenMsg, ServerMsg};
pub use parent::{Access, Credentials, Parent};
