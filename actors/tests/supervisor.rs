//! The keyed supervisor against a real ractor child, on paused tokio time.
//!
//! The test child reports every lifecycle step through a channel with the virtual instant it
//! happened at, so restart delays are measured exactly: under `start_paused` the runtime jumps
//! straight to the next timer whenever every task is idle.

use ractor::{Actor, ActorProcessingErr, ActorRef};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use terdut_actors::key::ObjectKey;
use terdut_actors::supervisor::{
    ChildContext, ChildFactory, ChildStatus, Jitter, KeyedSupervisor, KindMetrics, RestartPolicy,
    SupervisorConfig, SupervisorMetrics, SupervisorMsg, SupervisorSnapshot, snapshot,
};
use tokio::sync::{Notify, mpsc};
use tokio::time::{Instant, timeout};

/// What the test child and the crash-loop hook report.
#[derive(Clone, Debug)]
enum Ev {
    Started {
        key: String,
        inc: u64,
        at: Instant,
        /// What a passivated incarnation left for this one.
        keepsake: Option<u32>,
    },
    PreStartFailed {
        key: String,
    },
    Boom {
        key: String,
        at: Instant,
    },
    Nudged {
        key: String,
        version: u32,
    },
    Pinged {
        key: String,
        inc: u64,
    },
    Stopped {
        key: String,
    },
    CrashLoop {
        key: String,
        error: String,
    },
}

/// How an injected `pre_start` failure fails.
#[derive(Clone, Copy, Debug)]
enum StartFault {
    Err,
    Panic,
}

#[derive(Debug)]
struct Probe {
    tx: mpsc::UnboundedSender<Ev>,
    start_faults: Mutex<HashMap<String, VecDeque<StartFault>>>,
}

impl Probe {
    fn report(&self, ev: Ev) {
        // The receiver lives as long as the test.
        let _ = self.tx.send(ev);
    }
}

/// The spec: only a version, so "changed" is easy to express.
#[derive(Clone, Debug, PartialEq)]
struct Spec(u32);

enum TestMsg {
    Nudge,
    Boom,
    Ping,
    StopSelf,
    /// Keep the child busy until notified, so its mailbox fills up.
    Hold(Arc<Notify>),
    /// Done with its pass and staying up: give back a place in the wake budget.
    StayUp,
    /// Report idle with nothing due for `in_`, leaving `memo` for the next incarnation.
    Idle {
        in_: Duration,
        memo: u32,
    },
}

struct TestChild {
    probe: Arc<Probe>,
}

impl Actor for TestChild {
    type Msg = TestMsg;
    type State = ChildContext<Spec>;
    type Arguments = ChildContext<Spec>;

    async fn pre_start(
        &self,
        _myself: ActorRef<TestMsg>,
        ctx: ChildContext<Spec>,
    ) -> Result<Self::State, ActorProcessingErr> {
        let key = ctx.key().to_string();
        let fault = self
            .probe
            .start_faults
            .lock()
            .expect("lock")
            .get_mut(&key)
            .and_then(VecDeque::pop_front);
        match fault {
            Some(StartFault::Err) => {
                self.probe.report(Ev::PreStartFailed { key });
                return Err("injected pre_start error".into());
            }
            Some(StartFault::Panic) => {
                self.probe.report(Ev::PreStartFailed { key });
                panic!("injected pre_start panic");
            }
            None => {}
        }
        self.probe.report(Ev::Started {
            key,
            inc: ctx.incarnation(),
            at: Instant::now(),
            keepsake: ctx.take_keepsake::<u32>(),
        });
        Ok(ctx)
    }

    async fn handle(
        &self,
        myself: ActorRef<TestMsg>,
        msg: TestMsg,
        ctx: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        ctx.message_received();
        let key = ctx.key().to_string();
        match msg {
            TestMsg::Nudge => {
                ctx.nudge_received();
                let version = ctx.spec().0;
                self.probe.report(Ev::Nudged { key, version });
            }
            TestMsg::Boom => {
                self.probe.report(Ev::Boom {
                    key,
                    at: Instant::now(),
                });
                panic!("boom");
            }
            TestMsg::Ping => self.probe.report(Ev::Pinged {
                key,
                inc: ctx.incarnation(),
            }),
            TestMsg::StopSelf => myself.stop(Some("done".into())),
            TestMsg::Hold(release) => release.notified().await,
            TestMsg::StayUp => ctx.release_place(),
            TestMsg::Idle { in_, memo } => ctx.report_idle(Instant::now() + in_, Box::new(memo)),
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<TestMsg>,
        ctx: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        self.probe.report(Ev::Stopped {
            key: ctx.key().to_string(),
        });
        Ok(())
    }
}

struct TestFactory {
    probe: Arc<Probe>,
}

impl ChildFactory for TestFactory {
    type Child = TestChild;
    type Spec = Spec;

