//! `just node-chaos` / `just node-chaos-long` (`terdut-e2e node-chaos`): the faults a node
//! has, made for real on this machine's node (docs/node.md) while the operator runs there in
//! pods as `just e2e-node` installs it, each followed by the invariants of
//! docs/reliability.md: every object Ready and the server matching every spec within a stated
//! time after the fault ends, nothing lost or duplicated on the server, no key rotated, and at
//! the end no key in any operator log, Event or status. Seeded: the seed fixes the order of
//! the faults, the waves of changes that land with them and the delays; where a fault lands in
//! a pass still depends on timing, which is the point.

mod components;
mod leader;
mod partition;
pub mod plan;
mod reboot;
mod report;
mod rng;

use std::path::Path;
use std::time::{Duration, Instant};

use terdut_testenv::NodeCluster;

use crate::checks::log;
use crate::cluster::helm::{Helm, chart, test_hooks_sets};
use crate::fleet::install::{self, DeployArgs};
use crate::fleet::leaks::LogKeeper;
use crate::fleet::{self, Fleet, pods, watch};
use crate::run::{Mode, Run};
use plan::{Fault, Plan};
use report::Row;
use rng::Rng;

/// What a fault step hands back: when the fault ended (the clock of the Ready limit starts
/// there), how long it lasted, and what it saw (figures, not verdicts).
#[derive(Debug)]
pub struct Outcome {
    pub ended: Instant,
    pub lasted: Duration,
    pub notes: Vec<String>,
}

/// Everything a fault step works with.
pub struct Ctx<'a> {
    pub run: &'a Run,
    pub cluster: &'a NodeCluster,
    pub fleet: Fleet,
    pub rng: Rng,
    pub outage: Duration,
}

impl std::fmt::Debug for Ctx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx").finish_non_exhaustive()
    }
}

impl Ctx<'_> {
    /// A wave renaming half the pairs (seeded), applied now.
    pub fn wave(&mut self) -> anyhow::Result<()> {
        let n = self.fleet.model.pairs();
        let picked = self.rng.pick(n, n.div_ceil(2));
        self.fleet.rename(self.run, &picked)
    }

    /// A wave renaming every pair: long enough for a fault to land while it is reconciled.
    pub fn wave_all(&mut self) -> anyhow::Result<()> {
        let all: Vec<usize> = (0..self.fleet.model.pairs()).collect();
        self.fleet.rename(self.run, &all)
    }
}

pub async fn main(
    images: &Path,
    args: &plan::NodeChaosArgs,
    deploy: &DeployArgs,
) -> anyhow::Result<u32> {
    let plan = args.plan()?;
    log(&format!("node chaos, {}", plan.describe()));
    let started = Instant::now();
    let extra: Vec<_> = deploy.extra_images.iter().cloned().collect();
    let (cluster, run, helm) = fleet::node::start(Mode::NodeChaos, images, &extra, false).await?;
    let result = scenario(&cluster, &run, &helm, &plan, deploy).await;
    let failed = run.checks.finish(
        "the node chaos run completed",
        "node chaos",
        &result,
        started,
    );
    cluster.stop();
    Ok(failed)
}

async fn scenario(
    cluster: &NodeCluster,
    run: &Run,
    helm: &Helm,
    plan: &Plan,
    deploy: &DeployArgs,
) -> anyhow::Result<()> {
    // The test hooks on: leader-oom takes the leader over its memory limit through them.
    let mut sets = install::sets(&deploy.operator_image, &deploy.sets)?;
    sets.extend(test_hooks_sets());
    install::install(run, helm, &chart(), &sets).await?;
    let kept = std::env::temp_dir().join(format!("terdut-node-chaos-logs-{}", std::process::id()));
    let mut keeper = LogKeeper::start(&cluster.pod_logs_dir(), "terdut-system_", &kept)?;
    let images = crate::cluster::Images {
        chart: crate::cluster::helm::ChartSource::Folder,
        operator: deploy.operator_image.clone(),
        standin: "terdut-standin:e2e".into(),
        prometheus: String::new(),
        pull_policy: "Never".into(),
    };
    let fleet = Fleet::bring_up(run, cluster.dir(), &images, plan.pairs).await?;
    let mut ctx = Ctx {
        run,
        cluster,
        fleet,
        rng: Rng::new(plan.seed),
        outage: Duration::from_secs(plan.outage_secs),
    };
    let mut rows = vec![];
    for (i, fault) in plan.order.iter().enumerate() {
        log(&format!(
            "=== fault {} of {}: {}",
            i + 1,
            plan.order.len(),
            fault.name()
        ));
        rows.push(one_fault(&mut ctx, *fault).await);
    }
    let logs = keeper.finish();
    for v in crate::fleet::leaks::check(run, &ctx.fleet.needles, &logs).await {
        run.checks.check(v.name, v.ok, v.detail);
    }
    // A failed run keeps the operator's logs for a look.
    if run.checks.failed() == 0 {
        let _ = std::fs::remove_dir_all(&kept);
    } else {
        log(&format!(
            "the operator pods' logs are kept in {}",
            kept.display()
        ));
    }
    println!("{}", report::table(&rows));
    Ok(())
}

