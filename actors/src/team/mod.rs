//! The TerdutTeam actor (DESIGN §4.2, §4.6, §5; issue 5): a team, its escalation ladder and
//! its dead man's switches on a terdut-server, reached through the server's actor.
//!
//! - [`plan`]: PURE (spec, observed server state) -> ordered calls.
//! - [`status`]: PURE outcome -> Ready condition, teamID, observedGeneration; patch or `None`.
//! - [`finalizer`]: the `terdut.ryuvia.com/team-cleanup` finalizer patches.
//! - [`access`]: server exists? consent? client? — asked of the server actor.
//! - [`observe`]: the three reads that show drift.
//! - [`apply`]: executes calls; what a failure means; the Event of each call.
//! - [`pass`]: one convergence pass; [`delete`]: one deletion pass.
//! - [`events`]: Normal/Warning Events, a Warning once per failure streak.
//! - [`reconcile`]: one pass, its status write and Events, the next delay (runtime-independent).
//! - [`actor`]: messages and the timer; a thin shell over [`reconcile`].

pub mod access;
pub mod actor;
pub mod apply;
pub mod delete;
pub mod events;
pub mod finalizer;
pub mod observe;
pub mod pass;
pub mod plan;
pub mod reconcile;
pub mod status;
