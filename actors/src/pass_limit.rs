//! How many passes of one kind run at once ([`OperatorConfig::max_concurrent_passes`],
//! controller-runtime's MaxConcurrentReconciles), and how the slots are shared between
//! TerdutServers and, within a server, between the namespaces its objects live in.
//!
//! Memory is why there is a limit: a pass's future is ~15 KB (kube and reqwest calls inline),
//! and a cold start or a relist nudges every object at once, so without a bound 10,000 teams
//! would hold 10,000 of them while they queue for the API servers (heap profile,
//! docs/performance.md). Waiting actors hold only the small future of the wait.
//!
//! Fairness is why it has lanes, one per TerdutServer: a pass of a server that never answers
//! holds its slot for the whole request timeout, so with one FIFO queue 200 teams of a
//! black-holed (or hostile) server would hold every slot while a team on a healthy server
//! waited behind them. Here a lane holds at most half the slots ([`per_lane`]), and a freed
//! slot goes to the next lane in turn (round-robin), first come first served within a lane.
//! One server still gets half the slots, more than the 64 requests its client sends at once
//! (`ClientConfig::DEFAULT_MAX_IN_FLIGHT` at the default of 256), so a single-server install
//! loses nothing (docs/security.md, "bounded and fair").
//!
//! **Within a lane, per namespace** (the tenants of a shared server): a namespace holds at
//! most half its server's share ([`per_tenant`], a quarter of the slots: 64 at the default,
//! as many as the server's client sends at once), and a slot the server's lane gets goes to
//! its namespaces in turn. One tenant touching 200 teams in a loop queues 200 passes in its
//! own sub-lane; a pass of another namespace of the same server starts at once while that
//! namespace is under its cap, and otherwise with the next slot the server gets: behind at
//! most one pass of each other waiting namespace, never behind the noisy one's queue
//! (`actors/tests/tenant_fairness.rs` counts it).
//!
//! The limit is a queue that `actor_mailbox_depth` cannot see (a waiting actor has taken its
//! message), so it exports its own `reconcile_passes_waiting` and `reconcile_passes_running`:
//! running pinned at the limit with a waiting queue that does not drain says raise the limit
//! or look at the API servers' latency.
//!
//! [`OperatorConfig::max_concurrent_passes`]: crate::context::OperatorConfig::max_concurrent_passes

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::oneshot;

use crate::key::ObjectKey;

/// The lane of a pass: the TerdutServer it works on (an empty key when it has none yet), and
/// the namespace of the object (its tenant).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lane {
    pub server: ObjectKey,
    pub tenant: String,
}

impl Lane {
    pub fn new(server: ObjectKey, tenant: impl Into<String>) -> Self {
        Self {
            server,
            tenant: tenant.into(),
        }
    }
}

/// The most slots one lane holds at once out of `total`: half, and at least one.
pub fn per_lane(total: usize) -> usize {
    (total / 2).max(1)
}

/// The most slots one namespace holds at once within its server's lane: half the lane's.
pub fn per_tenant(total: usize) -> usize {
    per_lane(per_lane(total))
}

/// Shared by every actor of one kind; cheap to clone.
#[derive(Clone, Debug)]
pub struct PassLimit {
    slots: Arc<Mutex<Slots>>,
    /// Passes waiting for a slot, and passes holding one.
    waiting: Gauge,
    running: Gauge,
}

#[derive(Debug)]
struct Slots {
    total: usize,
    per_lane: usize,
    per_tenant: usize,
    busy: usize,
    lanes: HashMap<ObjectKey, ServerLane>,
    /// Lanes with waiters, in the order they are served.
    turn: VecDeque<ObjectKey>,
}

/// One server's lane: its namespaces' sub-lanes.
#[derive(Debug, Default)]
struct ServerLane {
    busy: usize,
    tenants: HashMap<String, TenantLane>,
    /// Namespaces with waiters, in the order they are served.
    turn: VecDeque<String>,
}

