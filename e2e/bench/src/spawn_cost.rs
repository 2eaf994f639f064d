//! Actor spawn cost: a [`KeyedSupervisor`] with a child that does nothing but count, so what is
//! measured is the runtime's own cost per actor (supervisor bookkeeping, ractor mailbox and
//! task, the first coalesced nudge), not any reconcile work.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use terdut_actors::key::ObjectKey;
use terdut_actors::supervisor::{
    ChildContext, ChildFactory, KeyedSupervisor, SupervisorConfig, SupervisorMsg,
};

use crate::rss::Rss;

/// The one message of the null child: the supervisor's nudge.
#[derive(Debug)]
pub struct Nudge;

/// Counts its start and its nudges; holds only its [`ChildContext`], as a real child does.
#[derive(Debug)]
struct NullChild {
    started: Arc<AtomicUsize>,
    nudged: Arc<AtomicUsize>,
}

impl Actor for NullChild {
    type Msg = Nudge;
    type State = ChildContext<()>;
    type Arguments = ChildContext<()>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Nudge>,
        child: ChildContext<()>,
    ) -> Result<ChildContext<()>, ActorProcessingErr> {
        self.started.fetch_add(1, Ordering::Relaxed);
        Ok(child)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Nudge>,
        _msg: Nudge,
        child: &mut ChildContext<()>,
    ) -> Result<(), ActorProcessingErr> {
        child.message_received();
        child.nudge_received();
        self.nudged.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

#[derive(Debug)]
struct NullFactory {
    started: Arc<AtomicUsize>,
    nudged: Arc<AtomicUsize>,
}

impl ChildFactory for NullFactory {
    type Child = NullChild;
    type Spec = ();

    fn kind(&self) -> &'static str {
        "bench_null"
    }

    fn build(&self, child: ChildContext<()>) -> (NullChild, ChildContext<()>) {
        (
            NullChild {
                started: self.started.clone(),
                nudged: self.nudged.clone(),
            },
            child,
        )
    }

    fn nudge(&self) -> Nudge {
        Nudge
    }

    fn on_crash_loop(&self, _key: &ObjectKey, _last_error: &str) {}
}

/// What spawning `actors` children cost.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SpawnCost {
    pub actors: usize,
    /// From the first `Ensure` until every child's `pre_start` ran.
    pub all_started_ms: f64,
    /// Until every child also handled its first nudge (i.e. was ready to reconcile).
    pub all_nudged_ms: f64,
    /// RSS growth while all children are alive, in KiB (includes allocator slack).
    pub rss_delta_kib: i64,
    /// `rss_delta_kib` per actor, in bytes.
    pub bytes_per_actor: f64,
}

/// Spawns `actors` null children under one supervisor, measures, then stops them all.
pub async fn measure(actors: usize) -> anyhow::Result<SpawnCost> {
    let before = Rss::now().unwrap_or_default();
    let started = Arc::new(AtomicUsize::new(0));
    let nudged = Arc::new(AtomicUsize::new(0));
    let factory = NullFactory {
        started: started.clone(),
        nudged: nudged.clone(),
    };
    // New entries wait for a place in the wake budget (ADR 0011), and a null child never
    // passivates: with the default budget of 1,024 the rest of 10,000 would wait for the 60 s
    // backstop. A budget of every actor measures the spawn itself, as before the budget.
    let config = SupervisorConfig {
        wake_budget: actors.max(1),
        ..SupervisorConfig::default()
    };
    let (sup, handle) = Actor::spawn(None, KeyedSupervisor::new(factory, config), ()).await?;
    let t0 = Instant::now();
    for i in 0..actors {
        sup.cast(SupervisorMsg::Ensure(
            ObjectKey::new("bench-spawn", format!("a{i}")),
            (),
        ))?;
    }
    let deadline = t0 + Duration::from_secs(300);
    let mut all_started = None;
    while nudged.load(Ordering::Relaxed) < actors {
        if all_started.is_none() && started.load(Ordering::Relaxed) >= actors {
            all_started = Some(t0.elapsed());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "only {} of {actors} null actors handled their nudge in 300 s",
            nudged.load(Ordering::Relaxed)
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let all_nudged = t0.elapsed();
    let all_started = all_started.unwrap_or(all_nudged);
    let after = Rss::now().unwrap_or_default();
    sup.stop(Some("bench done".into()));
    let _ = tokio::time::timeout(Duration::from_secs(60), handle).await;
    let delta = after.rss_kib as i64 - before.rss_kib as i64;
    Ok(SpawnCost {
        actors,
        all_started_ms: all_started.as_secs_f64() * 1e3,
        all_nudged_ms: all_nudged.as_secs_f64() * 1e3,
        rss_delta_kib: delta,
        bytes_per_actor: delta as f64 * 1024.0 / actors.max(1) as f64,
    })
}
