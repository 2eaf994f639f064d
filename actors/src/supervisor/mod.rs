//! Generic supervision: one child actor per object key, restarted with backoff.
//!
//! ractor has supervision *events* but no restart *policy*; this module is that policy.
//!
//! ```text
//!   informer ──Ensure/Remove──▶ KeyedSupervisor<F> ──spawn_linked_instant──▶ child (per key)
//!                                 │  ▲                                        │
//!                                 │  └── ActorFailed / ActorTerminated ───────┘
//!                                 │  └── StartFailed (pre_start Err: no event) ◀─ startup task
//!                                 └── send_after(delay) ─▶ RestartDue{key, incarnation}
//! ```
//!
//! - [`restart_policy`]: pure backoff, jitter, stability reset and intensity limit.
//! - [`coalesce`]: pending flags and mailbox-depth accounting for unbounded mailboxes.
//! - [`ChildFactory`]: what the per-kind code implements; [`ChildContext`]: what a child gets.
//! - [`KeyedSupervisor`] and [`SupervisorMsg`]: the actor and its protocol.
//! - [`SupervisorMetrics`]: `actor_restarts_total`, `actors_active`, `actor_mailbox_depth`,
//!   `actors_crash_looping`, each by `kind`.
//! - [`part`] and [`actor_part`]: the same policy for the leader's parts there is one of
//!   (the root, the holding host, the writer, each watch), recorded for `/healthz`.

pub mod actor_part;
mod child;
pub mod coalesce;
mod config;
mod factory;
mod host;
mod keyed;
mod messages;
mod metrics;
pub mod part;
pub mod restart_policy;
mod state;

pub use coalesce::{Coalescer, MailboxDepth, PendingFlag, send_counted};
pub use config::SupervisorConfig;
pub use factory::Keepsake;
pub use factory::{ChildContext, ChildFactory, ChildMsg, IdleReport};
pub use host::{Host, Wrapped};
pub use keyed::KeyedSupervisor;
pub use messages::{
    CallError, ChildSnapshot, ChildStatus, SupervisorMsg, SupervisorSnapshot, snapshot,
};
pub use metrics::{KindLabel, KindMetrics, SupervisorMetrics};
pub use restart_policy::{Jitter, RestartPolicy, RestartTracker, Verdict};
pub use state::SupervisorState;