    fn kind(&self) -> &'static str {
        "test"
    }

    fn build(&self, ctx: ChildContext<Spec>) -> (TestChild, ChildContext<Spec>) {
        let child = TestChild {
            probe: Arc::clone(&self.probe),
        };
        (child, ctx)
    }

    fn nudge(&self) -> TestMsg {
        TestMsg::Nudge
    }

    fn on_crash_loop(&self, key: &ObjectKey, last_error: &str) {
        self.probe.report(Ev::CrashLoop {
            key: key.to_string(),
            error: last_error.to_owned(),
        });
    }
}

type Sup = ActorRef<SupervisorMsg<TestFactory>>;

struct Harness {
    sup: Sup,
    rx: mpsc::UnboundedReceiver<Ev>,
    probe: Arc<Probe>,
    metrics: KindMetrics,
}

const A: &str = "ns/a";
const B: &str = "ns/b";

fn key(s: &str) -> ObjectKey {
    let (ns, name) = s.split_once('/').expect("ns/name");
    ObjectKey::new(ns, name)
}

/// No jitter unless a test asks: delays are then exact and easy to assert.
fn exact_policy() -> RestartPolicy {
    RestartPolicy {
        jitter: Jitter::None,
        max_restarts: 100,
        ..RestartPolicy::default()
    }
}

async fn start(policy: RestartPolicy) -> Harness {
    start_with(policy, |_| {}).await
}

/// [`start`] with settings of the table changed by `tune`.
async fn start_with(policy: RestartPolicy, tune: impl FnOnce(&mut SupervisorConfig)) -> Harness {
    let (tx, rx) = mpsc::unbounded_channel();
    let probe = Arc::new(Probe {
        tx,
        start_faults: Mutex::default(),
    });
    let metrics = SupervisorMetrics::default();
    let mut config = SupervisorConfig {
        policy,
        metrics: metrics.clone(),
        jitter_seed: Some(42),
        ..SupervisorConfig::default()
    };
    tune(&mut config);
    let factory = TestFactory {
        probe: Arc::clone(&probe),
    };
    let (sup, _) = Actor::spawn(None, KeyedSupervisor::new(factory, config), ())
        .await
        .expect("supervisor starts");
    Harness {
        sup,
        rx,
        probe,
        metrics: metrics.kind("test"),
    }
}

impl Harness {
    fn send(&self, msg: SupervisorMsg<TestFactory>) {
        self.sup.cast(msg).expect("supervisor alive");
    }

    fn ensure(&self, k: &str, version: u32) {
        self.send(SupervisorMsg::Ensure(key(k), Spec(version)));
    }

    fn forward(&self, k: &str, msg: TestMsg) {
        self.send(SupervisorMsg::Forward(key(k), msg));
    }

    /// The next event matching `pred`, skipping others; fails after a virtual day.
    async fn wait_for(&mut self, what: &str, pred: impl Fn(&Ev) -> bool) -> Ev {
        loop {
            let ev = timeout(Duration::from_secs(24 * 3600), self.rx.recv())
                .await
                .unwrap_or_else(|_| panic!("no {what} within a (virtual) day"))
                .expect("probe channel open");
            if pred(&ev) {
                return ev;
            }
        }
    }

    async fn started(&mut self, k: &str) -> (u64, Instant) {
        let (inc, at, _) = self.started_with(k).await;
        (inc, at)
    }

    /// The next start of `k`, with what it was left by a passivated incarnation.
    async fn started_with(&mut self, k: &str) -> (u64, Instant, Option<u32>) {
        match self
            .wait_for(
                "start",
                |e| matches!(e, Ev::Started { key, .. } if key == k),
            )
            .await
        {
            Ev::Started {
                inc, at, keepsake, ..
            } => (inc, at, keepsake),
            _ => unreachable!("filtered"),
        }
    }

    /// Make `k` report idle for `in_` and wait until it is stopped; returns when.
    async fn passivate(&mut self, k: &str, in_: Duration, memo: u32) -> Instant {
        self.forward(k, TestMsg::Idle { in_, memo });
        self.wait_for("stop", |e| matches!(e, Ev::Stopped { key } if key == k))
            .await;
        Instant::now()
    }

