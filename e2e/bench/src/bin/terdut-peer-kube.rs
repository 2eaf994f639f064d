//! Peer (b) of `just bench peers` as a process of its own: the operator's server actors,
//! informers and routes (`ChildRuntime::External`), with teams and sources reconciled by the
//! idiomatic kube-runtime `Controller`s of `controllers.rs` (docs/performance.md, "Peers").

#[path = "../controllers.rs"]
mod controllers;

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use prometheus_client::registry::Registry;
use terdut_actors::clock::SystemClock;
use terdut_actors::context::OperatorConfig;
use terdut_actors::kube_clients::KubeClients;
use terdut_actors::operator::{self, ChildRuntime, Metrics, StartOptions};
use terdut_actors::supervisor::RestartPolicy;

#[derive(Parser, Debug)]
struct Args {
    #[arg(long)]
    watch_namespace: String,
    #[arg(
        long,
        default_value = "http://{name}.{namespace}.svc.{clusterDomain}.:{port}"
    )]
    server_url_template: String,
    /// Seconds, with an `s`.
    #[arg(long, default_value = "300s")]
    resync: String,
    #[arg(long, default_value_t = 256)]
    max_concurrent_reconciles: u16,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    terdut_actors::api::init_tls();
    let resync = Duration::from_secs(args.resync.trim_end_matches('s').parse()?);
    let client = kube::Client::try_default().await?;
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let opts = StartOptions {
        config: OperatorConfig {
            resync,
            max_concurrent_passes: args.max_concurrent_reconciles.into(),
            server_url_template: args.server_url_template.clone(),
            cluster_domain: "cluster.local".into(),
            watch_namespaces: vec![args.watch_namespace.clone()],
            // Team records live in the operator's own namespace: the watched one, as (a)'s.
            operator_namespace: args.watch_namespace.clone(),
            ..OperatorConfig::default()
        },
        restart_policy: RestartPolicy::default(),
        clock: Arc::new(SystemClock),
        instance: "peer-kube".into(),
        health: terdut_actors::runtime::health::Health::default(),
        faults: terdut_actors::runtime::faults::Faults::default(),
    };
    let mut running = operator::start_with(
        KubeClients::from_client(client.clone()),
        metrics,
        opts,
        ChildRuntime::External,
    )
    .await?;
    running.wait_synced().await;
    let controllers = controllers::spawn(
        &client,
        &running.ctx,
        &running.tree.registry,
        &args.watch_namespace,
        args.max_concurrent_reconciles,
    );
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    controllers.stop();
    running.stop().await;
    Ok(())
}
