//! The message protocol of a [`KeyedSupervisor`](super::KeyedSupervisor), and its snapshot.

use ractor::{ActorRef, RpcReplyPort};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use super::factory::{ChildFactory, ChildMsg};
use crate::key::ObjectKey;

/// Messages a keyed supervisor handles. Every handler is short and never waits on a child.
pub enum SupervisorMsg<F: ChildFactory> {
    /// The object exists with this desired spec (sent for every watch event and resync).
    /// Missing child: spawn it (its first message is a nudge). Running child: store the
    /// spec, send one coalesced nudge.
    /// Backing-off or crash-looping child: store the spec; if it changed, reset the restart
    /// history and start at once (the user may just have fixed what made it crash).
    Ensure(ObjectKey, F::Spec),
    /// [`Ensure`](Self::Ensure) for an event that happened at this instant (the informer's),
    /// so the nudge's dispatch time counts from there (`actor_dispatch_seconds`).
    EnsureAt(ObjectKey, F::Spec, tokio::time::Instant),
    /// The object is gone: stop the child (gracefully, after its current message), cancel
    /// any restart and forget the key. Deleting a CR stops its actor.
    Remove(ObjectKey),
    /// Forget the restart history of a child and, if it is not running, start it now.
    Reset(ObjectKey),
    /// Deliver a message to a running child (counted in the mailbox-depth gauge). Dropped,
    /// with a debug log, while the child is backing off or parked: a restart re-reads
    /// everything, so nothing is lost that a reconcile would not recompute.
    Forward(ObjectKey, ChildMsg<F>),
    /// Timer: the backoff of `key` is over. Sent by the supervisor to itself with
    /// `send_after`; ignored unless the child is still backing off after incarnation
    /// `incarnation`, so timers made stale by `Remove`, `Reset` or a changed spec do nothing.
    RestartDue {
        /// The child to restart.
        key: ObjectKey,
        /// The incarnation whose failure scheduled this timer.
        incarnation: u64,
    },
    /// A child's `pre_start` failed. ractor sends no supervision event in that case, so the
    /// task watching the spawn reports it here and it is handled like a crash.
    StartFailed {
        /// The child that failed to start.
        key: ObjectKey,
        /// The incarnation that failed.
        incarnation: u64,
        /// The `pre_start` error.
        error: String,
    },
    /// Reply with the state of every child (for tests, metrics and debugging).
    Snapshot(RpcReplyPort<SupervisorSnapshot>),
    /// A child incarnation converged and has nothing due until `due`: it may be stopped and
    /// kept as an entry only (passivation). Ignored if that incarnation is gone or busy.
    Idle {
        key: ObjectKey,
        incarnation: u64,
        due: tokio::time::Instant,
        keepsake: super::factory::Keepsake,
    },
    /// A child started from the wake queue is done with its pass and stays running: its
    /// place in the wake budget goes back (ADR 0011).
    Released { key: ObjectKey, incarnation: u64 },
    /// Timer: a passive child's next pass may be due (the table's one timer).
    Wake,
    /// Nudge every running child and start every passive one (something all of them depend
    /// on changed: their server's credentials, its data).
    NudgeAll,
    /// Remove every child whose key is not in the set: a restarted routing writer tells each
    /// host what its rebuilt index places there (docs/adr/0017-liveness.md).
    Retain(std::collections::BTreeSet<ObjectKey>),
    /// Answer at once: the stall watchdog's question (`runtime/watchdog.rs`).
    Ping(RpcReplyPort<()>),
}

impl<F: ChildFactory> fmt::Debug for SupervisorMsg<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ensure(key, _) | Self::EnsureAt(key, _, _) => write!(f, "Ensure({key})"),
            Self::Remove(key) => write!(f, "Remove({key})"),
            Self::Reset(key) => write!(f, "Reset({key})"),
            Self::Forward(key, _) => write!(f, "Forward({key})"),
            Self::RestartDue { key, incarnation } => write!(f, "RestartDue({key}, {incarnation})"),
            Self::StartFailed {
                key, incarnation, ..
            } => write!(f, "StartFailed({key}, {incarnation})"),
            Self::Snapshot(_) => write!(f, "Snapshot"),
            Self::Idle { key, .. } => write!(f, "Idle({key})"),
            Self::Released { key, .. } => write!(f, "Released({key})"),
            Self::Wake => write!(f, "Wake"),
            Self::NudgeAll => write!(f, "NudgeAll"),
            Self::Retain(keys) => write!(f, "Retain({})", keys.len()),
            Self::Ping(_) => write!(f, "Ping"),
        }
    }
}

/// The state of all children of one supervisor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SupervisorSnapshot {
    /// The supervisor's kind label.
    pub kind: &'static str,
    /// One entry per key the supervisor knows.
    pub children: BTreeMap<ObjectKey, ChildSnapshot>,
}

/// The state of one child.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildSnapshot {
    /// The current (or, when not running, the last) incarnation.
    pub incarnation: u64,
    /// Times this child was started again after a failure.
    pub restarts: u64,
    /// Consecutive restarts since the last reset: the backoff exponent.
    pub attempt: u32,
    /// What the child is doing.
    pub status: ChildStatus,
}

/// Lifecycle of one child.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChildStatus {
    /// Spawned (possibly still in `pre_start`) and not failed since.
    Running,
    /// Failed; a restart is scheduled.
    BackingOff {
        /// The full backoff delay that was chosen.
        delay: Duration,
        /// Time left until the restart.
        remaining: Duration,
        /// Why it failed.
        last_error: String,
    },
    /// Exceeded the restart-intensity limit; no restart until the spec changes or a `Reset`.
    CrashLooping {
        /// Why it failed the last time.
        last_error: String,
    },
    /// Converged and stopped; starts again on an event or when its next pass is due.
    Passive {
        /// Time left until its next pass, if one is scheduled.
        due_in: Option<Duration>,
    },
}

/// Why a call to a supervisor did not produce an answer.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The supervisor is not running.
    #[error("supervisor is not running")]
    NotRunning,
    /// The supervisor did not answer in time.
    #[error("supervisor did not answer within {0:?}")]
    Timeout(Duration),
    /// The supervisor dropped the reply port.
    #[error("supervisor dropped the reply")]
    Dropped,
}

/// Ask `supervisor` for its snapshot, waiting at most `timeout` (never `call!`: it has none).
pub async fn snapshot<F: ChildFactory>(
    supervisor: &ActorRef<SupervisorMsg<F>>,
    timeout: Duration,
) -> Result<SupervisorSnapshot, CallError> {
    match supervisor
        .call(SupervisorMsg::Snapshot, Some(timeout))
        .await
    {
        Ok(ractor::rpc::CallResult::Success(s)) => Ok(s),
        Ok(ractor::rpc::CallResult::Timeout) => Err(CallError::Timeout(timeout)),
        Ok(ractor::rpc::CallResult::SenderError) => Err(CallError::Dropped),
        Err(_) => Err(CallError::NotRunning),
    }
}
