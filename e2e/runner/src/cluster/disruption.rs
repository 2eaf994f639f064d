//! The PodDisruptionBudgets hold: an eviction beyond `minAvailable` is refused.
//! - The TerdutServer's own (docs/examples: `minAvailable: 1`, one replica here): evicting its
//!   only pod is refused.
//! - The chart's (`podDisruptionBudget.enabled`, `minAvailable: 1`, two replicas): the first
//!   eviction is allowed, the next one, before the replacement is Ready, is refused.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{EvictParams, ListParams};
use kube::{Api, Client};

use super::helm::{NAMESPACE, RELEASE};
use super::leader;
use crate::examples::{SERVER, SERVER_NS};
use crate::run::Run;

/// `Ok(true)` evicted, `Ok(false)` refused by a disruption budget (429).
async fn evict(client: &Client, ns: &str, pod: &str) -> anyhow::Result<bool> {
    match Api::<Pod>::namespaced(client.clone(), ns)
        .evict(pod, &EvictParams::default())
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 429 => Ok(false),
        Err(e) => Err(e.into()),
    }
}

async fn pod_names(client: &Client, ns: &str, selector: &str) -> anyhow::Result<Vec<String>> {
    Ok(Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(selector))
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.metadata.name)
        .collect())
}

pub async fn check(run: &Run) -> anyhow::Result<()> {
    let c = &run.checks;
    let server_pods = pod_names(
        &run.client,
        SERVER_NS,
        &format!("app.kubernetes.io/name=terdut-server,app.kubernetes.io/instance={SERVER}"),
    )
    .await?;
    let refused = match server_pods.as_slice() {
        [only] => !evict(&run.client_no_retry, SERVER_NS, only).await?,
        _ => false,
    };
    c.check(
        "the TerdutServer's PodDisruptionBudget refuses evicting its only pod",
        refused,
        format!("pods {server_pods:?}"),
    );

    let leader = leader::holder(run).await?;
    let standby = pod_names(
        &run.client,
        NAMESPACE,
        &format!("app.kubernetes.io/name=terdut-operator,app.kubernetes.io/instance={RELEASE}"),
    )
    .await?
    .into_iter()
    .find(|p| *p != leader)
    .ok_or_else(|| anyhow::anyhow!("no standby replica"))?;
    let first = evict(&run.client_no_retry, NAMESPACE, &standby).await?;
    let second = evict(&run.client_no_retry, NAMESPACE, &leader).await?;
    c.check(
        "the chart's PodDisruptionBudget allows one eviction and refuses the next",
        first && !second,
        format!("standby evicted: {first}, leader evicted: {second}"),
    );
    super::deployment_available(run, NAMESPACE, RELEASE).await
}