    /// Make `k` panic and return the instant it did.
    async fn boom(&mut self, k: &str) -> Instant {
        self.forward(k, TestMsg::Boom);
        match self
            .wait_for("boom", |e| matches!(e, Ev::Boom { key, .. } if key == k))
            .await
        {
            Ev::Boom { at, .. } => at,
            _ => unreachable!("filtered"),
        }
    }

    /// Every event within `span` of virtual time.
    async fn drain_for(&mut self, span: Duration) -> Vec<Ev> {
        let deadline = Instant::now() + span;
        let mut out = Vec::new();
        while let Ok(Some(ev)) = tokio::time::timeout_at(deadline, self.rx.recv()).await {
            out.push(ev);
        }
        out
    }

    async fn snapshot(&self) -> SupervisorSnapshot {
        snapshot(&self.sup, Duration::from_secs(5))
            .await
            .expect("snapshot")
    }

    async fn status(&self, k: &str) -> ChildStatus {
        self.snapshot().await.children[&key(k)].status.clone()
    }
}

/// Crash `k` `n` times in a row, returning the measured failure-to-restart delays.
async fn crash_repeatedly(h: &mut Harness, k: &str, n: usize) -> Vec<Duration> {
    let mut delays = Vec::new();
    for _ in 0..n {
        let failed_at = h.boom(k).await;
        let (_, restarted_at) = h.started(k).await;
        delays.push(restarted_at - failed_at);
    }
    delays
}

fn ms(d: &[Duration]) -> Vec<u128> {
    d.iter().map(Duration::as_millis).collect()
}

#[tokio::test(start_paused = true)]
async fn a_crash_restarts_only_that_child_while_its_sibling_keeps_working() {
    let mut h = start(exact_policy()).await;
    h.ensure(A, 1);
    h.ensure(B, 1);
    let (a0, _) = h.started(A).await;
    let (b0, _) = h.started(B).await;

    h.forward(A, TestMsg::Boom);
    h.forward(B, TestMsg::Ping);
    h.wait_for(
        "b ping",
        |e| matches!(e, Ev::Pinged { key, inc } if key == B && *inc == b0),
    )
    .await;
    let (a1, _) = h.started(A).await;
    assert_ne!(a0, a1, "a runs as a new incarnation");

    h.forward(B, TestMsg::Ping);
    h.wait_for(
        "b ping",
        |e| matches!(e, Ev::Pinged { key, inc } if key == B && *inc == b0),
    )
    .await;
    let snap = h.snapshot().await;
    assert_eq!(snap.children[&key(A)].restarts, 1);
    assert_eq!(snap.children[&key(B)].restarts, 0);
    assert_eq!(snap.children[&key(B)].incarnation, b0);
    assert_eq!(h.metrics.restarts.get(), 1);
    assert_eq!(h.metrics.active.get(), 2);
}

#[tokio::test(start_paused = true)]
async fn successive_crashes_wait_exponentially_longer() {
    let mut h = start(exact_policy()).await;
    h.ensure(A, 1);
    h.started(A).await;
    let delays = crash_repeatedly(&mut h, A, 6).await;
    eprintln!("measured restart delays, no jitter (ms): {:?}", ms(&delays));
    assert_eq!(ms(&delays), [500, 1000, 2000, 4000, 8000, 16000]);
}

#[tokio::test(start_paused = true)]
async fn jittered_delays_grow_within_their_bounds() {
    let policy = RestartPolicy {
        max_restarts: 100,
        ..RestartPolicy::default()
    };
    assert_eq!(policy.jitter, Jitter::Equal, "the production default");
    let mut h = start(policy.clone()).await;
    h.ensure(A, 1);
    h.started(A).await;
    let delays = crash_repeatedly(&mut h, A, 8).await;
    eprintln!(
        "measured restart delays, equal jitter (ms): {:?}",
        ms(&delays)
    );
    for (i, d) in delays.iter().enumerate() {
        let ceiling = policy.ceiling(i as u32);
        // Timers have millisecond resolution: allow rounding up by one tick.
        assert!(
            *d >= ceiling / 2 && *d <= ceiling + Duration::from_millis(1),
            "attempt {i}: {d:?} outside [{:?}, {ceiling:?}]",
            ceiling / 2
        );
    }
    for w in delays.windows(2) {
        assert!(w[1] > w[0], "delays must grow: {:?}", ms(&delays));
    }
}

