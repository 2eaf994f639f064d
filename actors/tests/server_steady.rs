//! Steady state: after a TerdutServer converged, a resync makes zero Kubernetes writes. Alone
//! in its test binary so that the operator's global write counter is this test's alone.

mod common;

use std::time::Duration;

use common::{eventually, setup};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, PostParams};
use serde_json::json;
use terdut_actors::key::ObjectKey;
use terdut_actors::tree::ServerMsg;
use terdut_crds::v1alpha1::TerdutServer;

#[tokio::test]
async fn a_resync_after_convergence_writes_nothing() {
    let (_, client, ns, op) = setup("steady").await;
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    let s: TerdutServer = serde_json::from_value(json!({
        "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutServer",
        "metadata": {"name": "terdut"},
        "spec": {
            "image": {"tag": "v0.9.3"},
            "networking": {"hostname": "terdut.example.com", "servicePort": 18090},
            "database": {"dsn": "postgres://terdut@db:5432/terdut"},
            "pod": {"disruptionBudget": {"maxUnavailable": "50%"},
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}},
        }
    }))
    .unwrap();
    servers.create(&PostParams::default(), &s).await.unwrap();
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &ns);
    eventually("PDB", Duration::from_secs(30), || async {
        pdbs.get_opt("terdut").await.ok().flatten()
    })
    .await;

    // Converged: the write counter stops moving (the controller-manager's own status updates
    // of the Deployment nudge the actor, which must then find nothing to do).
    let writes = || op.ctx.metrics.kube_writes_total();
    let mut last = writes();
    eventually("writes to settle", Duration::from_secs(30), || {
        let now = writes();
        let settled = now == last;
        last = now;
        async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            settled.then_some(())
        }
    })
    .await;

    let before = writes();
    let actor = op
        .tree
        .registry
        .get(&ObjectKey::new(ns.clone(), "terdut"))
        .map(|r| r.clone())
        .unwrap();
    for _ in 0..5 {
        actor.cast(ServerMsg::Resync).unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let after = writes();
    eprintln!(
        "Kubernetes writes during 5 forced resyncs of a converged server: {}",
        after - before
    );
    assert_eq!(after, before, "a no-op resync must not write");
}