/// One fault, then the checks after it.
async fn one_fault(ctx: &mut Ctx<'_>, fault: Fault) -> Row {
    let run = ctx.run;
    let restarts_before = pods::restarts(run).await.unwrap_or_default();
    let transitions_before = watch::lease_transitions(&run.client).await.unwrap_or(0);
    let calls_before = server_calls(run).await;
    // The operator's pods keep running through a kubelet or containerd restart: nothing a
    // user sees may change, not even for a moment.
    let invisible = matches!(fault, Fault::Kubelet | Fault::Containerd);
    let ready_watch = invisible.then(|| watch::ReadyWatch::start(&run.client));
    let outcome = match fault {
        Fault::LeaderDelete => leader::delete(ctx).await,
        Fault::LeaderOom => leader::oom(ctx).await,
        Fault::Kubelet => components::restart(ctx, terdut_testenv::NodeComponent::Kubelet).await,
        Fault::Containerd => {
            components::restart(ctx, terdut_testenv::NodeComponent::Containerd).await
        }
        Fault::Coredns => components::coredns_down(ctx).await,
        Fault::ApiserverCut => partition::apiserver(ctx).await,
        Fault::ServerCut => partition::server(ctx).await,
        Fault::NodeRestart => reboot::node(ctx).await,
    };
    let name = fault.name();
    let (ended, lasted, notes) = match outcome {
        Ok(o) => (o.ended, o.lasted, o.notes),
        Err(e) => {
            run.checks
                .check(&format!("{name}: the fault ran"), false, format!("{e:#}"));
            (Instant::now(), Duration::ZERO, vec![])
        }
    };
    let limit = fault.ready_limit_secs();
    let converged = fleet::converge(run, &ctx.fleet.model, Duration::from_secs(limit)).await;
    let after = converged.as_ref().ok().map(|_| ended.elapsed());
    run.checks.check(
        &format!(
            "{name}: every object Ready and the server matching every spec within {limit} s after the fault ended"
        ),
        converged.is_ok(),
        converged
            .as_ref()
            .err()
            .map(|e| format!("{e:#}"))
            .unwrap_or_default(),
    );
    if let Some(w) = ready_watch {
        let seen = w.finish();
        let shown: Vec<String> = seen
            .iter()
            .take(5)
            .map(|u| format!("{} {}", u.object, u.why))
            .collect();
        run.checks.check(
            &format!("{name}: no TerdutServer, TerdutTeam or TerdutAlertSource left Ready"),
            seen.is_empty(),
            format!("{} times: {}", seen.len(), shown.join("; ")),
        );
    }
    match ctx.fleet.verify(run).await {
        Ok(verdicts) => {
            for v in verdicts {
                run.checks
                    .check(&format!("{name}: {}", v.name), v.ok, v.detail);
            }
        }
        Err(e) => run.checks.check(
            &format!("{name}: the invariants could be read"),
            false,
            format!("{e:#}"),
        ),
    }
    let available = pods::operator_available(run).await;
    run.checks.check_result(
        &format!("{name}: both operator replicas Ready again"),
        &available,
    );
    let restarts = pods::restarts(run).await.unwrap_or_default();
    let transitions = watch::lease_transitions(&run.client).await.unwrap_or(0);
    let calls = server_calls(run).await;
    let row = Row {
        fault: name,
        lasted,
        ready_after: after,
        handovers: transitions - transitions_before,
        restarts: pods::restarted(&restarts_before, &restarts),
        server_calls: calls.zip(calls_before).and_then(|(a, b)| a.checked_sub(b)),
        notes,
    };
    log(&format!("figure: {}", row.line()));
    row
}

/// Calls the stand-in has counted since it started (a restarted server pod counts from 0
/// again: across a node restart there is no difference to show).
async fn server_calls(run: &Run) -> Option<u64> {
    let admin = run.admin().await.ok()?;
    admin.calls().await.ok().map(|c| c.total())
}
