//! `just upgrade-check` (`terdut-e2e upgrade`): upgrades that change nothing (docs/upgrade.md).
//! The previous version's chart and image (built from an earlier commit of this repository by
//! e2e/upgrade-check.sh) installed on this machine's node, a server with teams and sources
//! live and Ready; then `helm upgrade` to this tree's chart and image, and `helm rollback` to
//! the previous revision. Through each, watched throughout: no write reaches the
//! terdut-server (the stand-in counts every call), no server pod is rolled unless its pod
//! template really changed (and then exactly once), the leader is handed over exactly once,
//! and no TerdutServer, TerdutTeam or TerdutAlertSource leaves Ready; after each, the
//! invariants of docs/reliability.md.

mod server;
mod settle;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;

use crate::checks::log;
use crate::cluster::helm::{NAMESPACE, RELEASE, chart};
use crate::fleet::install::{self, DeployArgs};
use crate::fleet::leaks::LogKeeper;
use crate::fleet::watch::{self, LeaseWatch, ReadyWatch};
use crate::fleet::{self, Fleet};
use crate::run::{Mode, Run};

#[derive(Debug, clap::Args)]
pub struct UpgradeArgs {
    /// upgrade: the previous version's chart folder.
    #[arg(long)]
    pub previous_chart: Option<PathBuf>,
    /// upgrade: the previous version's operator image (among the imported tars).
    #[arg(long)]
    pub previous_image: Option<String>,
    /// upgrade: the previous version is known to write Ready=False for a moment when its
    /// leader starts (a defect this version fixed): on rollback to it, the objects seen not
    /// Ready are reported, not failed. e2e/upgrade-check.sh says for which commits.
    #[arg(long)]
    pub previous_flaps_ready: bool,
    /// upgrade: teams (and as many sources) live through the upgrade.
    #[arg(long, default_value_t = 12)]
    pub upgrade_pairs: usize,
}

pub async fn main(
    images: &std::path::Path,
    args: &UpgradeArgs,
    deploy: &DeployArgs,
) -> anyhow::Result<u32> {
    let previous_chart = args
        .previous_chart
        .clone()
        .context("--previous-chart is required (e2e/upgrade-check.sh passes it)")?;
    let previous_image = args
        .previous_image
        .clone()
        .context("--previous-image is required")?;
    let started = Instant::now();
    let extra: Vec<_> = deploy.extra_images.iter().cloned().collect();
    let (cluster, run, helm) = fleet::node::start(Mode::Upgrade, images, &extra, false).await?;
    let kept = std::env::temp_dir().join(format!("terdut-upgrade-logs-{}", std::process::id()));
    let result = async {
        let mut keeper = LogKeeper::start(&cluster.pod_logs_dir(), "terdut-system_", &kept)?;
        install::install(
            &run,
            &helm,
            &previous_chart,
            &install::sets(&previous_image, &[])?,
        )
        .await?;
        log(&format!(
            "the previous version runs: chart {}, image {previous_image}",
            previous_chart.display()
        ));
        let images = crate::cluster::Images {
            chart: crate::cluster::helm::ChartSource::Folder,
            operator: previous_image.clone(),
            standin: "terdut-standin:e2e".into(),
            prometheus: String::new(),
            pull_policy: "Never".into(),
        };
        let mut fleet = Fleet::bring_up(&run, cluster.dir(), &images, args.upgrade_pairs).await?;
        let objects = 2 * args.upgrade_pairs + 1;
        settle::leader_idle(&run, &previous_image, objects).await?;

        let sets = install::sets(&deploy.operator_image, &deploy.sets)?;
        let this_chart = chart().display().to_string();
        let upgrade = step(
            &run,
            &mut fleet,
            "helm upgrade",
            &deploy.operator_image,
            objects,
            false,
            || {
                // docs/upgrade.md: the CRDs first (Helm never upgrades a chart's crds/). Helm
                // installed them as the manager "helm", so a changed field conflicts without
                // --force-conflicts, exactly as it would for a user.
                run.kubectl.run(&[
                    "apply",
                    "--server-side",
                    "--force-conflicts",
                    "-f",
                    &format!("{this_chart}/crds/"),
                ])?;
                helm.run(&install::helm_args("upgrade", &this_chart, &sets))
                    .map(drop)
            },
        )
        .await?;
        let rollback = step(
            &run,
            &mut fleet,
            "helm rollback",
            &previous_image,
            objects,
            args.previous_flaps_ready,
            || {
                helm.run(&[
                    "rollback",
                    RELEASE,
                    "1",
                    "--namespace",
                    NAMESPACE,
                    "--wait",
                    "--timeout",
                    "4m",
                ])
                .map(drop)
            },
        )
        .await?;
        let logs = keeper.finish();
        for v in fleet::leaks::check(&run, &fleet.needles, &logs).await {
            run.checks.check(v.name, v.ok, v.detail);
        }
        println!("{}", table(&[upgrade, rollback]));
        anyhow::Ok(())
    }
    .await;
    // A failed run keeps the operator's logs for a look.
    if run.checks.failed() == 0 {
        let _ = std::fs::remove_dir_all(&kept);
    } else {
        log(&format!(
            "the operator pods' logs are kept in {}",
            kept.display()
        ));
    }
    let failed = run.checks.finish(
        "the upgrade check completed",
        "upgrade check",
        &result,
        started,
    );
    cluster.stop();
    Ok(failed)
}

