//! The pods a fault aims at and what they went through: the leader's pod, its container's id
//! and address, the server's pod, containers' restart counts and last terminations.

use std::collections::BTreeMap;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;

use crate::cluster::helm::{NAMESPACE, RELEASE};
use crate::cluster::leader;
use crate::examples::{SERVER, SERVER_NS};
use crate::run::Run;

pub const OPERATOR_SELECTOR: &str = "app.kubernetes.io/name=terdut-operator";

pub fn server_selector() -> String {
    format!("app.kubernetes.io/name=terdut-server,app.kubernetes.io/instance={SERVER}")
}

/// The pod holding the Lease.
pub async fn leader_pod(run: &Run) -> anyhow::Result<Pod> {
    let name = leader::holder(run).await?;
    Api::<Pod>::namespaced(run.client.clone(), NAMESPACE)
        .get(&name)
        .await
        .with_context(|| format!("the leader's pod {name}"))
}

/// The server's one pod that is not terminating.
pub async fn server_pod(run: &Run) -> anyhow::Result<Pod> {
    Api::<Pod>::namespaced(run.client.clone(), SERVER_NS)
        .list(&ListParams::default().labels(&server_selector()))
        .await?
        .items
        .into_iter()
        .find(|p| p.metadata.deletion_timestamp.is_none())
        .context("no server pod")
}

pub fn name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

pub fn ip(pod: &Pod) -> anyhow::Result<String> {
    pod.status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .with_context(|| format!("pod {} has no IP", name(pod)))
}

/// The running container's id (without `containerd://`), for its cgroup.
pub fn container_id(pod: &Pod) -> anyhow::Result<String> {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.first())
        .and_then(|c| c.container_id.as_deref())
        .and_then(|id| id.split_once("://").map(|(_, id)| id.to_owned()))
        .with_context(|| format!("pod {} has no running container", name(pod)))
}

/// `<ns>/<pod>` -> restarts of its first container, for the operator's and the server's pods.
pub async fn restarts(run: &Run) -> anyhow::Result<BTreeMap<String, i32>> {
    let mut out = BTreeMap::new();
    for (ns, sel) in [
        (NAMESPACE, OPERATOR_SELECTOR.to_owned()),
        (SERVER_NS, server_selector()),
    ] {
        let pods = Api::<Pod>::namespaced(run.client.clone(), ns)
            .list(&ListParams::default().labels(&sel))
            .await?;
        for p in pods.items {
            let n = p
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|cs| cs.first())
                .map_or(0, |c| c.restart_count);
            out.insert(format!("{ns}/{}", name(&p)), n);
        }
    }
    Ok(out)
}

/// How many container restarts `after` has over `before` (pods new in `after` count theirs).
pub fn restarted(before: &BTreeMap<String, i32>, after: &BTreeMap<String, i32>) -> i32 {
    after
        .iter()
        .map(|(p, n)| n - before.get(p).copied().unwrap_or(0))
        .filter(|d| *d > 0)
        .sum()
}

/// The reason the pod's container last terminated (`OOMKilled`, `Error`, ...), if it did.
pub async fn last_termination(run: &Run, pod: &str) -> anyhow::Result<Option<String>> {
    let p = Api::<Pod>::namespaced(run.client.clone(), NAMESPACE)
        .get(pod)
        .await?;
    Ok(p.status
        .and_then(|s| s.container_statuses)
        .and_then(|cs| cs.into_iter().next())
        .and_then(|c| c.last_state)
        .and_then(|s| s.terminated)
        .and_then(|t| t.reason))
}

/// Both operator replicas Ready (after a fault they may come back later than the objects).
pub async fn operator_available(run: &Run) -> anyhow::Result<()> {
    crate::cluster::deployment_available(run, NAMESPACE, RELEASE).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restarts_count_growth_and_new_pods() {
        let m = |v: &[(&str, i32)]| -> BTreeMap<String, i32> {
            v.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect()
        };
        let before = m(&[("a", 1), ("b", 0)]);
        assert_eq!(restarted(&before, &m(&[("a", 1), ("b", 0)])), 0);
        assert_eq!(restarted(&before, &m(&[("a", 2), ("c", 1)])), 2);
    }
}