#[tokio::test(start_paused = true)]
async fn a_crash_looping_child_is_parked_reported_once_and_revived_by_a_changed_spec() {
    let policy = RestartPolicy {
        max_restarts: 3,
        ..exact_policy()
    };
    let mut h = start(policy).await;
    h.ensure(A, 1);
    h.started(A).await;
    crash_repeatedly(&mut h, A, 3).await;
    h.boom(A).await; // the fourth failure in the window: over the limit

    let events = h.drain_for(Duration::from_secs(3600)).await;
    let hooks: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, Ev::CrashLoop { .. }))
        .collect();
    assert_eq!(hooks.len(), 1, "hook fires exactly once: {events:?}");
    assert!(matches!(hooks[0], Ev::CrashLoop { key, error } if key == A && error.contains("boom")));
    assert!(
        !events.iter().any(|e| matches!(e, Ev::Started { .. })),
        "no restart while parked: {events:?}"
    );
    assert!(
        matches!(h.status(A).await, ChildStatus::CrashLooping { last_error } if last_error.contains("boom"))
    );
    assert_eq!(
        (h.metrics.crash_looping.get(), h.metrics.active.get()),
        (1, 0)
    );

    h.ensure(A, 1); // same spec: stays parked
    assert!(h.drain_for(Duration::from_secs(60)).await.is_empty());
    h.ensure(A, 2); // the object changed: fresh start
    h.started(A).await;
    let snap = h.snapshot().await;
    assert_eq!(snap.children[&key(A)].status, ChildStatus::Running);
    assert_eq!(snap.children[&key(A)].attempt, 0, "history was reset");
    assert_eq!(
        (h.metrics.crash_looping.get(), h.metrics.active.get()),
        (0, 1)
    );
}

#[tokio::test(start_paused = true)]
async fn remove_stops_the_child_and_it_is_not_restarted() {
    let mut h = start(exact_policy()).await;
    h.ensure(A, 1);
    h.ensure(B, 1);
    h.started(A).await;
    h.started(B).await;

    h.send(SupervisorMsg::Remove(key(A)));
    h.wait_for(
        "a stopped",
        |e| matches!(e, Ev::Stopped { key } if key == A),
    )
    .await;
    // B backs off, then is removed: its timer must not bring it back.
    h.boom(B).await;
    h.send(SupervisorMsg::Remove(key(B)));

    let events = h.drain_for(Duration::from_secs(3600)).await;
    assert!(
        !events.iter().any(|e| matches!(e, Ev::Started { .. })),
        "{events:?}"
    );
    assert!(h.snapshot().await.children.is_empty());
    assert_eq!(h.metrics.active.get(), 0);
    assert_eq!(h.metrics.restarts.get(), 0);
}

#[tokio::test(start_paused = true)]
async fn retain_stops_every_child_it_does_not_name_and_ping_answers() {
    // What a restarted routing writer sends each host (docs/adr/0017-liveness.md).
    let mut h = start(exact_policy()).await;
    h.ensure(A, 1);
    h.ensure(B, 1);
    h.started(A).await;
    h.started(B).await;

    h.send(SupervisorMsg::Retain([key(B)].into_iter().collect()));
    h.wait_for(
        "a stopped",
        |e| matches!(e, Ev::Stopped { key } if key == A),
    )
    .await;
    let snap = h.snapshot().await;
    assert_eq!(
        snap.children.keys().cloned().collect::<Vec<_>>(),
        vec![key(B)]
    );
    assert_eq!(h.metrics.active.get(), 1);

    let (tx, rx) = tokio::sync::oneshot::channel();
    h.send(SupervisorMsg::Ping(tx.into()));
    timeout(Duration::from_secs(5), rx)
        .await
        .expect("answered")
        .expect("answered");
}

#[tokio::test(start_paused = true)]
async fn a_failing_pre_start_is_retried_with_backoff() {
    let mut h = start(exact_policy()).await;
    h.probe
        .start_faults
        .lock()
        .expect("lock")
        .insert(A.into(), [StartFault::Err, StartFault::Panic].into());
    let t0 = Instant::now();
    h.ensure(A, 1);
    let failed_starts = h
        .drain_for(Duration::from_millis(1499))
        .await
        .into_iter()
        .filter(|e| matches!(e, Ev::PreStartFailed { key } if key == A))
        .count();
    assert_eq!(failed_starts, 2);
    let (_, at) = h.started(A).await;
    // Two failed starts: 0.5 s + 1 s of backoff before the third attempt succeeds.
    assert_eq!(at - t0, Duration::from_millis(1500));
    let snap = h.snapshot().await;
    assert_eq!(snap.children[&key(A)].restarts, 2);
    assert_eq!(snap.children[&key(A)].status, ChildStatus::Running);
    assert_eq!(h.metrics.active.get(), 1);
}

