//! The supervisor's state machine: every transition of a child, none of them blocking.
//!
//! Entries are taken out of the map while a transition runs (`take`/`put`), so the helpers can
//! use `&mut self` (RNG, metrics, counters) while holding the child by value.

use ractor::{ActorId, ActorRef, ActorRuntime, SpawnErr};
use rand::rngs::StdRng;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::child::{Child, Phase, Running};
use super::coalesce::{MailboxDepth, PendingFlag, send_counted};
use super::factory::{ChildContext, ChildFactory, ChildMsg};
use super::keyed::SupervisorConfig;
use super::messages::{SupervisorMsg, SupervisorSnapshot};
use super::metrics::KindMetrics;
use super::restart_policy::{RestartTracker, Verdict};
use crate::key::ObjectKey;

type Myself<F> = ActorRef<SupervisorMsg<F>>;

/// State of a [`KeyedSupervisor`](super::KeyedSupervisor); opaque, inspect it with
/// [`SupervisorMsg::Snapshot`].
pub struct SupervisorState<F: ChildFactory> {
    factory: Arc<F>,
    config: SupervisorConfig,
    metrics: KindMetrics,
    rng: StdRng,
    children: BTreeMap<ObjectKey, Child<F>>,
    /// Which key and incarnation a supervision event is about. Removed children are absent,
    /// so events from actors we stopped on purpose are recognised and ignored.
    by_actor: HashMap<ActorId, (ObjectKey, u64)>,
    /// Supervisor-wide, so a key that is removed and re-added never reuses an incarnation
    /// and cannot be hit by a timer of its previous life.
    next_incarnation: u64,
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
    pub(super) fn new(factory: Arc<F>, config: SupervisorConfig, rng: StdRng) -> Self {
        let metrics = config.metrics.kind(factory.kind());
        Self {
            factory,
            config,
            metrics,
            rng,
            children: BTreeMap::new(),
            by_actor: HashMap::new(),
            next_incarnation: 1,
        }
    }

    /// `Ensure`: spawn, or update the spec and nudge, or restart a failed child whose spec
    /// changed.
    pub(super) fn ensure(&mut self, myself: &Myself<F>, key: ObjectKey, spec: F::Spec) {
        let Some(mut child) = self.children.remove(&key) else {
            let spec = watch::Sender::new(spec);
            let mut tracker = RestartTracker::default();
            let incarnation = self.next_incarnation();
            let phase = self.start(myself, &key, &spec, &mut tracker, incarnation);
            self.children.insert(
                key,
                Child {
                    spec,
                    tracker,
                    incarnation,
                    restarts: 0,
                    phase,
                },
            );
            return;
        };
        let changed = child.spec.send_if_modified(|current| {
            if *current == spec {
                return false;
            }
            *current = spec;
            true
        });
        match &child.phase {
            Phase::Running(running) => self.nudge(&key, running),
            Phase::BackingOff { .. } | Phase::CrashLooping { .. } if changed => {
                tracing::info!(kind = self.factory.kind(), %key, "spec changed; restarting now");
                child.tracker.reset();
                self.restart(myself, &key, &mut child);
            }
            Phase::BackingOff { .. } | Phase::CrashLooping { .. } => {}
        }
        self.children.insert(key, child);
    }

    /// `Remove`: stop the child and forget it.
    pub(super) fn remove(&mut self, key: &ObjectKey) {
        let Some(child) = self.children.remove(key) else {
            return;
        };
        tracing::info!(kind = self.factory.kind(), %key, "object removed; stopping its actor");
        self.leave_phase(child.phase, Some("object removed"));
    }

    /// `Reset`: forget the history; start the child if it is not running.
    pub(super) fn reset(&mut self, myself: &Myself<F>, key: &ObjectKey) {
        let Some(mut child) = self.children.remove(key) else {
            return;
        };
        child.tracker.reset();
        if !matches!(child.phase, Phase::Running(_)) {
            self.restart(myself, key, &mut child);
        }
        self.children.insert(key.clone(), child);
    }

    /// `Forward`: deliver to a running child, counted in the depth gauge.
    pub(super) fn forward(&mut self, key: &ObjectKey, msg: ChildMsg<F>) {
        match self.children.get(key).map(|c| &c.phase) {
            Some(Phase::Running(running)) => {
                if send_counted(&running.actor, &running.mailbox, msg).is_err() {
                    tracing::debug!(kind = self.factory.kind(), %key, "child exiting; dropped");
                }
            }
            _ => tracing::debug!(kind = self.factory.kind(), %key, "no running child; dropped"),
        }
    }

    /// `RestartDue`: the backoff timer fired.
    pub(super) fn restart_due(&mut self, myself: &Myself<F>, key: &ObjectKey, incarnation: u64) {
        let Some(mut child) = self.children.remove(key) else {
            tracing::debug!(kind = self.factory.kind(), %key, "restart timer for a removed child");
            return;
        };
        if child.incarnation == incarnation && matches!(child.phase, Phase::BackingOff { .. }) {
            self.restart(myself, key, &mut child);
        } else {
            tracing::debug!(kind = self.factory.kind(), %key, incarnation, "stale restart timer");
        }
        self.children.insert(key.clone(), child);
    }

    /// A child incarnation failed: crashed, panicked, stopped on its own or failed to start.
    /// Reports about an older incarnation, or one already handled, are ignored.
    pub(super) fn failed(
        &mut self,
        myself: &Myself<F>,
        key: &ObjectKey,
        incarnation: u64,
        error: String,
    ) {
        let Some(mut child) = self.children.remove(key) else {
            return;
        };
        let started_at = match &child.phase {
            Phase::Running(running) if child.incarnation == incarnation => Some(running.started_at),
            _ => None,
        };
        if let Some(started_at) = started_at {
            let old = take_phase(&mut child);
            self.leave_phase(old, None);
            child.phase = self.after_failure(
                myself,
                key,
                &mut child.tracker,
                incarnation,
                started_at,
                error,
            );
        }
        self.children.insert(key.clone(), child);
    }