#[derive(Debug, Default)]
struct TenantLane {
    busy: usize,
    waiters: VecDeque<oneshot::Sender<Slot>>,
}

/// A held slot; dropping it gives the slot back (to the next lane in turn).
#[derive(Debug)]
struct Slot {
    slots: Arc<Mutex<Slots>>,
    lane: Lane,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let handed = {
            let mut s = lock(&self.slots);
            s.release(&self.lane);
            s.hand_out()
        };
        // Sent outside the lock: a slot whose waiter is gone comes straight back here.
        for (tx, lane) in handed {
            let _ = tx.send(Slot {
                slots: self.slots.clone(),
                lane,
            });
        }
    }
}

fn lock(slots: &Mutex<Slots>) -> MutexGuard<'_, Slots> {
    // A panic while holding this lock leaves counters that are still consistent.
    slots.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ServerLane {
    fn is_idle(&self) -> bool {
        self.busy == 0 && self.tenants.is_empty()
    }

    /// The next waiter of this lane, its namespaces in turn, skipping namespaces at their cap
    /// and waiters that gave up. Takes the slot in the lane's and the namespace's counts.
    fn next_waiter(&mut self, per_tenant: usize) -> Option<(oneshot::Sender<Slot>, String)> {
        let mut skipped = 0;
        while skipped < self.turn.len() {
            let tenant = self.turn.pop_front()?;
            let Some(state) = self.tenants.get_mut(&tenant) else {
                continue;
            };
            if state.busy >= per_tenant {
                self.turn.push_back(tenant);
                skipped += 1;
                continue;
            }
            skipped = 0;
            let mut found = None;
            while let Some(tx) = state.waiters.pop_front() {
                if tx.is_closed() {
                    continue;
                }
                state.busy += 1;
                found = Some(tx);
                break;
            }
            if !state.waiters.is_empty() {
                self.turn.push_back(tenant.clone());
            } else if state.busy == 0 {
                self.tenants.remove(&tenant);
            }
            if let Some(tx) = found {
                self.busy += 1;
                return Some((tx, tenant));
            }
        }
        None
    }

    fn has_waiters(&self) -> bool {
        !self.turn.is_empty()
    }
}

impl Slots {
    fn release(&mut self, lane: &Lane) {
        self.busy = self.busy.saturating_sub(1);
        if let Some(l) = self.lanes.get_mut(&lane.server) {
            l.busy = l.busy.saturating_sub(1);
            if let Some(t) = l.tenants.get_mut(&lane.tenant) {
                t.busy = t.busy.saturating_sub(1);
                if t.busy == 0 && t.waiters.is_empty() {
                    l.tenants.remove(&lane.tenant);
                }
            }
            if l.is_idle() {
                self.lanes.remove(&lane.server);
            }
        }
    }

    /// Takes free slots for waiters, lane by lane in turn and within a lane namespace by
    /// namespace in turn; returns who gets one. A waiter whose pass was cancelled gets its
    /// slot anyway and gives it back at once (its `Slot` drops inside the closed channel).
    fn hand_out(&mut self) -> Vec<(oneshot::Sender<Slot>, Lane)> {
        let Slots {
            total,
            per_lane,
            per_tenant,
            busy,
            lanes,
            turn,
        } = self;
        let mut handed = vec![];
        let mut skipped = 0;
        while *busy < *total && skipped < turn.len() {
            let Some(server) = turn.pop_front() else {
                break;
            };
            let Some(state) = lanes.get_mut(&server) else {
                continue;
            };
            if state.busy >= *per_lane {
                turn.push_back(server);
                skipped += 1;
                continue;
            }
            match state.next_waiter(*per_tenant) {
                Some((tx, tenant)) => {
                    skipped = 0;
                    *busy += 1;
                    handed.push((tx, Lane::new(server.clone(), tenant)));
                }
                // Every waiting namespace is at its cap: the lane waits for one of its own.
                None => skipped += 1,
            }
            if state.has_waiters() {
                turn.push_back(server);
            } else if state.is_idle() {
                lanes.remove(&server);
            }
        }
        handed
    }
}

