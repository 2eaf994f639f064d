//! The supervisor's state machine: every transition of a child, none of them blocking.
//!
//! Entries are taken out of the map while a transition runs (`take`/`put`), so the helpers can
//! use `&mut self` (RNG, metrics, counters) while holding the child by value.
//!
//! One type, its transitions split by concern (each file an `impl` block of it):
//! - this file: the table, dispatch of the protocol, supervision events, snapshot, shut-down
//!   and what every transition shares (leaving a phase, a nudge, incarnations);
//! - [`entries`]: the per-key requests (`Ensure`, `Remove`, `Reset`, `Forward`);
//! - [`wheel`]: passivation and the one timer of the passive children (`Idle`, `Wake`);
//! - [`waiting`]: the wake queue and the holds of the wake budget (ADR 0011);
//! - [`spawn`]: starting an incarnation, restarts and what a failure leads to.

mod entries;
mod spawn;
mod waiting;
mod wheel;

use ractor::{ActorId, SupervisionEvent};
use rand::SeedableRng;
use rand::rngs::StdRng;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::child::{Child, Phase, Running};
use super::coalesce::send_counted;
use super::config::SupervisorConfig;
use super::factory::ChildFactory;
use super::host::Host;
use super::messages::{SupervisorMsg, SupervisorSnapshot};
use super::metrics::KindMetrics;
use crate::key::ObjectKey;

/// State of a [`KeyedSupervisor`](super::KeyedSupervisor); opaque, inspect it with
/// [`SupervisorMsg::Snapshot`].
pub struct SupervisorState<F: ChildFactory> {
    factory: Arc<F>,
    config: SupervisorConfig,
    metrics: KindMetrics,
    rng: StdRng,
    /// Boxed: a B-tree node holds 11 entries and is often half full, so an unboxed entry (~160
    /// bytes) cost ~300 per child; boxed, ~190 (docs/performance.md run 18).
    children: BTreeMap<ObjectKey, Box<Child<F>>>,
    /// Which key and incarnation a supervision event is about. Removed children are absent,
    /// so events from actors we stopped on purpose are recognised and ignored.
    by_actor: HashMap<ActorId, (ObjectKey, u64)>,
    /// Supervisor-wide, so a key that is removed and re-added never reuses an incarnation
    /// and cannot be hit by a timer of its previous life.
    next_incarnation: u64,
    /// The passive children by when their next pass is due: one timer for all of them, armed
    /// for the earliest (a timer wheel of one slot per instant).
    wheel: BTreeSet<(Instant, ObjectKey)>,
    /// The armed timer and what it is armed for.
    armed: Option<(Instant, AbortHandle)>,
    /// While an `EnsureAt` is handled: when its event happened.
    event_at: Option<Instant>,
    /// Passive children due a pass with no change of their own, in the order they became due:
    /// started as places in the wake budget free up (ADR 0011). A key may be here twice (it
    /// was started another way and queued again); only an entry still waiting starts.
    waiting: VecDeque<ObjectKey>,
    /// Children started from `waiting` and still running, in start order, with when their
    /// hold ends; an entry whose child has stopped since is skipped when it comes up.
    holds: VecDeque<(Instant, ObjectKey, u64)>,
    /// Places in the wake budget held now.
    held: usize,
    /// While `admit` starts a child: it takes a place.
    starting_woken: bool,
}

impl<F: ChildFactory> fmt::Debug for SupervisorState<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SupervisorState")
            .field("kind", &self.factory.kind())
            .field("children", &self.children.len())
            .field("next_incarnation", &self.next_incarnation)
            .finish_non_exhaustive()
    }
}
impl<F: ChildFactory> SupervisorState<F> {
    pub fn new(factory: Arc<F>, config: SupervisorConfig) -> Self {
        let rng = match config.jitter_seed {
            Some(seed) => StdRng::seed_from_u64(seed),
            None => StdRng::from_os_rng(),
        };
        let metrics = config.metrics.kind(factory.kind());
        Self {
            factory,
            config,
            metrics,
            rng,
            children: BTreeMap::new(),
            by_actor: HashMap::new(),
            next_incarnation: 1,
            wheel: BTreeSet::new(),
            armed: None,
            event_at: None,
            waiting: VecDeque::new(),
            holds: VecDeque::new(),
            held: 0,
            starting_woken: false,
        }
    }

    /// One message of the protocol, from whichever actor hosts this table.
    pub fn handle<H: Host<F>>(&mut self, myself: &H, msg: SupervisorMsg<F>) {
        self.handle_one(myself, msg);
        // Whatever the message freed (a child passivated, failed or was removed), or queued.
        self.admit(myself);
    }

