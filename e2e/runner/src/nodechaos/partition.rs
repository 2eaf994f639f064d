//! The leader's pod cut off by a packet filter in the node's network namespace, where every
//! packet between a pod and anything else is forwarded (bridged pod-to-pod packets pass
//! iptables too: the node sets `bridge-nf-call-iptables`): from the kube-apiserver (the host's
//! address, where the `kubernetes` Service leads), and from the server's pod. DROP, both ways:
//! packets vanish, as they do when a link or a firewall fails, rather than being refused.

use std::time::{Duration, Instant};

use terdut_testenv::NodeCluster;

use super::{Ctx, Outcome};
use crate::checks::log;
use crate::cluster::leader;
use crate::fleet::pods;

/// The chain the rules live in, jumped to first from FORWARD.
const CHAIN: &str = "TERDUT-FAULT";

/// Drops every packet between `a` and `b`.
fn cut(cluster: &NodeCluster, a: &str, b: &str) -> anyhow::Result<()> {
    // A leftover of a broken run: start clean.
    heal(cluster);
    cluster.iptables(&["-N", CHAIN])?;
    cluster.iptables(&["-A", CHAIN, "-s", a, "-d", b, "-j", "DROP"])?;
    cluster.iptables(&["-A", CHAIN, "-s", b, "-d", a, "-j", "DROP"])?;
    cluster.iptables(&["-I", "FORWARD", "1", "-j", CHAIN])?;
    Ok(())
}

/// Removes the jump and the chain (whatever of them exists).
fn heal(cluster: &NodeCluster) {
    while cluster.iptables(&["-D", "FORWARD", "-j", CHAIN]).is_ok() {}
    let _ = cluster.iptables(&["-F", CHAIN]);
    let _ = cluster.iptables(&["-X", CHAIN]);
}

/// How many packets the rules dropped (`-v -x` counters of the chain).
fn dropped(cluster: &NodeCluster) -> u64 {
    cluster
        .iptables(&["-L", CHAIN, "-v", "-x", "-n"])
        .map(|out| {
            out.lines()
                .skip(2)
                .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0)
}

/// The cut for the outage, with a wave as it starts and another halfway; healed whatever
/// happens in between. Returns when it ended and the packets it dropped.
async fn outage(ctx: &mut Ctx<'_>, a: &str, b: &str) -> anyhow::Result<(Instant, Instant, u64)> {
    ctx.wave()?;
    cut(ctx.cluster, a, b)?;
    let started = Instant::now();
    let half = ctx.outage / 2;
    tokio::time::sleep(half).await;
    let waved = ctx.wave();
    tokio::time::sleep(ctx.outage - half).await;
    let packets = dropped(ctx.cluster);
    heal(ctx.cluster);
    waved?;
    Ok((started, Instant::now(), packets))
}

/// The leader cut off from the kube-apiserver: it cannot renew its Lease, so it must stop
/// leading before its renew deadline and another replica take over; changes made meanwhile
/// are the new leader's to reconcile.
pub async fn apiserver(ctx: &mut Ctx<'_>) -> anyhow::Result<Outcome> {
    let run = ctx.run;
    let pod = pods::leader_pod(run).await?;
    let (name, ip) = (pods::name(&pod), pods::ip(&pod)?);
    let host = ctx.cluster.layout().host_ip.to_string();
    log(&format!(
        "cutting the leader {name} ({ip}) off from the kube-apiserver ({host})"
    ));
    let taken = std::sync::Arc::new(std::sync::Mutex::new(None::<(String, Duration)>));
    let watcher = {
        let (taken, name, run_client) = (taken.clone(), name.clone(), run.client.clone());
        let started = Instant::now();
        tokio::spawn(async move {
            let api = kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
                run_client,
                crate::cluster::helm::NAMESPACE,
            );
            loop {
                let holder = api
                    .get(crate::fleet::watch::LEASE)
                    .await
                    .ok()
                    .and_then(|l| l.spec)
                    .and_then(|s| s.holder_identity)
                    .filter(|h| !h.is_empty() && *h != name);
                if let Some(h) = holder {
                    if let Ok(mut t) = taken.lock() {
                        *t = Some((h, started.elapsed()));
                    }
                    return;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    let (started, ended, packets) = outage(ctx, &ip, &host).await?;
    watcher.abort();
    let taken = taken.lock().map(|t| t.clone()).unwrap_or_default();
    run.checks.check(
        "apiserver-cut: another replica takes the Lease while the leader is cut off",
        taken.is_some(),
        format!(
            "the Lease was still {:?} when the cut ended",
            leader::holder(run).await.unwrap_or_default()
        ),
    );
    let mut notes = vec![format!("{packets} packets dropped")];
    if let Some((by, at)) = taken {
        notes.push(format!(
            "{by} took the Lease {:.1} s into the cut",
            at.as_secs_f64()
        ));
    }
    Ok(Outcome {
        ended,
        lasted: ended - started,
        notes,
    })
}

/// The leader cut off from the server's pod: its calls time out; changes made meanwhile are
/// reconciled once the path is back, by its retries.
pub async fn server(ctx: &mut Ctx<'_>) -> anyhow::Result<Outcome> {
    let run = ctx.run;
    let leader = pods::leader_pod(run).await?;
    let server = pods::server_pod(run).await?;
    let (lip, sip) = (pods::ip(&leader)?, pods::ip(&server)?);
    log(&format!(
        "cutting the leader {} ({lip}) off from the server's pod {} ({sip})",
        pods::name(&leader),
        pods::name(&server)
    ));
    let (started, ended, packets) = outage(ctx, &lip, &sip).await?;
    let holder = leader::holder(run).await.unwrap_or_default();
    Ok(Outcome {
        ended,
        lasted: ended - started,
        notes: vec![
            format!("{packets} packets dropped"),
            format!(
                "the Lease {} through the cut",
                if holder == pods::name(&leader) {
                    "stayed with the leader"
                } else {
                    "moved"
                }
            ),
        ],
    })
}
