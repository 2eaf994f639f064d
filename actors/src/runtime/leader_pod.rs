//! The leader's pod is the one its ReplicaSet deletes last: when this replica takes the Lease,
//! it sets `controller.kubernetes.io/pod-deletion-cost` on its own pod. The ReplicaSet
//! controller deletes pods of a lower cost first among pods that are equally ready, so in a
//! rolling update the standbys go before the leader, which is meant to move the Lease once,
//! to a new replica, instead of old leader -> old standby -> new replica (docs/upgrade.md,
//! docs/adr/0018-upgrades-that-change-nothing.md). The annotation is a hint, never a guard.
//!
//! The cost is the time the Lease was taken (seconds since 2025): a pod whose container
//! restarted as a standby keeps its older, lower cost, so the current leader still ranks
//! above it. A failed patch (RBAC without `patch` on pods) costs only the ordering: logged,
//! and leading goes on.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};

pub const DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// 2025-01-01T00:00:00Z.
const EPOCH: i64 = 1_735_689_600;

/// The cost for a Lease taken at `now`: seconds since 2025, which fit the annotation's int32
/// until 2093.
pub fn cost(now: Timestamp) -> i32 {
    i32::try_from((now.as_second() - EPOCH).max(0)).unwrap_or(i32::MAX)
}

/// Sets the cost on `namespace/pod`, this replica's own pod.
pub async fn mark(client: &Client, namespace: &str, pod: &str) {
    let value = cost(Timestamp::now()).to_string();
    let patch = serde_json::json!({"metadata": {"annotations": {DELETION_COST: value}}});
    let api = Api::<Pod>::namespaced(client.clone(), namespace);
    match api
        .patch(pod, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => tracing::debug!(pod, cost = %value, "leader's pod marked to be deleted last"),
        Err(error) => tracing::warn!(
            pod, %error,
            "could not mark the leader's pod to be deleted last; a rolling update may move the Lease twice"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_leaders_cost_more_and_the_cost_fits_an_int32() {
        let t = |s: i64| Timestamp::from_second(s).unwrap();
        assert_eq!(cost(t(EPOCH)), 0);
        assert!(cost(t(EPOCH + 10)) > cost(t(EPOCH + 9)));
        assert_eq!(cost(t(0)), 0);
        assert_eq!(cost(t(EPOCH + i64::from(i32::MAX) + 5)), i32::MAX);
        assert!(cost(t(1_796_000_000)) > 0);
    }
}
