//! The Zalando `postgresClusterRef` path (docs/design.md §8) on a real apiserver: a clear condition
//! while the postgres-operator's CRD is absent, another while the named cluster is missing,
//! then the DSN and PGPASSWORD wiring once it exists. Alone in its binary because it installs
//! the `postgresql` CRD into the shared control plane.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{eventually, setup, zalando_crd};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;
use terdut_crds::v1alpha1::TerdutServer;

const WAIT: Duration = Duration::from_secs(30);

async fn ready_reason(api: &Api<TerdutServer>, name: &str) -> Option<(String, String)> {
    let st = api.get(name).await.ok()?.status?;
    let c = st.conditions.into_iter().find(|c| c.type_ == "Ready")?;
    Some((c.reason, c.message))
}

#[tokio::test]
async fn zalando_cluster_ref_resolves_or_says_why_not() {
    let (_, client, ns, _) = setup("zalando").await;
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    let s: TerdutServer = serde_json::from_value(json!({
        "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutServer",
        "metadata": {"name": "terdut"},
        "spec": {
            "image": {"tag": "v0.9.3"},
            "networking": {"hostname": "terdut.example.com", "servicePort": 18200},
            "database": {"postgresClusterRef": {"name": "terdut-postgres"}},
        }
    }))
    .unwrap();
    servers.create(&PostParams::default(), &s).await.unwrap();

    // 1. The postgres-operator is not installed: say so, make no Deployment.
    let (_, msg) = eventually("PostgresOperatorNotInstalled", WAIT, || async {
        ready_reason(&servers, "terdut")
            .await
            .filter(|(r, _)| r == "PostgresOperatorNotInstalled")
    })
    .await;
    assert!(msg.contains("postgres"), "{msg}");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    assert!(deployments.get_opt("terdut").await.unwrap().is_none());

    // 2. Installed, but the cluster does not exist.
    terdut_testenv::install_crds(&client, vec![zalando_crd()])
        .await
        .unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("acid.zalan.do", "v1", "postgresql"),
        "postgresqls",
    );
    // The resync is 5 minutes: touch the server to reconcile now.
    let touch = |v: &'static str| {
        let servers = servers.clone();
        async move {
            let patch = json!({"metadata": {"annotations": {"test/touch": v}}});
            servers
                .patch(
                    "terdut",
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&patch),
                )
                .await
                .unwrap();
        }
    };
    touch("1").await;
    let (_, msg) = eventually("DatabaseClusterNotFound", WAIT, || async {
        ready_reason(&servers, "terdut")
            .await
            .filter(|(r, _)| r == "DatabaseClusterNotFound")
    })
    .await;
    assert!(msg.contains("terdut-postgres"), "{msg}");

    // 3. The cluster exists and runs: DSN and password are wired from it.
    let pg: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "acid.zalan.do/v1", "kind": "postgresql",
        "metadata": {"name": "terdut-postgres"},
        "spec": {"teamId": "terdut", "numberOfInstances": 1},
    }))
    .unwrap();
    pg.create(&PostParams::default(), &obj).await.unwrap();
    touch("2").await;
    // 3a. Its master Service is not there yet: the DSN has nowhere to point.
    let (_, msg) = eventually("no master Service yet", WAIT, || async {
        ready_reason(&servers, "terdut")
            .await
            .filter(|(r, m)| r == "DatabaseClusterNotRunning" && m.contains("master Service"))
    })
    .await;
    assert!(msg.contains("terdut-postgres"), "{msg}");
    // 3b. The postgres-operator makes the Service (on a port of its own); the credentials
    // Secret is still missing, and named.
    let svc: k8s_openapi::api::core::v1::Service = serde_json::from_value(json!({
        "metadata": {"name": "terdut-postgres", "labels": {"cluster-name": "terdut-postgres",
                                                          "spilo-role": "master"}},
        "spec": {"ports": [{"name": "postgresql", "port": 6432, "targetPort": 5432}]},
    }))
    .unwrap();
    Api::<k8s_openapi::api::core::v1::Service>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &svc)
        .await
        .unwrap();
    let secret = "terdut.terdut-postgres.credentials.postgresql.acid.zalan.do";
    let (_, msg) = eventually("SecretNotFound", WAIT, || async {
        ready_reason(&servers, "terdut")
            .await
            .filter(|(r, _)| r == "SecretNotFound")
    })
    .await;
    assert!(
        msg.contains(secret) && msg.contains("postgresClusterRef"),
        "{msg}"
    );
    assert!(deployments.get_opt("terdut").await.unwrap().is_none());
    // 3c. The Secret appears; nothing touches the server: it notices by itself (no watch on
    // the user's Secrets, so it looks again with a growing delay, at most 30 s apart).
    common::create_secret(&client, &ns, secret, &[("password", "not-a-real-password")]).await;
    let d = eventually("Deployment", Duration::from_secs(45), || async {
        deployments.get_opt("terdut").await.ok().flatten()
    })
    .await;
    let c = &d.spec.template.spec.as_ref().unwrap().containers[0];
    let env: BTreeMap<_, _> = c
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.clone(), e.clone()))
        .collect();
    assert_eq!(
        env["TERDUT_DATABASE_DSN"].value.as_deref(),
        Some(
            format!(
                "postgres://terdut@terdut-postgres.{ns}.svc.cluster.local.:6432/terdut?sslmode=require"
            )
            .as_str()
        )
    );
    let pw = env["PGPASSWORD"]
        .value_from
        .as_ref()
        .unwrap()
        .secret_key_ref
        .as_ref()
        .unwrap();
    assert_eq!(
        pw.name,
        "terdut.terdut-postgres.credentials.postgresql.acid.zalan.do"
    );
    assert_eq!(pw.key, "password");
    assert!(env["PGPASSWORD"].value.is_none());
}