/// What one step measured.
#[derive(Debug)]
struct Figures {
    label: &'static str,
    helm: Duration,
    settled: Duration,
    writes: u64,
    reads: u64,
    roll: String,
    handovers: String,
    unready: usize,
}

/// Runs `action` (a Helm command) with everything watched, waits until the leader runs
/// `image` and has been through every object, and checks what a user would notice.
async fn step(
    run: &Run,
    fleet: &mut Fleet,
    label: &'static str,
    image: &str,
    objects: usize,
    flaps_known: bool,
    action: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<Figures> {
    log(&format!("=== {label}"));
    server::reset_calls(&run.client).await?;
    let before = server::snapshot(&run.client).await?;
    let transitions = watch::lease_transitions(&run.client).await?;
    let ready = ReadyWatch::start(&run.client);
    let lease = LeaseWatch::start(&run.client);
    let pods = server::ServerWatch::start(&run.client);
    let started = Instant::now();
    // Helm blocks; the watches run on the runtime's other threads meanwhile.
    let acted = tokio::task::block_in_place(action);
    let helm = started.elapsed();
    run.checks
        .check_result(&format!("{label} completes (--wait)"), &acted);
    let settled = settle::leader_idle(run, image, objects).await;
    run.checks.check_result(
        &format!("{label}: the leader runs {image} and has been through every object"),
        &settled,
    );
    let settled = started.elapsed();
    let calls = pods.finish(&run.client).await;
    let changes = lease.finish();
    let unready = ready.finish();
    let after = server::snapshot(&run.client).await?;
    let transitions = watch::lease_transitions(&run.client).await? - transitions;

    let (writes, which) = server::writes(&calls);
    let reads: u64 = calls.values().map(|c| c.total()).sum::<u64>() - writes;
    run.checks.check(
        &format!("{label}: no write to the terdut-server"),
        writes == 0,
        format!("{writes} writes: {}", which.join(", ")),
    );
    let seen = calls.keys().cloned().collect();
    let (rolled_ok, roll) = server::roll_verdict(&before, &after, &seen);
    run.checks.check(
        &format!(
            "{label}: no server pod rolled unless its template changed, and then exactly once"
        ),
        rolled_ok,
        &roll,
    );
    let holders: Vec<String> = changes
        .iter()
        .map(|(at, h)| {
            format!(
                "{:.1}s {}",
                at.as_secs_f64(),
                if h.is_empty() { "(released)" } else { h }
            )
        })
        .collect();
    let handovers = watch::handovers(&changes);
    run.checks.check(
        &format!("{label}: exactly one leader handover"),
        transitions == 1 && handovers == 1,
        format!(
            "{transitions} Lease transitions; holders {}",
            holders.join(" -> ")
        ),
    );
    let shown: Vec<String> = unready
        .iter()
        .take(8)
        .map(|u| format!("{:.1}s {} {}", u.at.as_secs_f64(), u.object, u.why))
        .collect();
    let name = format!("{label}: no TerdutServer, TerdutTeam or TerdutAlertSource left Ready");
    if flaps_known {
        log(&format!(
            "not checked: {name} (the previous version's leader writes Ready=False as it starts): seen {} times: {}",
            unready.len(),
            shown.join("; ")
        ));
    } else {
        run.checks.check(
            &name,
            unready.is_empty(),
            format!("{} times: {}", unready.len(), shown.join("; ")),
        );
    }
    let converged = fleet::converge(run, &fleet.model, Duration::from_secs(60)).await;
    run.checks.check_result(
        &format!("{label}: every object Ready and the server matching every spec"),
        &converged,
    );
    for v in fleet.verify(run).await? {
        run.checks
            .check(&format!("{label}: {}", v.name), v.ok, v.detail);
    }
    let f = Figures {
        label,
        helm,
        settled,
        writes,
        reads,
        roll,
        handovers: format!("{transitions} ({})", holders.join(" -> ")),
        unready: unready.len(),
    };
    log(&format!("figure: {f:?}"));
    Ok(f)
}

fn table(rows: &[Figures]) -> String {
    let mut out = String::from(
        "| Step | helm --wait | until the new leader was idle | Writes / reads on the server | Server pods | Leader handovers | Objects seen not Ready |\n|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {:.1} s | {:.1} s | {} / {} | {} | {} | {} |\n",
            r.label,
            r.helm.as_secs_f64(),
            r.settled.as_secs_f64(),
            r.writes,
            r.reads,
            r.roll,
            r.handovers,
            r.unready
        ));
    }
    out
}