    /// The key and incarnation of a supervised actor, if it is one we still care about.
    pub(super) fn child_of(&self, id: ActorId) -> Option<(ObjectKey, u64)> {
        self.by_actor.get(&id).cloned()
    }

    pub(super) fn snapshot(&self) -> SupervisorSnapshot {
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
    pub(super) fn shut_down(&mut self) {
        for (_, child) in std::mem::take(&mut self.children) {
            self.leave_phase(child.phase, None);
        }
    }

    /// Start `child` again after a failure, a reset or a changed spec.
    fn restart(&mut self, myself: &Myself<F>, key: &ObjectKey, child: &mut Child<F>) {
        let old = take_phase(child);
        self.leave_phase(old, Some("restarting"));
        child.restarts += 1;
        self.metrics.restarts.inc();
        child.incarnation = self.next_incarnation();
        child.phase = self.start(
            myself,
            key,
            &child.spec,
            &mut child.tracker,
            child.incarnation,
        );
    }

    /// Spawn one incarnation without waiting for its `pre_start`.
    ///
    /// `spawn_linked` would run the child's `pre_start` inside this handler, stalling every
    /// other child's supervision; the instant variant returns at once and a small task reports
    /// a failed `pre_start` back as `StartFailed` (ractor sends no supervision event for it).
    fn start(
        &mut self,
        myself: &Myself<F>,
        key: &ObjectKey,
        spec: &watch::Sender<F::Spec>,
        tracker: &mut RestartTracker,
        incarnation: u64,
    ) -> Phase<F> {
        let started_at = self.config.clock.now();
        let mailbox = MailboxDepth::new(self.metrics.mailbox_depth.clone());
        let pending = PendingFlag::default();
        let ctx = ChildContext::new(
            key.clone(),
            incarnation,
            spec.subscribe(),
            mailbox.clone(),
            pending.clone(),
        );
        let (actor, args) = self.factory.build(ctx);
        match ActorRuntime::<F::Child>::spawn_linked_instant(None, actor, args, myself.get_cell()) {
            Ok((actor, startup)) => {
                tracing::debug!(kind = self.factory.kind(), %key, incarnation, "child started");
                self.by_actor
                    .insert(actor.get_id(), (key.clone(), incarnation));
                self.metrics.active.inc();
                report_failed_start(myself.clone(), key.clone(), incarnation, startup);
                let running = Running {
                    actor,
                    started_at,
                    mailbox,
                    pending,
                };
                // Every incarnation reconciles once on start, through the same path as updates.
                self.nudge(key, &running);
                Phase::Running(running)
            }
            // Only a registry name clash fails here, and children are unnamed; still, never
            // lose a child: treat it like a failed start.
            Err(e) => {
                self.after_failure(myself, key, tracker, incarnation, started_at, e.to_string())
            }
        }
    }

    /// Ask the policy, then arm a restart timer or park the child.
    fn after_failure(
        &mut self,
        myself: &Myself<F>,
        key: &ObjectKey,
        tracker: &mut RestartTracker,
        incarnation: u64,
        started_at: tokio::time::Instant,
        error: String,
    ) -> Phase<F> {
        let now = self.config.clock.now();
        let kind = self.factory.kind();
        let verdict = tracker.on_failure(
            &self.config.policy,
            started_at.into_std(),
            now.into_std(),
            &mut self.rng,
        );
        match verdict {
            Verdict::Restart(delay) => {
                tracing::warn!(kind, %key, incarnation, ?delay, %error, "child failed; restart scheduled");
                let timer_key = key.clone();
                let timer = myself
                    .send_after(delay, move || SupervisorMsg::RestartDue {
                        key: timer_key,
                        incarnation,
                    })
                    .abort_handle();
                Phase::BackingOff {
                    delay,
                    due: now + delay,
                    last_error: error,
                    timer,
                }
            }
            Verdict::GiveUp { failures_in_window } => {
                tracing::error!(kind, %key, failures_in_window, %error, "child is crash-looping; parked");
                self.metrics.crash_looping.inc();
                self.factory.on_crash_loop(key, &error);
                Phase::CrashLooping { last_error: error }
            }
        }
    }

    /// Undo what a phase holds: stop the actor (when `stop` gives a reason), close its
    /// mailbox counter, cancel its timer, fix the gauges.
    fn leave_phase(&mut self, phase: Phase<F>, stop: Option<&str>) {
        match phase {
            Phase::Running(running) => {
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
        }
    }

    /// Send one nudge unless one is already queued.
    fn nudge(&self, key: &ObjectKey, running: &Running<F>) {
        if running.pending.mark()
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

/// Wait for a child's `pre_start` on a task of its own and report a failure as `StartFailed`.
fn report_failed_start<F: ChildFactory>(
    supervisor: Myself<F>,
    key: ObjectKey,
    incarnation: u64,
    startup: JoinHandle<Result<JoinHandle<()>, SpawnErr>>,
) {
    tokio::spawn(async move {
        let error = match startup.await {
            Ok(Ok(_running)) => return,
            Ok(Err(e)) => e.to_string(),
            Err(e) => e.to_string(),
        };
        // An error here means the supervisor itself is gone: nothing left to restart.
        let _ = supervisor.send_message(SupervisorMsg::StartFailed {
            key,
            incarnation,
            error,
        });
    });
}