/// Counts one in a gauge for as long as it lives, so a pass cancelled while waiting (its
/// actor stopped) or while running is counted out all the same.
struct Counted(Gauge);

impl Counted {
    fn new(gauge: &Gauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl PassLimit {
    /// `passes` at once (at least one); `(waiting, running)` as
    /// [`OperatorMetrics::pass_gauges`](crate::runtime::metrics::OperatorMetrics::pass_gauges)
    /// gives them.
    pub fn new(passes: usize, (waiting, running): (Gauge, Gauge)) -> Self {
        let total = passes.max(1);
        Self {
            slots: Arc::new(Mutex::new(Slots {
                total,
                per_lane: per_lane(total),
                per_tenant: per_tenant(total),
                busy: 0,
                lanes: HashMap::new(),
                turn: VecDeque::new(),
            })),
            waiting,
            running,
        }
    }

    /// Runs the pass `start` makes once `lane` has a slot. The pass is made and boxed only
    /// then: the caller's future (an actor's processing loop, boxed once per actor by ractor)
    /// holds a pointer to it, not the pass itself.
    pub async fn run<F: Future>(&self, lane: Lane, start: impl FnOnce() -> F) -> F::Output {
        let waiting = Counted::new(&self.waiting);
        let _slot = self.acquire(lane).await;
        drop(waiting);
        let _running = Counted::new(&self.running);
        Box::pin(start()).await
    }

    async fn acquire(&self, lane: Lane) -> Slot {
        let rx = {
            let mut s = lock(&self.slots);
            let (total, per_lane, per_tenant, busy) = (s.total, s.per_lane, s.per_tenant, s.busy);
            let server = s.lanes.entry(lane.server.clone()).or_default();
            let server_busy = server.busy;
            let tenant = server.tenants.entry(lane.tenant.clone()).or_default();
            if busy < total
                && server_busy < per_lane
                && tenant.busy < per_tenant
                && tenant.waiters.is_empty()
            {
                tenant.busy += 1;
                server.busy += 1;
                s.busy += 1;
                drop(s);
                return Slot {
                    slots: self.slots.clone(),
                    lane,
                };
            }
            let (tx, rx) = oneshot::channel();
            let first_of_tenant = tenant.waiters.is_empty();
            tenant.waiters.push_back(tx);
            let first_of_server = !server.has_waiters();
            if first_of_tenant {
                server.turn.push_back(lane.tenant.clone());
            }
            if first_of_server {
                s.turn.push_back(lane.server.clone());
            }
            rx
        };
        match rx.await {
            Ok(slot) => slot,
            // Only a dropped `PassLimit` drops the senders, and every waiter holds a clone of
            // its `Arc`: unreachable, but never hang or panic on it.
            Err(_) => std::future::pending().await,
        }
    }

    /// Passes that could start now in a lane holding no slot.
    pub fn available(&self) -> usize {
        let s = lock(&self.slots);
        s.total - s.busy
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    fn lane(name: &str) -> Lane {
        Lane::new(ObjectKey::new("ns", name), "tenant")
    }

    fn tenant(server: &str, namespace: &str) -> Lane {
        Lane::new(ObjectKey::new("ns", server), namespace)
    }

    fn gauges() -> (Gauge, Gauge) {
        (Gauge::default(), Gauge::default())
    }

    #[tokio::test]
    async fn no_more_than_the_limit_run_at_once_and_all_finish() {
        let gauges = gauges();
        let limit = PassLimit::new(6, gauges.clone());
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..40)
            .map(|i| {
                let (limit, running, most) = (limit.clone(), running.clone(), most.clone());
                tokio::spawn(async move {
                    limit
                        // Three namespaces per server: each holds at most one of its
                        // server's three slots.
                        .run(
                            tenant(&format!("s{}", i % 3), &format!("t{}", i % 9)),
                            || async {
                                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                                most.fetch_max(now, Ordering::SeqCst);
                                tokio::time::sleep(Duration::from_millis(5)).await;
                                running.fetch_sub(1, Ordering::SeqCst);
                                7
                            },
                        )
                        .await
                })
            })
            .collect();
        for t in tasks {
            assert_eq!(t.await.unwrap(), 7);
        }
        assert_eq!(most.load(Ordering::SeqCst), 6);
        assert_eq!(limit.available(), 6, "every slot given back");
        assert_eq!((gauges.0.get(), gauges.1.get()), (0, 0), "all counted out");
        assert!(lock(&limit.slots).lanes.is_empty(), "no lane left behind");
    }

    #[tokio::test]
    async fn one_lane_never_holds_more_than_half_the_slots() {
        let limit = PassLimit::new(4, gauges());
        let (release, hold) = tokio::sync::watch::channel(false);
        let mut held = vec![];
        for i in 0..10 {
            let (limit, mut hold) = (limit.clone(), hold.clone());
            held.push(tokio::spawn(async move {
                limit
                    .run(tenant("hung", &format!("t{i}")), || async move {
                        let _ = hold.wait_for(|r| *r).await;
                    })
                    .await
            }));
        }
        while limit.available() > 2 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // The hung lane is at its cap; another lane's pass starts at once.
        let other = tokio::time::timeout(
            Duration::from_secs(5),
            limit.run(lane("healthy"), || async { "ran" }),
        )
        .await;
        assert_eq!(other.unwrap(), "ran");
        assert_eq!(limit.available(), 2);
        release.send(true).unwrap();
        for h in held {
            h.await.unwrap();
        }
        assert_eq!(limit.available(), 4);
    }

    #[tokio::test]
    async fn freed_slots_go_to_the_lanes_in_turn() {
        // One slot in all: lanes a and b queue up behind it, and get it alternately.
        let limit = PassLimit::new(1, gauges());
        let order = Arc::new(Mutex::new(vec![]));
        let (release, hold) = tokio::sync::oneshot::channel::<()>();
        let first = tokio::spawn({
            let limit = limit.clone();
            async move { limit.run(lane("a"), || async { hold.await.ok() }).await }
        });
        while limit.available() > 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let mut tasks = vec![];
        for name in ["a", "a", "a", "b", "b"] {
            let (mine, order) = (limit.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                mine.run(lane(name), || async move {
                    order.lock().unwrap().push(name);
                })
                .await
            }));
            // Queue them in this order.
            while lock(&limit.slots)
                .lanes
                .values()
                .flat_map(|l| l.tenants.values())
                .map(|t| t.waiters.len())
                .sum::<usize>()
                < tasks.len()
            {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        release.send(()).unwrap();
        first.await.unwrap();
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), ["a", "b", "a", "b", "a"]);
    }

