//! The leader's pod, ended two ways while it reconciles a wave of changes: deleted (the
//! kubelet sends SIGTERM; the Deployment replaces the pod), and over its memory limit (the
//! kernel's OOM killer ends the container; the kubelet restarts it in the same pod). The
//! allocation over the limit is the test hooks' (`/allocate`), so the kill comes at a known
//! moment whatever the wave's passes allocate.

use std::path::Path;
use std::time::{Duration, Instant};

use super::{Ctx, Outcome};
use crate::checks::log;
use crate::cluster::helm::{HOOKS_PORT, NAMESPACE};
use crate::fleet::pods;
use crate::reach::Forwards;

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

/// How long the test waits for the kernel to end the container once it allocated.
const OOM_WAIT: Duration = Duration::from_secs(60);

/// The headroom the limit leaves over the container's usage, and what the leader is then made
/// to allocate: more than the headroom plus anything the kernel could reclaim (its page cache
/// is the binary's text, a few tens of MiB), so the kill does not depend on what the wave's
/// passes happen to allocate.
const HEADROOM_MIB: u64 = 64;
const ALLOCATE_MIB: u64 = 256;

fn read_bytes(path: &Path) -> anyhow::Result<u64> {
    Ok(std::fs::read_to_string(path)?.trim().parse()?)
}

/// Applies a wave renaming every pair, sets the leader container's memory limit (its cgroup's
/// `memory.limit_in_bytes`, which the kernel enforces) to its usage plus `HEADROOM_MIB`, and
/// has the leader allocate `ALLOCATE_MIB` through the test hooks (`/allocate`), so the
/// kernel's OOM killer ends it mid-wave. Checks that the kubelet reports `OOMKilled`, then
/// applies another wave while the container restarts.
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
    let restarts = pods::restarts(run).await?;
    let key = format!("{NAMESPACE}/{name}");
    let restarts_before = restarts.get(&key).copied().unwrap_or(0);
    let forwards = Forwards::new(run.kubectl.clone());
    let hooks = forwards
        .url(&format!("pod/{name}"), NAMESPACE, HOOKS_PORT)
        .await?;
    ctx.wave_all()?;
    let started = Instant::now();
    let used = read_bytes(&usage_file)?;
    let limit = used + (HEADROOM_MIB << 20);
    std::fs::write(&limit_file, limit.to_string())?;
    // The connection ends with the container: an error here is the expected outcome.
    let answer = run
        .http
        .post(format!("{hooks}/allocate?mib={ALLOCATE_MIB}"))
        .send()
        .await;
    if let Ok(a) = &answer {
        anyhow::ensure!(
            a.status().is_success(),
            "the test hooks refused /allocate: {} (does the operator run with --test-hooks?)",
            a.status()
        );
    }
    // The cgroup goes with the container: once it is gone, the container ended.
    while cgroup.exists() && started.elapsed() < OOM_WAIT {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ended = Instant::now();
    if cgroup.exists() {
        let _ = std::fs::write(&limit_file, original.to_string());
        anyhow::bail!(
            "the leader's container was still running {OOM_WAIT:?} after it allocated {ALLOCATE_MIB} MiB over a limit {HEADROOM_MIB} MiB above its usage"
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
            "limit {} MiB ({} MiB used + {HEADROOM_MIB}), {ALLOCATE_MIB} MiB allocated through the hooks, container ended after {:.1} s: {}",
            mib(limit),
            mib(used),
            (ended - started).as_secs_f64(),
            reason.unwrap_or_else(|| "no reason reported".into())
        )],
    })
}
