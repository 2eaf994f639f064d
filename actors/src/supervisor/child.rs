//! One entry of the supervisor's child map: what survives restarts and what does not.

use ractor::ActorRef;
use tokio::sync::watch;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::coalesce::{MailboxDepth, PendingFlag};
use super::factory::{ChildFactory, ChildMsg};
use super::messages::{ChildSnapshot, ChildStatus};
use super::restart_policy::RestartTracker;

/// A supervised object. Lives from the first `Ensure` until `Remove`, across incarnations.
pub(super) struct Child<F: ChildFactory> {
    /// Latest desired spec; every incarnation subscribes, so restarts use the newest.
    pub spec: watch::Sender<F::Spec>,
    pub tracker: RestartTracker,
    /// The current or last incarnation; tags timers and startup reports.
    pub incarnation: u64,
    /// Times started again after a failure.
    pub restarts: u64,
    pub phase: Phase<F>,
}

/// Where a child is in its lifecycle.
pub(super) enum Phase<F: ChildFactory> {
    /// Spawned, possibly still in `pre_start`.
    Running(Running<F>),
    /// Failed; a `RestartDue` timer is armed.
    BackingOff {
        delay: std::time::Duration,
        due: Instant,
        last_error: String,
        /// Aborted when the restart happens another way, so no stale timer lingers.
        timer: AbortHandle,
    },
    /// Over the intensity limit; waits for a changed spec or a `Reset`.
    CrashLooping { last_error: String },
    /// Converged and idle: no actor, only this entry (passivation, ADR 0008). It starts
    /// again on an event (`Ensure`, `Forward`) or at `due`, when its next pass was due.
    Passive {
        due: Option<Instant>,
        keepsake: Option<super::factory::Keepsake>,
    },
}

/// The per-incarnation handles of a running child.
pub(super) struct Running<F: ChildFactory> {
    pub actor: ActorRef<ChildMsg<F>>,
    pub started_at: Instant,
    pub mailbox: MailboxDepth,
    pub pending: PendingFlag,
}

impl<F: ChildFactory> Child<F> {
    pub fn snapshot(&self, now: Instant) -> ChildSnapshot {
        let status = match &self.phase {
            Phase::Running(_) => ChildStatus::Running,
            Phase::BackingOff {
                delay,
                due,
                last_error,
                ..
            } => ChildStatus::BackingOff {
                delay: *delay,
                remaining: due.saturating_duration_since(now),
                last_error: last_error.clone(),
            },
            Phase::CrashLooping { last_error } => ChildStatus::CrashLooping {
                last_error: last_error.clone(),
            },
            Phase::Passive { due, .. } => ChildStatus::Passive {
                due_in: due.map(|d| d.saturating_duration_since(now)),
            },
        };
        ChildSnapshot {
            incarnation: self.incarnation,
            restarts: self.restarts,
            attempt: self.tracker.attempt(),
            status,
        }
    }
}
