//! The supervisor's state machine: every transition of a child, none of them blocking.
//!
//! Entries are taken out of the map while a transition runs (`take`/`put`), so the helpers can
//! use `&mut self` (RNG, metrics, counters) while holding the child by value.

use ractor::{ActorId, ActorRuntime, SpawnErr, SupervisionEvent};
use rand::SeedableRng;
use rand::rngs::StdRng;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinHandle};
use tokio::time::Instant;

use super::child::{Child, Phase, Running, SpecCell};
use super::coalesce::{MailboxDepth, PendingFlag, send_counted};
use super::config::SupervisorConfig;
use super::factory::{
    ChildContext, ChildFactory, ChildMsg, IdleReport, Keepsake, Links, PlaceReport,
};
use super::host::Host;
use super::messages::{SupervisorMsg, SupervisorSnapshot};
use super::metrics::KindMetrics;
use super::restart_policy::{RestartTracker, Verdict};
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

    /// `Ensure`: a new entry, or update the spec and nudge, or restart a failed child whose
    /// spec changed.
    fn ensure<H: Host<F>>(&mut self, myself: &H, key: ObjectKey, spec: F::Spec) {
        let Some((key, mut child)) = self.take(&key) else {
            // A new entry starts through the wake queue: at once while the budget has room,
            // which it has but when a host adopts or a list brings thousands at once (an
            // operator or server actor starting over them, ADR 0011).
            let mut child = Box::new(Child {
                spec: SpecCell::Value(spec),
                tracker: RestartTracker::default(),
                // Not started yet: no timer or report can name incarnation 0.
                incarnation: 0,
                restarts: 0,
                phase: Phase::Passive {
                    due: None,
                    keepsake: None,
                    waiting: false,
                },
            });
            self.metrics.passive.inc();
            self.queue_wake(&key, &mut child);
            self.children.insert(key, child);
            return;
        };
        let changed = child.spec.set(spec);
        match &child.phase {
            Phase::Running(running) => self.nudge(&key, running),
            // Its own object changed: at once.
            Phase::Passive { .. } if changed => self.activate(myself, &key, &mut child),
            // Something it depends on may have (a relist says every object again).
            Phase::Passive { .. } => self.queue_wake(&key, &mut child),
            Phase::BackingOff { .. } | Phase::CrashLooping { .. } if changed => {
                tracing::info!(kind = self.factory.kind(), %key, "spec changed; restarting now");
                child.tracker.reset();
                self.restart(myself, &key, &mut child);
            }
            Phase::BackingOff { .. } | Phase::CrashLooping { .. } => {}
        }
        self.children.insert(key, child);
    }

    /// `Idle`: the incarnation converged with nothing due until `due`. Unless a nudge or
    /// message is queued for it (then it is busy, not idle), it is stopped and kept as an entry:
    /// its spec, its restart history (crash-loop accounting survives) and `due`, on the wheel.
    pub fn idle<H: Host<F>>(
        &mut self,
        myself: &H,
        key: &ObjectKey,
        incarnation: u64,
        due: Instant,
        keepsake: Keepsake,
    ) {
        let Some((key, mut child)) = self.take(key) else {
            return;
        };
        let idle = child.incarnation == incarnation
            && matches!(&child.phase, Phase::Running(r) if !r.pending.is_set() && r.mailbox.queued() == 0);
        if idle {
            let old = take_phase(&mut child);
            self.leave_phase(old, Some("passivated"));
            child.spec.park();
            child.phase = Phase::Passive {
                due: Some(due),
                keepsake: Some(keepsake),
                waiting: false,
            };
            self.metrics.passive.inc();
            self.schedule(myself, &key, due);
            tracing::debug!(kind = self.factory.kind(), %key, "passivated");
        }
        self.children.insert(key, child);
    }

    /// `Wake`: queues every passive child whose pass is due for a start, and arms the timer for
    /// the next.
    pub fn wake<H: Host<F>>(&mut self, myself: &H) {
        self.armed = None;
        let now = self.config.clock.now();
        while let Some((due, key)) = self.wheel.first().cloned() {
            if due > now {
                break;
            }
            self.wheel.pop_first();
            let Some((key, mut child)) = self.take(&key) else {
                continue;
            };
            if matches!(child.phase, Phase::Passive { due: Some(d), .. } if d == due) {
                self.queue_wake(&key, &mut child);
            }
            self.children.insert(key, child);
        }
        self.arm(myself);
    }

    /// `NudgeAll`: every running child gets a nudge, every passive one is queued for a start.
    fn nudge_all(&mut self) {
        let keys: Vec<ObjectKey> = self.children.keys().cloned().collect();
        for key in keys {
            let Some((key, mut child)) = self.take(&key) else {
                continue;
            };
            match &child.phase {
                Phase::Running(running) => self.nudge(&key, running),
                Phase::Passive { .. } => self.queue_wake(&key, &mut child),
                _ => {}
            }
            self.children.insert(key, child);
        }
    }

    /// Children running now (not passive, not backing off or parked).
    pub fn running(&self) -> usize {
        self.children
            .values()
            .filter(|c| matches!(c.phase, Phase::Running(_)))
            .count()
    }

    /// Starts a passive child: a new incarnation, not a restart (no failure happened, the
    /// restart history is kept as it is).
    fn activate<H: Host<F>>(&mut self, myself: &H, key: &ObjectKey, child: &mut Child<F>) {
        let keepsake = match take_phase(child) {
            Phase::Passive {
                keepsake, waiting, ..
            } => {
                self.metrics.passive.dec();
                if waiting {
                    self.metrics.waiting.dec();
                }
                keepsake
            }
            other => {
                self.leave_phase(other, None);
                None
            }
        };
        child.incarnation = self.next_incarnation();
        child.phase = self.start(
            myself,
            key,
            child.spec.subscribe(),
            &mut child.tracker,
            child.incarnation,
            keepsake,
        );
    }

    /// Puts `key` on the wheel at `due` and re-arms the one timer if `due` is the earliest.
    fn schedule<H: Host<F>>(&mut self, myself: &H, key: &ObjectKey, due: Instant) {
        self.wheel.insert((due, key.clone()));
        if self.armed.as_ref().is_none_or(|(at, _)| due < *at) {
            self.arm(myself);
        }
    }

    fn arm<H: Host<F>>(&mut self, myself: &H) {
        if let Some((_, timer)) = self.armed.take() {
            timer.abort();
        }
        let next = [self.wheel.first().map(|(due, _)| *due), self.hold_ends()]
            .into_iter()
            .flatten()
            .min();
        if let Some(due) = next {
            let delay = due.saturating_duration_since(self.config.clock.now());
            self.armed = Some((due, myself.send_after(delay, SupervisorMsg::Wake)));
        }
    }

    /// When the oldest hold ends, if children wait for it (the budget is full).
    fn hold_ends(&self) -> Option<Instant> {
        if self.waiting.is_empty() || self.held < self.config.wake_budget {
            return None;
        }
        self.holds.front().map(|(until, _, _)| *until)
    }

    /// Queues passive `child` for a start within the wake budget (once).
    fn queue_wake(&mut self, key: &ObjectKey, child: &mut Child<F>) {
        if let Phase::Passive { waiting, .. } = &mut child.phase
            && !*waiting
        {
            *waiting = true;
            self.metrics.waiting.inc();
            self.waiting.push_back(key.clone());
        }
    }

    /// Starts waiting children while the wake budget has room, after taking back the places
    /// held longer than `wake_hold`; arms the timer for the next hold to end if some still wait.
    fn admit<H: Host<F>>(&mut self, myself: &H) {
        let now = self.config.clock.now();
        // Holds that ended take their place back; entries of children that gave theirs back
        // already are dropped once they reach the front, so the queue stays near `held`.
        while let Some((until, key, incarnation)) = self.holds.front() {
            let holder = self
                .children
                .get_mut(key)
                .filter(|c| c.incarnation == *incarnation)
                .and_then(|c| match &mut c.phase {
                    Phase::Running(running) if running.woken => Some(running),
                    _ => None,
                });
            match holder {
                Some(running) if *until <= now => {
                    running.woken = false;
                    self.held -= 1;
                }
                Some(_) => break,
                None => {}
            }
            self.holds.pop_front();
        }
        shrink(&mut self.holds);
        while self.held < self.config.wake_budget {
            let Some(key) = self.waiting.pop_front() else {
                break;
            };
            let Some((key, mut child)) = self.take(&key) else {
                continue;
            };
            if matches!(child.phase, Phase::Passive { waiting: true, .. }) {
                self.starting_woken = true;
                self.activate(myself, &key, &mut child);
                self.starting_woken = false;
                if let Phase::Running(running) = &mut child.phase {
                    running.woken = true;
                    self.held += 1;
                    self.holds.push_back((
                        now + self.config.wake_hold,
                        key.clone(),
                        child.incarnation,
                    ));
                }
            }
            self.children.insert(key, child);
        }
        shrink(&mut self.waiting);
        if let Some(ends) = self.hold_ends()
            && self.armed.as_ref().is_none_or(|(at, _)| ends < *at)
        {
            self.arm(myself);
        }
    }

    /// `Released`: a child started from the queue is done with its pass and stays running.
    fn released(&mut self, key: &ObjectKey, incarnation: u64) {
        if let Some(child) = self.children.get_mut(key)
            && child.incarnation == incarnation
            && let Phase::Running(running) = &mut child.phase
            && std::mem::take(&mut running.woken)
        {
            self.held -= 1;
        }
    }

    /// `Remove`: stop the child and forget it.
    pub fn remove(&mut self, key: &ObjectKey) {
        self.remove_because(key, "object removed");
    }

    fn remove_because(&mut self, key: &ObjectKey, why: &'static str) {
        let Some((key, child)) = self.take(key) else {
            return;
        };
        tracing::info!(kind = self.factory.kind(), %key, why, "stopping its actor");
        self.leave_phase(child.phase, Some(why));
    }

    /// `Reset`: forget the history; start the child if it is not running.
    pub fn reset<H: Host<F>>(&mut self, myself: &H, key: &ObjectKey) {
        let Some((key, mut child)) = self.take(key) else {
            return;
        };
        child.tracker.reset();
        if !matches!(child.phase, Phase::Running(_)) {
            self.restart(myself, &key, &mut child);
        }
        self.children.insert(key, child);
    }

    /// `Forward`: deliver to a running child, counted in the depth gauge. A passive child is
    /// started instead (its first message is a pass, which is what any message asks of it).
    pub fn forward<H: Host<F>>(&mut self, myself: &H, key: &ObjectKey, msg: ChildMsg<F>) {
        match self.children.get(key).map(|c| &c.phase) {
            Some(Phase::Running(running)) => {
                if send_counted(&running.actor, &running.mailbox, msg).is_err() {
                    tracing::debug!(kind = self.factory.kind(), %key, "child exiting; dropped");
                }
            }
            Some(Phase::Passive { .. }) => {
                if let Some((key, mut child)) = self.take(key) {
                    self.activate(myself, &key, &mut child);
                    self.children.insert(key, child);
                }
            }
            _ => tracing::debug!(kind = self.factory.kind(), %key, "no running child; dropped"),
        }
    }

    /// `RestartDue`: the backoff timer fired.
    pub fn restart_due<H: Host<F>>(&mut self, myself: &H, key: &ObjectKey, incarnation: u64) {
        let Some((key, mut child)) = self.take(key) else {
            tracing::debug!(kind = self.factory.kind(), %key, "restart timer for a removed child");
            return;
        };
        if child.incarnation == incarnation && matches!(child.phase, Phase::BackingOff { .. }) {
            self.restart(myself, &key, &mut child);
        } else {
            tracing::debug!(kind = self.factory.kind(), %key, incarnation, "stale restart timer");
        }
        self.children.insert(key, child);
    }

    /// A child incarnation failed: crashed, panicked, stopped on its own or failed to start.
    /// Reports about an older incarnation, or one already handled, are ignored.
    pub fn failed<H: Host<F>>(
        &mut self,
        myself: &H,
        key: &ObjectKey,
        incarnation: u64,
        error: String,
    ) {
        let Some((key, mut child)) = self.take(key) else {
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
                &key,
                &mut child.tracker,
                incarnation,
                started_at,
                error,
            );
        }
        self.children.insert(key, child);
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

    /// Start `child` again after a failure, a reset or a changed spec.
    fn restart<H: Host<F>>(&mut self, myself: &H, key: &ObjectKey, child: &mut Child<F>) {
        let old = take_phase(child);
        self.leave_phase(old, Some("restarting"));
        child.restarts += 1;
        self.metrics.restarts.inc();
        child.incarnation = self.next_incarnation();
        // A restart after a failure starts from nothing: what the failed incarnation knew
        // may be what made it fail.
        child.phase = self.start(
            myself,
            key,
            child.spec.subscribe(),
            &mut child.tracker,
            child.incarnation,
            None,
        );
    }

    /// Spawn one incarnation without waiting for its `pre_start`.
    ///
    /// `spawn_linked` would run the child's `pre_start` inside this handler, stalling every
    /// other child's supervision; the instant variant returns at once and a small task reports
    /// a failed `pre_start` back as `StartFailed` (ractor sends no supervision event for it).
    fn start<H: Host<F>>(
        &mut self,
        myself: &H,
        key: &ObjectKey,
        spec: watch::Receiver<F::Spec>,
        tracker: &mut RestartTracker,
        incarnation: u64,
        keepsake: Option<Keepsake>,
    ) -> Phase<F> {
        let started_at = self.config.clock.now();
        let mailbox = MailboxDepth::new(self.metrics.mailbox_depth.clone());
        let pending = PendingFlag::default();
        let idle: IdleReport = {
            let (host, key) = (myself.clone(), key.clone());
            Arc::new(move |due, keepsake| {
                let _ = host.send(SupervisorMsg::Idle {
                    key: key.clone(),
                    incarnation,
                    due,
                    keepsake,
                });
            })
        };
        let release: PlaceReport = {
            let (host, key) = (myself.clone(), key.clone());
            Arc::new(move || {
                let _ = host.send(SupervisorMsg::Released {
                    key: key.clone(),
                    incarnation,
                });
            })
        };
        let ctx = ChildContext::new(
            key.clone(),
            incarnation,
            spec,
            Links {
                mailbox: mailbox.clone(),
                pending: pending.clone(),
                idle,
                place: self.starting_woken,
                release,
                keepsake,
                dispatch: self.metrics.dispatch.clone(),
            },
        );
        let (actor, args) = self.factory.build(ctx);
        match ActorRuntime::<F::Child>::spawn_linked_instant(None, actor, args, myself.cell()) {
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
                    woken: false,
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
    fn after_failure<H: Host<F>>(
        &mut self,
        myself: &H,
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
                let timer = myself.send_after(
                    delay,
                    SupervisorMsg::RestartDue {
                        key: key.clone(),
                        incarnation,
                    },
                );
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

/// A queue a burst grew (a relist queues every entry) gives its buffer back once it drained:
/// a `VecDeque` keeps its largest capacity otherwise (~0.6 MB after 8,000 starts).
fn shrink<T>(queue: &mut VecDeque<T>) {
    if queue.capacity() > 64 && queue.len() < queue.capacity() / 4 {
        queue.shrink_to(queue.len() * 2);
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

/// Wait for a child's `pre_start` on a task of its own and report a failure as `StartFailed`.
fn report_failed_start<F: ChildFactory, H: Host<F>>(
    supervisor: H,
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
        let _ = supervisor.send(SupervisorMsg::StartFailed {
            key,
            incarnation,
            error,
        });
    });
}