#[tokio::test(start_paused = true)]
async fn stale_restart_timers_are_ignored() {
    let mut h = start(exact_policy()).await;
    h.ensure(A, 1);
    let (failed_inc, _) = h.started(A).await;
    h.boom(A).await;
    // Wait until the supervisor has seen the failure.
    while !matches!(h.status(A).await, ChildStatus::BackingOff { .. }) {
        tokio::task::yield_now().await;
    }

    for incarnation in [failed_inc + 100, failed_inc.wrapping_sub(1)] {
        h.send(SupervisorMsg::RestartDue {
            key: key(A),
            incarnation,
        });
    }
    let early = h.drain_for(Duration::from_millis(400)).await;
    assert!(
        !early.iter().any(|e| matches!(e, Ev::Started { .. })),
        "a timer for another incarnation restarted it: {early:?}"
    );
    assert!(matches!(h.status(A).await, ChildStatus::BackingOff { .. }));

    let (now_inc, _) = h.started(A).await; // the real timer
    // A duplicate of the timer that already fired.
    h.send(SupervisorMsg::RestartDue {
        key: key(A),
        incarnation: failed_inc,
    });
    let late = h.drain_for(Duration::from_secs(3600)).await;
    assert!(
        !late.iter().any(|e| matches!(e, Ev::Started { .. })),
        "{late:?}"
    );
    let snap = h.snapshot().await;
    assert_eq!(snap.children[&key(A)].incarnation, now_inc);
    assert_eq!(snap.children[&key(A)].restarts, 1);
}

#[tokio::test(start_paused = true)]
async fn staying_up_for_the_stable_period_resets_the_backoff() {
    let policy = exact_policy();
    let mut h = start(policy.clone()).await;
    h.ensure(A, 1);
    h.started(A).await;
    let quick = crash_repeatedly(&mut h, A, 3).await;
    assert_eq!(ms(&quick), [500, 1000, 2000]);

    tokio::time::sleep(policy.stable_after).await;
    let after_stable = crash_repeatedly(&mut h, A, 2).await;
    assert_eq!(
        ms(&after_stable),
        [500, 1000],
        "back to base after a stable run"
    );
    assert_eq!(h.snapshot().await.children[&key(A)].attempt, 2);
}

#[tokio::test(start_paused = true)]
async fn a_child_that_stops_on_its_own_is_restarted() {
    let mut h = start(exact_policy()).await;
    h.ensure(A, 1);
    let (first, _) = h.started(A).await;
    h.forward(A, TestMsg::StopSelf);
    let (second, _) = h.started(A).await;
    assert_ne!(first, second);
    assert_eq!(h.snapshot().await.children[&key(A)].restarts, 1);
}

#[tokio::test(start_paused = true)]
async fn ensures_coalesce_into_one_nudge_that_sees_the_latest_spec() {
    let mut h = start(exact_policy()).await;
    h.ensure(A, 1);
    h.started(A).await;
    h.wait_for("first nudge", |e| {
        matches!(e, Ev::Nudged { version: 1, .. })
    })
    .await;
    let release = Arc::new(Notify::new());
    h.forward(A, TestMsg::Hold(Arc::clone(&release)));
    for version in 2..=50 {
        h.ensure(A, version);
    }
    // Let the supervisor work through its mailbox while the child is held.
    h.snapshot().await;
    assert_eq!(
        h.metrics.mailbox_depth.get(),
        1,
        "one queued nudge, whatever the burst"
    );

    release.notify_one();
    let nudges: Vec<_> = h
        .drain_for(Duration::from_secs(60))
        .await
        .into_iter()
        .filter(|e| matches!(e, Ev::Nudged { .. }))
        .collect();
    assert!(
        matches!(nudges.as_slice(), [Ev::Nudged { key, version: 50 }] if key == A),
        "{nudges:?}"
    );
    assert_eq!(h.metrics.mailbox_depth.get(), 0);

    h.ensure(A, 51); // after handling, the next change nudges again
    h.wait_for("nudge", |e| matches!(e, Ev::Nudged { version: 51, .. }))
        .await;
}

