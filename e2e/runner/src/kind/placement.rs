//! Where pods run: the nodes of the operator's and the server's pods, the workers, and the
//! check that the operator's two replicas are on different nodes (the chart's default topology
//! spread, so that losing one node never takes both).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::ListParams;

use crate::cluster::helm::{NAMESPACE, RELEASE};
use crate::examples::{SERVER, SERVER_NS};
use crate::run::Run;

/// A pod: its name, its node, and whether it is Ready and not terminating.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    pub pod: String,
    pub node: String,
    pub ready: bool,
}

async fn placed(run: &Run, ns: &str, selector: &str) -> anyhow::Result<Vec<Placed>> {
    let pods = Api::<Pod>::namespaced(run.client.clone(), ns)
        .list(&ListParams::default().labels(selector))
        .await?;
    Ok(pods
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| Placed {
            ready: p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
            node: p.spec.and_then(|s| s.node_name).unwrap_or_default(),
            pod: p.metadata.name.unwrap_or_default(),
        })
        .collect())
}

/// The operator's pods that are not terminating.
pub async fn operator(run: &Run) -> anyhow::Result<Vec<Placed>> {
    placed(
        run,
        NAMESPACE,
        &format!("app.kubernetes.io/name=terdut-operator,app.kubernetes.io/instance={RELEASE}"),
    )
    .await
}

/// The TerdutServer's pods that are not terminating.
pub async fn server(run: &Run) -> anyhow::Result<Vec<Placed>> {
    placed(
        run,
        SERVER_NS,
        &format!("app.kubernetes.io/name=terdut-server,app.kubernetes.io/instance={SERVER}"),
    )
    .await
}

/// The nodes pods may go to: no control-plane taint.
pub async fn workers(run: &Run) -> anyhow::Result<Vec<String>> {
    Ok(Api::<Node>::all(run.client.clone())
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|n| {
            !n.spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|ts| {
                    ts.iter()
                        .any(|t| t.key == "node-role.kubernetes.io/control-plane")
                })
        })
        .filter_map(|n| n.metadata.name)
        .collect())
}

/// Whether `pods` are each on a node of their own.
pub fn on_distinct_nodes(pods: &[Placed]) -> bool {
    let nodes: BTreeSet<&str> = pods.iter().map(|p| p.node.as_str()).collect();
    !pods.is_empty() && pods.iter().all(|p| !p.node.is_empty()) && nodes.len() == pods.len()
}

/// The operator's two replicas on two nodes. Checked after the scenario's leader failover and
/// rolling restart, which each scheduled replacements with both replicas' pods in view.
pub async fn check_spread(run: &Run) -> anyhow::Result<()> {
    let pods = operator(run).await?;
    run.checks.check(
        "the operator's two replicas run on different nodes (the chart's topology spread)",
        pods.len() == 2 && on_distinct_nodes(&pods),
        format!("{pods:?}"),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pod: &str, node: &str) -> Placed {
        Placed {
            pod: pod.into(),
            node: node.into(),
            ready: true,
        }
    }

    #[test]
    fn two_pods_on_one_node_are_not_spread() {
        assert!(on_distinct_nodes(&[p("a", "w1"), p("b", "w2")]));
        assert!(!on_distinct_nodes(&[p("a", "w1"), p("b", "w1")]));
        assert!(!on_distinct_nodes(&[p("a", "w1"), p("b", "")]));
        assert!(!on_distinct_nodes(&[]));
    }
}
