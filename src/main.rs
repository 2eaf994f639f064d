//! terdut-operator: wiring only. Flags (cli.rs) -> telemetry -> HTTP endpoints -> leader
//! election -> the operator (terdut_actors::operator) while this replica leads.

mod cli;

use std::sync::Arc;

use clap::Parser as _;
use prometheus_client::registry::Registry;
use terdut_actors::clock::SystemClock;
use terdut_actors::context::OperatorConfig;
use terdut_actors::kube_clients::KubeClients;
use terdut_actors::operator::{self, Metrics, StartOptions};
use terdut_actors::runtime::faults::Faults;
use terdut_actors::runtime::health::Health;
use terdut_actors::runtime::heap_stats::{self, HeapMetrics};
use terdut_actors::runtime::hook_http;
use terdut_actors::runtime::http::{self, Readiness};
use terdut_actors::runtime::leader::{LeaderElector, LeaseTimings};
use terdut_actors::runtime::leader_pod;
use terdut_actors::runtime::{shutdown, telemetry};
use terdut_actors::supervisor::RestartPolicy;
use tokio::sync::watch;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = cli::Cli::parse();
    telemetry::init(
        cli.log_format.parse().map_err(anyhow::Error::msg)?,
        &cli.log_level,
    );
    // Refused before anything connects: a URL template the DNS search path could complete
    // would send every server's key to whoever answers that name (docs/security.md).
    let config = OperatorConfig {
        resync: cli.resync,
        server_url_template: cli.server_url_template.clone(),
        cluster_domain: cli.cluster_domain.clone(),
        api_timeout: cli.api_timeout,
        test_hooks: cli.test_hooks,
        max_concurrent_passes: cli.max_concurrent_reconciles.into(),
        passivate_after: (!cli.passivate_after.is_zero()).then_some(cli.passivate_after),
        wake_budget: usize::try_from(cli.wake_budget)?,
        selector: cli.selector.clone(),
        operator_namespace: cli.lease_namespace.clone(),
        instance_name: cli.lease_name.clone(),
        watch_namespace_selector: cli.watch_namespace_selector.clone(),
        stall_after: cli.liveness_stall_after,
        watch_namespaces: cli
            .watch_namespaces
            .iter()
            .map(|ns| ns.trim().to_owned())
            .filter(|ns| !ns.is_empty())
            .collect(),
        ..OperatorConfig::default()
    };
    config.validate()?;
    terdut_actors::api::init_tls();
    let clients = KubeClients::from_config(kube::Config::infer().await?)?;
    let client = clients.watch.clone();
    let stop = shutdown::on_signal();

    let mut registry = Registry::with_prefix("terdut_operator");
    let metrics = Metrics::register(&mut registry);
    let heap_metrics = HeapMetrics::register(&mut registry);
    let readiness = Readiness::default();
    // The truth /healthz tells: the leader's parts, as their supervisors and the stall
    // watchdog see them (docs/adr/0017-liveness.md).
    let health = Health::default();
    let serve_stop = stop.clone();
    let (addr, _http) = http::spawn(
        cli.http_addr,
        Arc::new(registry),
        readiness.clone(),
        health.clone(),
        async move { serve_stop.cancelled().await },
    )
    .await?;
    tracing::info!(%addr, "serving /metrics, /healthz, /readyz");
    let faults = if cli.test_hooks {
        let faults = Faults::enabled();
        let (addr, _) = hook_http::spawn(
            cli.test_hooks_addr,
            faults.clone(),
            health.clone(),
            stop.clone(),
        )
        .await?;
        tracing::warn!(%addr, "test hooks on: faults can be armed on the operator's parts");
        faults
    } else {
        Faults::default()
    };
    // RSS stays near its peak after passivation; these tell in-use from kept (ADR 0009).
    let _heap = heap_stats::spawn(heap_stats::EVERY, heap_metrics, stop.clone());

    // Only the leader reconciles. Losing the lease ends the process so that it restarts as a
    // clean candidate (controller-runtime does the same).
    let (lead_tx, mut leading) = watch::channel(!cli.leader_elect);
    let elector_stop = tokio_util::sync::CancellationToken::new();
    // Without election the sender is kept here, so the channel never closes under us (a
    // closed channel would read as a lost lease).
    let (elector, _keep_sender) = if cli.leader_elect {
        let e = LeaderElector::new(
            client.clone(),
            &cli.lease_namespace,
            &cli.lease_name,
            &cli.identity,
            LeaseTimings::default(),
        );
        (
            Some(tokio::spawn(e.run(lead_tx, elector_stop.clone()))),
            None,
        )
    } else {
        (None, Some(lead_tx))
    };
    // A standby is ready once the API server answers (docs: runtime/http.rs): it has no caches
    // to sync, and a not-ready standby would stall `helm install --wait`, evictions and
    // rollouts.
    let standby = {
        let (client, readiness) = (client.clone(), readiness.clone());
        tokio::spawn(async move {
            loop {
                match client.apiserver_version().await {
                    Ok(_) => break readiness.set_standby(),
                    Err(e) => tracing::debug!(error = %e, "API server not answering yet"),
                }
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            }
        })
    };
    tokio::select! {
        _ = leading.wait_for(|l| *l) => {}
        () = stop.cancelled() => return Ok(()),
    }
    standby.abort();
    readiness.set_leader(true);
    metrics.operator.set_leader(true);
    // The leader's pod goes last in a rolling update (actors/src/runtime/leader_pod.rs); only in
    // a pod the chart made, which sets both (the local runs' replicas have no pod). In the
    // background: a slow kube-apiserver must not hold up leading.
    if let (Ok(pod), Ok(ns)) = (std::env::var("POD_NAME"), std::env::var("POD_NAMESPACE"))
        && cli.leader_elect
    {
        let client = client.clone();
        tokio::spawn(async move { leader_pod::mark(&client, &ns, &pod).await });
    }

    let opts = StartOptions {
        config,
        restart_policy: RestartPolicy::default(),
        clock: Arc::new(SystemClock),
        instance: cli.identity.clone(),
        health: health.clone(),
        faults,
    };
    let mut running = operator::start(clients, metrics, opts).await?;
    let end = tokio::select! {
        () = running.wait_synced() => None,
        _ = leading.wait_for(|l| !*l) => Some(End::Lost),
        dead = health.dead() => Some(End::Failed(dead)),
        () = stop.cancelled() => Some(End::Stopped),
    };
    let end = match end {
        Some(end) => end,
        None => {
            readiness.set_synced();
            tracing::info!("caches synced; reconciling");
            tokio::select! {
                _ = leading.wait_for(|l| !*l) => End::Lost,
                () = stop.cancelled() => End::Stopped,
                // A part past its restart limit: like a controller-runtime manager whose
                // runnable failed, stop, hand the Lease over and exit for the kubelet to
                // start the pod again.
                dead = health.dead() => End::Failed(dead),
            }
        }
    };
    running.stop().await;
    elector_stop.cancel();
    if let Some(e) = elector {
        let _ = e.await;
    }
    match end {
        End::Stopped => Ok(()),
        End::Lost => anyhow::bail!(
            "lost the leader lease; exiting so that this replica restarts as a candidate"
        ),
        End::Failed(dead) => {
            anyhow::bail!("{dead}; exiting so that the pod restarts (the Lease is released)")
        }
    }
}

/// Why the leader stops.
enum End {
    Stopped,
    Lost,
    Failed(String),
}