#[tokio::test(start_paused = true)]
async fn a_changed_spec_cuts_a_backoff_short() {
    let mut h = start(exact_policy()).await;
    h.ensure(A, 1);
    h.started(A).await;
    crash_repeatedly(&mut h, A, 4).await; // the next delay would be 8 s
    let failed_at = h.boom(A).await;
    while !matches!(h.status(A).await, ChildStatus::BackingOff { .. }) {
        tokio::task::yield_now().await;
    }
    h.ensure(A, 2);
    let (_, at) = h.started(A).await;
    assert_eq!(at - failed_at, Duration::ZERO);
    // Exactly one start: the aborted timer does not start a second incarnation.
    let events = h.drain_for(Duration::from_secs(3600)).await;
    assert!(
        !events.iter().any(|e| matches!(e, Ev::Started { .. })),
        "{events:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn stopping_the_supervisor_stops_its_children_and_clears_the_gauges() {
    let mut h = start(exact_policy()).await;
    h.ensure(A, 1);
    h.ensure(B, 1);
    h.started(A).await;
    h.started(B).await;
    h.sup
        .stop_and_wait(None, Some(Duration::from_secs(30)))
        .await
        .expect("supervisor stops");
    let stopped = h
        .drain_for(Duration::from_secs(1))
        .await
        .into_iter()
        .filter(|e| matches!(e, Ev::Stopped { .. }))
        .count();
    assert_eq!(stopped, 2);
    assert_eq!(h.metrics.active.get(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_idle_child_is_stopped_kept_as_an_entry_and_started_at_its_deadline() {
    let mut h = start(exact_policy()).await;
    h.ensure(A, 1);
    h.ensure(B, 1);
    let (a0, _) = h.started(A).await;
    h.started(B).await;

    let idle_at = h.passivate(A, Duration::from_secs(300), 7).await;
    assert!(
        matches!(h.status(A).await, ChildStatus::Passive { due_in: Some(d) } if d <= Duration::from_secs(300)),
        "{:?}",
        h.status(A).await
    );
    assert_eq!(h.metrics.active.get(), 1, "only b has an actor");
    assert_eq!(h.metrics.passive.get(), 1);

    // Nothing happens to a until its next pass is due; then it runs, with its memory.
    let (a1, at, keepsake) = h.started_with(A).await;
    assert!(
        at - idle_at >= Duration::from_secs(299),
        "{:?}",
        at - idle_at
    );
    assert_ne!(a0, a1, "a new incarnation");
    assert_eq!(
        keepsake,
        Some(7),
        "the passivated incarnation's memory carries over"
    );
    assert_eq!(h.metrics.passive.get(), 0);
    assert_eq!(h.metrics.active.get(), 2);
    assert_eq!(
        h.snapshot().await.children[&key(A)].restarts,
        0,
        "not a restart"
    );
}

#[tokio::test(start_paused = true)]
async fn an_event_starts_a_passive_child_at_once_with_the_newest_spec() {
    let mut h = start(exact_policy()).await;
    h.ensure(A, 1);
    h.started(A).await;
    let idle_at = h.passivate(A, Duration::from_secs(3600), 3).await;

    h.ensure(A, 2);
    let (_, at, keepsake) = h.started_with(A).await;
    assert_eq!(at, idle_at, "started on the event, not at the deadline");
    assert_eq!(keepsake, Some(3));
    // The start is the pass the event asked for: the spec it reads is the new one.
    h.forward(A, TestMsg::Nudge);
    h.wait_for(
        "nudge",
        |e| matches!(e, Ev::Nudged { key, version } if key == A && *version == 2),
    )
    .await;

    // A message for a passive child starts it too.
    h.passivate(A, Duration::from_secs(3600), 4).await;
    h.forward(A, TestMsg::Ping);
    let (_, _, keepsake) = h.started_with(A).await;
    assert_eq!(keepsake, Some(4));
    // The old deadline is stale: it starts nothing when it comes.
    let later = h.drain_for(Duration::from_secs(7200)).await;
    assert!(
        !later.iter().any(|e| matches!(e, Ev::Started { .. })),
        "{later:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_busy_or_stale_incarnation_is_not_passivated() {
    let mut h = start(exact_policy()).await;
    h.ensure(A, 1);
    let (a0, _) = h.started(A).await;
    let idle = |incarnation| SupervisorMsg::Idle {
        key: key(A),
        incarnation,
        due: Instant::now() + Duration::from_secs(600),
        keepsake: Box::new(0u32),
    };

    // An idle report from an incarnation that is no longer the running one.
    h.send(idle(a0 + 100));
    assert!(matches!(h.status(A).await, ChildStatus::Running));

    // A nudge is queued (the child is busy): an event is waiting, the child is not idle.
    let release = Arc::new(Notify::new());
    h.forward(A, TestMsg::Hold(Arc::clone(&release)));
    h.ensure(A, 2);
    h.send(idle(a0));
    assert!(matches!(h.status(A).await, ChildStatus::Running));
    release.notify_one();
    h.wait_for(
        "nudge",
        |e| matches!(e, Ev::Nudged { key, version } if key == A && *version == 2),
    )
    .await;
    assert_eq!(h.metrics.passive.get(), 0);
}

#[tokio::test(start_paused = true)]
async fn crash_loop_accounting_survives_passivation_and_a_crash_forgets_the_keepsake() {
    let mut h = start(exact_policy()).await;
    h.ensure(A, 1);
    h.started(A).await;
    assert_eq!(ms(&crash_repeatedly(&mut h, A, 3).await), [500, 1000, 2000]);

    h.passivate(A, Duration::from_secs(3600), 9).await;
    h.forward(A, TestMsg::Ping);
    let (_, _, keepsake) = h.started_with(A).await;
    assert_eq!(keepsake, Some(9));

    // The next crash continues the backoff where it was, and the restarted incarnation
    // starts from nothing.
    let failed_at = h.boom(A).await;
    let (_, restarted_at, keepsake) = h.started_with(A).await;
    assert_eq!((restarted_at - failed_at).as_millis(), 4000);
    assert_eq!(keepsake, None);
    assert_eq!(h.snapshot().await.children[&key(A)].restarts, 4);
}

#[tokio::test(start_paused = true)]
async fn one_timer_serves_every_passive_child_in_deadline_order() {
    let mut h = start(exact_policy()).await;
    let keys = ["ns/c", "ns/d", "ns/e"];
    for k in keys {
        h.ensure(k, 1);
        h.started(k).await;
    }
    // Passivated in one order, due in another.
    for (k, secs) in [("ns/c", 300), ("ns/d", 100), ("ns/e", 200)] {
        h.passivate(k, Duration::from_secs(secs), 0).await;
    }
    assert_eq!(h.metrics.active.get(), 0);
    assert_eq!(h.metrics.passive.get(), 3);
    let mut order = vec![];
    for _ in 0..3 {
        if let Ev::Started { key, .. } = h
            .wait_for("start", |e| matches!(e, Ev::Started { .. }))
            .await
        {
            order.push(key);
        }
    }
    assert_eq!(order, ["ns/d", "ns/e", "ns/c"]);

    // Stopping the supervisor with passive children leaves no gauge behind.
    h.passivate("ns/c", Duration::from_secs(900), 0).await;
    h.sup
        .stop_and_wait(None, Some(Duration::from_secs(30)))
        .await
        .expect("supervisor stops");
    assert_eq!(h.metrics.passive.get(), 0);
    assert_eq!(h.metrics.active.get(), 0);
}

/// `k` reports idle; unlike [`Harness::passivate`] this waits for nothing, so the starts its
/// stop lets through are all seen by [`starts_within`].
fn go_idle(h: &Harness, k: &str) {
    h.forward(
        k,
        TestMsg::Idle {
            in_: Duration::from_secs(3600),
            memo: 0,
        },
    );
}

/// A table with `budget` places held at most `hold`, and `keys` started one at a time (so each
/// has a place) and passivated for an hour.
async fn passive_children(keys: &[&str], budget: usize, hold: Duration) -> Harness {
    let mut h = start_with(exact_policy(), |c| {
        c.wake_budget = budget;
        c.wake_hold = hold;
    })
    .await;
    for &k in keys {
        h.ensure(k, 1);
        h.started(k).await;
        h.passivate(k, Duration::from_secs(3600), 0).await;
    }
    h
}

/// The keys of the children started within `span`, in order.
async fn starts_within(h: &mut Harness, span: Duration) -> Vec<String> {
    h.drain_for(span)
        .await
        .into_iter()
        .filter_map(|e| match e {
            Ev::Started { key, .. } => Some(key),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_relist_wakes_passive_children_a_budget_at_a_time_and_loses_none() {
    let keys = ["ns/k0", "ns/k1", "ns/k2", "ns/k3", "ns/k4"];
    let mut h = passive_children(&keys, 2, Duration::from_secs(600)).await;
    // A relist says every object again, none of them changed.
    for k in keys {
        h.ensure(k, 1);
    }
    assert_eq!(
        starts_within(&mut h, Duration::from_secs(1)).await,
        ["ns/k0", "ns/k1"],
        "two places in the budget: the first two start"
    );
    assert_eq!(h.metrics.active.get(), 2);
    assert_eq!(h.metrics.waiting.get(), 3);

    // A change of its own does not wait for a place, and takes none.
    h.ensure("ns/k4", 2);
    assert_eq!(
        starts_within(&mut h, Duration::from_secs(1)).await,
        ["ns/k4"]
    );
    assert_eq!(h.metrics.waiting.get(), 2);

    // As the woken ones go idle again, the others start, in the order they were due.
    go_idle(&h, "ns/k0");
    assert_eq!(
        starts_within(&mut h, Duration::from_secs(1)).await,
        ["ns/k2"]
    );
    go_idle(&h, "ns/k4");
    assert_eq!(
        starts_within(&mut h, Duration::from_secs(1)).await,
        Vec::<String>::new(),
        "k4 held no place: its stop frees none"
    );
    go_idle(&h, "ns/k1");
    assert_eq!(
        starts_within(&mut h, Duration::from_secs(1)).await,
        ["ns/k3"]
    );
    assert_eq!(h.metrics.waiting.get(), 0);
    // Each was started once: the second mention of a waiting key started nothing more. What
    // starts later is the deadlines of those passivated for an hour (once k2's and k3's holds
    // end, as they never go idle).
    let mut later = starts_within(&mut h, Duration::from_secs(7200)).await;
    later.sort();
    assert_eq!(later, ["ns/k0", "ns/k1", "ns/k4"]);
}

#[tokio::test(start_paused = true)]
async fn a_woken_child_that_stays_up_gives_its_place_back_when_its_pass_is_done() {
    let mut h = passive_children(&[A, B], 1, Duration::from_secs(600)).await;
    h.send(SupervisorMsg::NudgeAll);
    assert_eq!(starts_within(&mut h, Duration::from_secs(1)).await, [A]);
    // Twice: only the first gives a place back (b's, below, is not a's to give).
    h.forward(A, TestMsg::StayUp);
    h.forward(A, TestMsg::StayUp);
    assert_eq!(starts_within(&mut h, Duration::from_secs(1)).await, [B]);
    assert_eq!(h.metrics.waiting.get(), 0);
    assert_eq!(h.metrics.active.get(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_woken_child_that_never_goes_idle_holds_its_place_only_for_the_hold() {
    let mut h = passive_children(&[A, B], 1, Duration::from_secs(60)).await;
    let t0 = Instant::now();
    h.send(SupervisorMsg::NudgeAll);
    let (_, a_at) = h.started(A).await;
    assert_eq!(a_at, t0, "a takes the one place");
    // a keeps running (it never reports idle); b waits until a's hold ends.
    let (_, b_at) = h.started(B).await;
    assert_eq!(b_at - t0, Duration::from_secs(60));
    assert_eq!(h.metrics.active.get(), 2);
    assert_eq!(h.metrics.waiting.get(), 0);
    // A removed waiting child leaves no gauge behind.
    h.passivate(A, Duration::from_secs(3600), 0).await;
    h.passivate(B, Duration::from_secs(3600), 0).await;
    h.send(SupervisorMsg::NudgeAll);
    h.started(A).await;
    h.send(SupervisorMsg::Remove(key(B)));
    h.snapshot().await;
    assert_eq!(h.metrics.waiting.get(), 0);
    assert_eq!(h.metrics.passive.get(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_new_objects_starts_a_budget_at_a_time() {
    let mut h = start_with(exact_policy(), |c| {
        c.wake_budget = 2;
        c.wake_hold = Duration::from_secs(600);
    })
    .await;
    // A host adopting its children, or the first list after the operator starts.
    for k in ["ns/n0", "ns/n1", "ns/n2"] {
        h.ensure(k, 1);
    }
    assert_eq!(
        starts_within(&mut h, Duration::from_secs(1)).await,
        ["ns/n0", "ns/n1"]
    );
    assert!(matches!(
        h.status("ns/n2").await,
        ChildStatus::Passive { due_in: None }
    ));
    assert_eq!(h.metrics.waiting.get(), 1);
    go_idle(&h, "ns/n0");
    assert_eq!(
        starts_within(&mut h, Duration::from_secs(1)).await,
        ["ns/n2"]
    );
    assert_eq!(h.metrics.waiting.get(), 0);
}
