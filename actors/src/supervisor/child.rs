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
    pub spec: SpecCell<F::Spec>,
    pub tracker: RestartTracker,
    /// The current or last incarnation; tags timers and startup reports.
    pub incarnation: u64,
    /// Times started again after a failure.
    pub restarts: u64,
    pub phase: Phase<F>,
}

/// The latest desired spec of a child: a watch channel while an incarnation may read it, the
/// value alone while the child is passive. A channel costs ~350 bytes per object, and at
/// 10,000 idle teams nearly all of them are passive (docs/performance.md, run 16).
pub(super) enum SpecCell<S> {
    Value(S),
    Channel(watch::Sender<S>),
}

impl<S: Clone + PartialEq> SpecCell<S> {
    /// Sets the spec; `true` when it differs from the one held.
    pub fn set(&mut self, spec: S) -> bool {
        let replace = move |current: &mut S| {
            if *current == spec {
                return false;
            }
            *current = spec;
            true
        };
        match self {
            Self::Value(current) => replace(current),
            Self::Channel(tx) => tx.send_if_modified(replace),
        }
    }

    /// What a new incarnation reads its spec from (the channel is made if there is none).
    pub fn subscribe(&mut self) -> watch::Receiver<S> {
        match self {
            Self::Channel(tx) => tx.subscribe(),
            Self::Value(value) => {
                let (tx, rx) = watch::channel(value.clone());
                *self = Self::Channel(tx);
                rx
            }
        }
    }

    /// No incarnation runs: keep the value, drop the channel.
    pub fn park(&mut self) {
        if let Self::Channel(tx) = self {
            let value = tx.borrow().clone();
            *self = Self::Value(value);
        }
    }
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
        /// In the queue for a place in the wake budget (ADR 0011).
        waiting: bool,
    },
}

/// The per-incarnation handles of a running child.
pub(super) struct Running<F: ChildFactory> {
    pub actor: ActorRef<ChildMsg<F>>,
    pub started_at: Instant,
    pub mailbox: MailboxDepth,
    pub pending: PendingFlag,
    /// Started from the wake queue: holds a place in the wake budget until it stops, fails
    /// or holds it longer than `wake_hold`.
    pub woken: bool,
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

#[cfg(test)]
mod tests {
    use super::SpecCell;

    #[test]
    fn a_parked_spec_keeps_the_newest_value_and_a_new_incarnation_reads_it() {
        let mut cell = SpecCell::Value(1);
        let first = cell.subscribe();
        assert!(cell.set(2), "a different spec is a change");
        assert!(!cell.set(2), "the same spec is not");
        assert_eq!(*first.borrow(), 2, "a running incarnation sees updates");
        cell.park();
        assert!(matches!(cell, SpecCell::Value(2)));
        assert!(cell.set(3));
        assert_eq!(
            *first.borrow(),
            2,
            "a stopped incarnation's channel is gone"
        );
        assert_eq!(*cell.subscribe().borrow(), 3);
    }
}