    #[tokio::test]
    async fn the_gauges_count_passes_waiting_and_running_and_cancelled_ones_leave() {
        let (waiting, running) = gauges();
        let limit = PassLimit::new(1, (waiting.clone(), running.clone()));
        let (release, hold) = tokio::sync::oneshot::channel::<()>();
        let first = tokio::spawn({
            let limit = limit.clone();
            async move { limit.run(lane("a"), || async { hold.await.ok() }).await }
        });
        let second = tokio::spawn({
            let limit = limit.clone();
            async move { limit.run(lane("b"), || async {}).await }
        });
        // Both are parked: one on its slot, one waiting.
        while (waiting.get(), running.get()) != (1, 1) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        second.abort();
        assert!(second.await.is_err(), "cancelled while waiting");
        assert_eq!((waiting.get(), running.get()), (0, 1));
        release.send(()).unwrap();
        first.await.unwrap();
        assert_eq!((waiting.get(), running.get()), (0, 0));
        // The cancelled waiter's turn was skipped and its slot came back.
        assert_eq!(limit.available(), 1);
        assert_eq!(limit.run(lane("c"), || async { 3 }).await, 3);
    }

    #[test]
    fn a_limit_of_zero_still_lets_passes_run_and_lanes_get_half() {
        assert_eq!(PassLimit::new(0, gauges()).available(), 1);
        assert_eq!(
            [per_lane(1), per_lane(2), per_lane(3), per_lane(256)],
            [1, 1, 1, 128]
        );
        assert_eq!(
            [per_tenant(1), per_tenant(2), per_tenant(8), per_tenant(256)],
            [1, 1, 2, 64]
        );
    }

