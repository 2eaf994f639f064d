//! The leader's pod, ended two ways while it reconciles a wave of changes: deleted (the
//! kubelet sends SIGTERM; the Deployment replaces the pod), and over its memory limit (the
//! kernel's OOM killer ends the container; the kubelet restarts it in the same pod).

use std::path::Path;
use std::time::{Duration, Instant};

use super::{Ctx, Outcome};
use crate::checks::log;
use crate::cluster::helm::NAMESPACE;
use crate::fleet::pods;

/// How long the test waits for the first change of the wave to reach the server before it
/// deletes the leader anyway.
const MID_PASS_WAIT: Duration = Duration::from_secs(10);

/// Starts applying a wave renaming every pair (one object after another, in the background),
/// waits until the first rename reached the server (so passes are under way while the rest of
/// the wave still lands), deletes the leader pod, and applies another wave while the handover
/// runs.
pub async fn delete(ctx: &mut Ctx<'_>) -> anyhow::Result<Outcome> {
    let run = ctx.run;
    let leader = pods::name(&pods::leader_pod(run).await?);
    let all: Vec<usize> = (0..ctx.fleet.model.pairs()).collect();
    let yaml = ctx.fleet.model.rename_wave(&all);
    let kubectl = run.kubectl.clone();
    let applying = tokio::task::spawn_blocking(move || kubectl.apply_yaml(&yaml));
    let started = Instant::now();
    let (mut landed, mut total) = (0, 0);
    while started.elapsed() < MID_PASS_WAIT {
        (landed, total) = ctx.fleet.landed(run).await?;
        if landed > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    run.kubectl
        .run(&["delete", "pod", "-n", NAMESPACE, &leader, "--wait=false"])?;
    let ended = Instant::now();
    applying.await??;
    log(&format!(
        "deleted the leader pod {leader} with {landed} of {total} renames on the server"
    ));
    ctx.wave()?;
    Ok(Outcome {
        ended,
        lasted: ended - started,
        notes: vec![format!(
            "deleted with {landed} of {total} renames of the wave on the server"
        )],
    })
}

/// How long the test keeps squeezing before it calls the fault failed.
const OOM_WAIT: Duration = Duration::from_secs(60);

fn read_bytes(path: &Path) -> anyhow::Result<u64> {
    Ok(std::fs::read_to_string(path)?.trim().parse()?)
}

/// Applies a wave renaming every pair, then holds the leader container's memory limit (its
/// cgroup's `memory.limit_in_bytes`, which the kernel enforces) at what it uses, every 50 ms,
/// until an allocation of the wave's passes needs more and the kernel's OOM killer ends it.
/// Checks that the kubelet reports `OOMKilled`, then applies another wave while the container
/// restarts.
pub async fn oom(ctx: &mut Ctx<'_>) -> anyhow::Result<Outcome> {
    let run = ctx.run;
    let pod = pods::leader_pod(run).await?;
    let name = pods::name(&pod);
    let cgroup = ctx
        .cluster
        .container_cgroup("memory", &pods::container_id(&pod)?)?;
    let limit_file = cgroup.join("memory.limit_in_bytes");
    let usage_file = cgroup.join("memory.usage_in_bytes");
    let original = read_bytes(&limit_file)?;
    let used = read_bytes(&usage_file)?;
    let restarts = pods::restarts(run).await?;
    let key = format!("{NAMESPACE}/{name}");
    let restarts_before = restarts.get(&key).copied().unwrap_or(0);
    ctx.wave_all()?;
    let started = Instant::now();
    let mut lowest = used;
    // The cgroup goes with the container: once it is gone, the container ended.
    while cgroup.exists() && started.elapsed() < OOM_WAIT {
        // An empty cgroup reads 0: the container is ending.
        if let Ok(now) = read_bytes(&usage_file)
            && now > 0
        {
            // Below the usage the kernel refuses (EBUSY) once it cannot reclaim more.
            if std::fs::write(&limit_file, now.to_string()).is_ok() {
                lowest = lowest.min(now);
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ended = Instant::now();
    if cgroup.exists() {
        let _ = std::fs::write(&limit_file, original.to_string());
        anyhow::bail!(
            "the leader's container was still running after {OOM_WAIT:?} with its limit held at its usage"
        );
    }
    // The kubelet reports the restart (and why the container ended) a moment later.
    let reported = crate::wait::until(
        "the kubelet reporting the leader's container restarted",
        Duration::from_secs(60),
        || async {
            let now = pods::restarts(run).await?;
            if now.get(&key).copied().unwrap_or(0) > restarts_before {
                return Ok(Some(pods::last_termination(run, &name).await?));
            }
            Ok(None)
        },
    )
    .await;
    let reason = reported.as_ref().ok().cloned().flatten();
    run.checks.check(
        "leader-oom: the kernel OOM-killed the leader's container over its memory limit (the kubelet reports OOMKilled)",
        reason.as_deref() == Some("OOMKilled"),
        match &reported {
            Ok(r) => format!("last termination {r:?}"),
            Err(e) => format!("{e:#}"),
        },
    );
    ctx.wave()?;
    let mib = |b: u64| b / (1 << 20);
    Ok(Outcome {
        ended,
        lasted: ended - started,
        notes: vec![format!(
            "limit held at its usage ({} MiB at the start, {} MiB lowest) until the kernel killed it after {:.1} s: {}",
            mib(used),
            mib(lowest),
            (ended - started).as_secs_f64(),
            reason.unwrap_or_else(|| "no reason reported".into())
        )],
    })
}
