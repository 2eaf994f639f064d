//! The scenario on a cluster with a kubelet (`just e2e-node`, `just e2e`): the chart installed
//! with Helm, the TerdutServer of docs/examples running the stand-in image and turning Ready,
//! the golden path through the Service's DNS name, then key rotation, the disruption budgets,
//! leader failover and a rolling restart, a real Prometheus, liveness (a stalled leader
//! restarted by the kubelet), and everything deleted.

pub mod dashboard;
pub mod disruption;
pub mod helm;
pub mod ingest;
pub mod leader;
pub mod liveness;
pub mod prometheus;
pub mod rotation;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use kube::Api;
use kube::api::ListParams;

use crate::checks::log;
use crate::examples::{self, SERVER, SERVER_NS};
use crate::run::Run;
use crate::{golden, metrics, wait};
use helm::{Helm, NAMESPACE, RELEASE};

/// The images a run uses, by reference (already in the cluster's container runtime), and where
/// the chart (and with a published release, the operator image) comes from.
#[derive(Debug, Clone)]
pub struct Images {
    pub chart: helm::ChartSource,
    pub operator: String,
    pub standin: String,
    pub prometheus: String,
    /// `Never` where the images were imported (nothing can be pulled), else `IfNotPresent`.
    pub pull_policy: String,
}

/// Waits until the Deployment has all its replicas Ready again.
pub async fn deployment_available(
    run: &crate::run::Run,
    ns: &str,
    name: &str,
) -> anyhow::Result<()> {
    let api = Api::<Deployment>::namespaced(run.client.clone(), ns);
    wait::until(
        &format!("deployment {ns}/{name} available"),
        Duration::from_secs(180),
        || async {
            let d = api.get(name).await?;
            let want = d.spec.replicas.unwrap_or(1);
            let s = d.status.unwrap_or_default();
            let done = s.ready_replicas == Some(want)
                && s.updated_replicas == Some(want)
                && s.replicas == Some(want);
            Ok(done.then_some(()))
        },
    )
    .await
}

async fn leader_metrics_url(run: &Run) -> anyhow::Result<String> {
    let leader = leader::holder(run).await?;
    Ok(format!(
        "{}/metrics",
        run.reach.pod(&run.client, NAMESPACE, &leader, 8080).await?
    ))
}

/// Everything up to the golden path's verification; `keep` stops there.
pub async fn scenario(run: &Run, helm: &Helm, images: &Images, keep: bool) -> anyhow::Result<()> {
    scenario_with(run, helm, images, keep, async |_| Ok(())).await
}

/// The scenario with `before_teardown` run after the exercises, on everything still up, before
/// it is all deleted: `just e2e`'s checks of what only several nodes show (kind.rs).
pub async fn scenario_with(
    run: &Run,
    helm: &Helm,
    images: &Images,
    keep: bool,
    before_teardown: impl AsyncFnOnce(&Run) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    helm::install(run, helm, images).await?;
    prometheus::deploy(run, helm, &images.prometheus).await?;

    log("applying namespaces (restricted), the database password Secret and the TerdutServer");
    golden::apply_namespaces(run, true)?;
    run.kubectl
        .apply_file(&examples::file("05-database-password.yaml"))?;
    run.kubectl.apply_yaml(&examples::server_for_cluster(
        &images.standin,
        &images.pull_policy,
    )?)?;
    let ready = wait::until(
        "the TerdutServer Ready",
        Duration::from_secs(180),
        || async { Ok(golden::server_ready(run).await?.then_some(())) },
    )
    .await;
    run.checks.check_result(
        "the TerdutServer runs the stand-in image and turns Ready (its pods Ready by their probes)",
        &ready,
    );
    ready?;
    run.wait_server().await?;
    golden::converge(run).await?;
    let waited = run.kubectl.run(&[
        "wait",
        "--for=condition=Ready",
        "terdutservers,terdutteams,terdutalertsources",
        "--all",
        "--all-namespaces",
        "--timeout=120s",
    ]);
    run.checks.check_result(
        "kubectl wait --for=condition=Ready returns for every CR",
        &waited,
    );
    golden::verify_on_server(run).await?;
    crate::tracking::check(run).await?;
    metrics::check(run, &leader_metrics_url(run).await?).await?;
    ingest::check(run).await?;
    if keep {
        return Ok(());
    }

    rotation::check(run).await?;
    disruption::check(run).await?;
    leader::failover(run).await?;
    leader::rollout_restart(run).await?;
    golden::wait_teams_and_sources(run, Duration::from_secs(120)).await?;
    prometheus::check(run).await?;
    dashboard::check(run).await?;
    liveness::check(run, helm).await?;
    before_teardown(run).await?;

    golden::delete_teams_and_sources(run)?;
    golden::check_server_empty(run).await?;
    golden::delete_server(run).await?;
    owned_gone(run).await?;
    uninstall(run, helm).await
}

/// What the TerdutServer owned goes with it (garbage collection by owner references).
async fn owned_gone(run: &Run) -> anyhow::Result<()> {
    let gone = wait::until(
        "the server's objects gone",
        Duration::from_secs(120),
        || async {
            let deps = Api::<Deployment>::namespaced(run.client.clone(), SERVER_NS)
                .get_opt(SERVER)
                .await?;
            let svc = Api::<Service>::namespaced(run.client.clone(), SERVER_NS)
                .get_opt(SERVER)
                .await?;
            let key = Api::<Secret>::namespaced(run.client.clone(), SERVER_NS)
                .get_opt(&examples::operator_key_secret())
                .await?;
            let pods = Api::<Pod>::namespaced(run.client.clone(), SERVER_NS)
                .list(&ListParams::default().labels("app.kubernetes.io/name=terdut-server"))
                .await?;
            Ok(
                (deps.is_none() && svc.is_none() && key.is_none() && pods.items.is_empty())
                    .then_some(()),
            )
        },
    )
    .await;
    run.checks.check_result(
        "the TerdutServer's Deployment, pods, Service and key Secret are gone with it",
        &gone,
    );
    Ok(())
}

async fn uninstall(run: &Run, helm: &Helm) -> anyhow::Result<()> {
    helm.run(&[
        "uninstall",
        RELEASE,
        "--namespace",
        NAMESPACE,
        "--wait",
        "--timeout",
        "2m",
    ])?;
    let pods = Api::<Pod>::namespaced(run.client.clone(), NAMESPACE);
    let gone = wait::until(
        "the operator's pods gone",
        Duration::from_secs(120),
        || async {
            Ok(pods
                .list(&ListParams::default())
                .await?
                .items
                .is_empty()
                .then_some(()))
        },
    )
    .await;
    run.checks
        .check_result("helm uninstall leaves no operator pod", &gone);
    Ok(())
}