    /// Queues `names` (lanes) behind a held slot in this order and returns the order in which
    /// they ran once it was released.
    async fn run_order(limit: &PassLimit, held: Lane, queued: Vec<Lane>) -> Vec<String> {
        let order = Arc::new(Mutex::new(vec![]));
        let (release, hold) = tokio::sync::oneshot::channel::<()>();
        let first = tokio::spawn({
            let limit = limit.clone();
            async move { limit.run(held, || async { hold.await.ok() }).await }
        });
        while limit.available() > 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let mut tasks = vec![];
        for lane in queued {
            let (mine, order) = (limit.clone(), order.clone());
            let label = lane.tenant.clone();
            tasks.push(tokio::spawn(async move {
                mine.run(lane, || async move {
                    order.lock().unwrap().push(label);
                })
                .await
            }));
            while lock(&limit.slots)
                .lanes
                .values()
                .flat_map(|l| l.tenants.values())
                .map(|t| t.waiters.len())
                .sum::<usize>()
                < tasks.len()
            {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        release.send(()).unwrap();
        first.await.unwrap();
        for t in tasks {
            t.await.unwrap();
        }
        order.lock().unwrap().clone()
    }

    #[tokio::test]
    async fn a_noisy_namespace_does_not_queue_another_behind_it() {
        // One slot: the noisy namespace queued 200 passes before the quiet one asked; the
        // quiet one runs second, right after the first noisy pass.
        let limit = PassLimit::new(1, gauges());
        let mut queued: Vec<Lane> = (0..200).map(|_| tenant("shared", "noisy")).collect();
        queued.push(tenant("shared", "quiet"));
        let order = run_order(&limit, tenant("shared", "noisy"), queued).await;
        let quiet = order.iter().position(|t| t == "quiet").unwrap();
        assert_eq!(
            quiet,
            1,
            "behind one noisy pass, not 200: {:?}",
            &order[..4]
        );
        assert_eq!(order.len(), 201);
    }

    #[tokio::test]
    async fn namespaces_of_a_server_take_its_slots_in_turn() {
        let limit = PassLimit::new(1, gauges());
        let queued = ["a", "a", "a", "b", "c", "b"]
            .iter()
            .map(|ns| tenant("shared", ns))
            .collect();
        let order = run_order(&limit, tenant("shared", "a"), queued).await;
        assert_eq!(order, ["a", "b", "c", "a", "b", "a"]);
    }

    #[tokio::test]
    async fn a_namespace_holds_at_most_half_its_servers_share() {
        // 8 slots: a server holds 4, a namespace 2. A hung namespace leaves its server's other
        // namespaces two slots that start at once.
        let limit = PassLimit::new(8, gauges());
        let (release, hold) = tokio::sync::watch::channel(false);
        let mut hung = vec![];
        for _ in 0..10 {
            let (limit, mut hold) = (limit.clone(), hold.clone());
            hung.push(tokio::spawn(async move {
                limit
                    .run(tenant("shared", "noisy"), || async move {
                        let _ = hold.wait_for(|r| *r).await;
                    })
                    .await
            }));
        }
        while limit.available() > 6 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(
            limit.available(),
            6,
            "the noisy namespace is at its cap of 2"
        );
        let quiet = tokio::time::timeout(
            Duration::from_secs(5),
            limit.run(tenant("shared", "quiet"), || async { "ran" }),
        )
        .await;
        assert_eq!(quiet.unwrap(), "ran");
        release.send(true).unwrap();
        for h in hung {
            h.await.unwrap();
        }
        assert_eq!(limit.available(), 8);
        assert!(lock(&limit.slots).lanes.is_empty());
    }
}
