//! The operator's first write of an object it owns is a create that cannot land on anyone
//! else's (`write::apply`), and afterwards the object is still the apply's alone: a field the
//! spec stops asking for goes (docs/design.md §7 "Writes"), against the real kube-apiserver.

mod common;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use terdut_crds::v1alpha1::TerdutServer;

use common::{eventually, setup, test_server};

const WAIT: Duration = Duration::from_secs(30);

fn pod_annotation(d: &Deployment, key: &str) -> Option<String> {
    d.spec
        .template
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?
        .get(key)
        .cloned()
}

#[tokio::test]
async fn a_created_deployment_drops_what_the_spec_no_longer_sets() {
    let (_cp, client, ns, _op) = setup("owned-writes").await;
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    let mut server = test_server("terdut", 19805);
    server.spec.pod.annotations = [("example.com/team".to_owned(), "payments".to_owned())].into();
    servers
        .create(&PostParams::default(), &server)
        .await
        .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    eventually("the Deployment", WAIT, || async {
        let d = deployments.get_opt("terdut").await.ok().flatten()?;
        pod_annotation(&d, "example.com/team").map(|_| ())
    })
    .await;
    // Created by the operator, and then owned by its apply alone (the create's own entry turned
    // into the apply's a moment after the POST): no entry a later apply could not take back.
    eventually("the operator's one Apply entry", WAIT, || async {
        let d = deployments.get("terdut").await.ok()?;
        let entries: Vec<_> = d
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .filter(|m| m.manager.as_deref() == Some("terdut-operator"))
            .map(|m| m.operation.clone().unwrap_or_default())
            .collect();
        (entries == ["Apply"]).then_some(())
    })
    .await;

    servers
        .patch(
            "terdut",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"pod": {"annotations": null}}})),
        )
        .await
        .unwrap();
    eventually("the pod annotation gone", WAIT, || async {
        let d = deployments.get("terdut").await.ok()?;
        pod_annotation(&d, "example.com/team")
            .is_none()
            .then_some(())
    })
    .await;
}
