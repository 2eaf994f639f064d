//! `--memory-only a|b`: the operator's memory after a cold start with one runtime alone in
//! this process, so the actor tree (a) and the kube-runtime Controller baseline (b) are
//! measured alike: the same objects, stand-ins and settle time, each in a fresh process (in
//! one process the allocator would keep what the first variant freed). `just bench-memory`
//! runs both and compares them (docs/performance.md).

use std::time::Duration;

use serde_json::{Value, json};
use terdut_actors::operator::ChildRuntime;
use terdut_testenv::ControlPlane;

use super::rss::{Rss, mib};
use super::scrape::Scrape;
use super::{Args, controllers, say};

/// Which runtime reconciles teams and sources.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
pub enum Variant {
    /// The actor tree (what the operator runs).
    A,
    /// kube-runtime `Controller`s, unbounded concurrency (baseline (b)).
    B,
}

/// One variant's cold start and its RSS over the process's own before it: right after
/// convergence and after `--memory-settle-secs` (idle actors passivate in that time).
pub async fn measure(
    cp: &ControlPlane,
    args: &Args,
    client: &kube::Client,
    variant: Variant,
) -> anyhow::Result<Value> {
    let ns = cp.namespace(client, "bench").await?;
    let before = Rss::now().unwrap_or_default();
    let runtime = match variant {
        Variant::A => ChildRuntime::Actors,
        Variant::B => ChildRuntime::External,
    };
    let (running, registry) = super::start_operator(cp, args, &ns, runtime).await?;
    let standins = super::servers(args, client, &ns, &running, &registry).await?;
    let baseline = (variant == Variant::B)
        .then(|| controllers::spawn(client, &running.ctx, &running.tree.registry, &ns, 0));
    let cold = super::cold_start(args, client, &ns, &registry, &standins).await?;
    let converged = Rss::now().unwrap_or_default();
    say(&format!(
        "converged; settling for {} s",
        args.memory_settle_secs
    ));
    tokio::time::sleep(Duration::from_secs(args.memory_settle_secs)).await;
    let settled = Rss::now().unwrap_or_default();
    let scrape = Scrape::take(&registry);
    let alive = scrape.sum("actors_active", &[("kind", "team")])
        + scrape.sum("actors_active", &[("kind", "source")]);
    let heap = terdut_heap::stats();
    let out = json!({
        "variant": variant,
        "teams": args.teams,
        "sources": args.sources,
        "servers": args.servers,
        "all_ready_ms": cold["total_ms"],
        "rss_before_mib": mib(before.rss_kib as i64),
        "converged_over_before_mib": mib(converged.rss_kib as i64 - before.rss_kib as i64),
        "settled_over_before_mib": mib(settled.rss_kib as i64 - before.rss_kib as i64),
        "peak_over_before_mib": mib(settled.peak_kib as i64 - before.rss_kib as i64),
        "actors_alive_settled": alive,
        "heap": heap.map(|h| json!({
            "allocator": h.allocator.name(),
            "in_use_mib": mib((h.in_use / 1024) as i64),
            "free_mib": mib((h.free / 1024) as i64),
        })),
    });
    if let Some(b) = baseline {
        b.stop();
    }
    running.stop().await;
    for s in standins {
        s.shutdown().await;
    }
    Ok(out)
}