    fn handle_one<H: Host<F>>(&mut self, myself: &H, msg: SupervisorMsg<F>) {
        match msg {
            SupervisorMsg::Ensure(key, spec) => self.ensure(myself, key, spec),
            SupervisorMsg::EnsureAt(key, spec, at) => {
                self.event_at = Some(at);
                self.ensure(myself, key, spec);
                self.event_at = None;
            }
            SupervisorMsg::Remove(key) => self.remove(&key),
            SupervisorMsg::Reset(key) => self.reset(myself, &key),
            SupervisorMsg::Forward(key, msg) => self.forward(myself, &key, msg),
            SupervisorMsg::RestartDue { key, incarnation } => {
                self.restart_due(myself, &key, incarnation)
            }
            SupervisorMsg::StartFailed {
                key,
                incarnation,
                error,
            } => self.failed(myself, &key, incarnation, error),
            SupervisorMsg::Snapshot(reply) => {
                // The caller may have timed out and gone; nothing to do then.
                let _ = reply.send(self.snapshot());
            }
            SupervisorMsg::Idle {
                key,
                incarnation,
                due,
                keepsake,
            } => self.idle(myself, &key, incarnation, due, keepsake),
            SupervisorMsg::Released { key, incarnation } => self.released(&key, incarnation),
            SupervisorMsg::Wake => self.wake(myself),
            SupervisorMsg::NudgeAll => self.nudge_all(),
            SupervisorMsg::Retain(keep) => {
                let gone: Vec<ObjectKey> = self
                    .children
                    .keys()
                    .filter(|k| !keep.contains(*k))
                    .cloned()
                    .collect();
                for key in gone {
                    self.remove_because(&key, "not placed under this host any more");
                }
            }
            SupervisorMsg::Ping(reply) => {
                let _ = reply.send(());
            }
        }
    }

    /// A supervision event of the host; `true` when it was about one of this table's
    /// children (a host may have several tables, and children of its own).
    pub fn supervision<H: Host<F>>(&mut self, myself: &H, event: &SupervisionEvent) -> bool {
        let (cell, error) = match event {
            SupervisionEvent::ActorFailed(cell, err) => (cell, err.to_string()),
            // Children we stop are forgotten before they terminate, so a termination we still
            // track was not asked for: treat it as a failure.
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                let reason = reason.clone().unwrap_or_else(|| "no reason".to_owned());
                (cell, format!("stopped unexpectedly: {reason}"))
            }
            _ => return false,
        };
        match self.child_of(cell.get_id()) {
            Some((key, incarnation)) => {
                self.failed(myself, &key, incarnation, error);
                self.admit(myself);
                true
            }
            None => false,
        }
    }

    /// Takes a child out for a transition, with the key the table holds for it (put it back
    /// under that one: every copy of a key then shares one allocation, `ObjectKey`).
    fn take(&mut self, key: &ObjectKey) -> Option<(ObjectKey, Box<Child<F>>)> {
        self.children.remove_entry(key)
    }

    /// The key and incarnation of a supervised actor, if it is one we still care about.
    pub fn child_of(&self, id: ActorId) -> Option<(ObjectKey, u64)> {
        self.by_actor.get(&id).cloned()
    }

    pub fn snapshot(&self) -> SupervisorSnapshot {
        let now = self.config.clock.now();
        SupervisorSnapshot {
            kind: self.factory.kind(),
            children: self
                .children
                .iter()
                .map(|(k, c)| (k.clone(), c.snapshot(now)))
                .collect(),
        }
    }

    /// Supervisor stopping: cancel timers and take every child out of the gauges. The
    /// children themselves are stopped by the caller (and killed by ractor if they linger).
    pub fn shut_down(&mut self) {
        for (_, child) in std::mem::take(&mut self.children) {
            self.leave_phase(child.phase, None);
        }
        if let Some((_, timer)) = self.armed.take() {
            timer.abort();
        }
        self.wheel.clear();
        self.waiting.clear();
        self.holds.clear();
    }

    /// Undo what a phase holds: stop the actor (when `stop` gives a reason), close its
    /// mailbox counter, cancel its timer, fix the gauges.
    fn leave_phase(&mut self, phase: Phase<F>, stop: Option<&str>) {
        match phase {
            Phase::Running(running) => {
                if running.woken {
                    self.held -= 1;
                }
                if let Some(reason) = stop {
                    running.actor.stop(Some(reason.to_owned()));
                }
                self.by_actor.remove(&running.actor.get_id());
                running.mailbox.close();
                self.metrics.active.dec();
            }
            Phase::BackingOff { timer, .. } => timer.abort(),
            Phase::CrashLooping { .. } => {
                self.metrics.crash_looping.dec();
            }
            // Its wheel slot, if any, is skipped when it comes up (the phase no longer
            // matches it).
            Phase::Passive { waiting, .. } => {
                self.metrics.passive.dec();
                if waiting {
                    self.metrics.waiting.dec();
                }
            }
        }
    }

    /// Send one nudge unless one is already queued.
    fn nudge(&self, key: &ObjectKey, running: &Running<F>) {
        let at = self.event_at.unwrap_or_else(Instant::now);
        if running.pending.mark_at(at)
            && send_counted(&running.actor, &running.mailbox, self.factory.nudge()).is_err()
        {
            running.pending.clear();
            tracing::debug!(kind = self.factory.kind(), %key, "child exiting; nudge dropped");
        }
    }

    fn next_incarnation(&mut self) -> u64 {
        let n = self.next_incarnation;
        self.next_incarnation += 1;
        n
    }
}

/// Move the phase out of `child` to tear it down. The placeholder left behind is always
/// overwritten before the child goes back into the map.
fn take_phase<F: ChildFactory>(child: &mut Child<F>) -> Phase<F> {
    std::mem::replace(
        &mut child.phase,
        Phase::CrashLooping {
            last_error: String::new(),
        },
    )
}

/// A host that fails skips its `post_stop` (ractor kills its children): the table still takes
/// its children out of the gauges and cancels its timers.
impl<F: ChildFactory> Drop for SupervisorState<F> {
    fn drop(&mut self) {
        self.shut_down();
    }
}
