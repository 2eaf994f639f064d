//! The CloudNativePG `cnpgClusterRef` path (docs/design.md §8) on a real apiserver: a clear
//! condition while the CRD is absent, the Cluster is missing or has no `-rw` Service yet, then
//! the DSN and PGPASSWORD wiring from the Cluster's Service and application Secret; and the roll
//! of the pods when a database password Secret is rotated (once per write, with the operator
//! never reading the password). Alone in its binary because it installs the `Cluster` CRD into
//! the shared control plane.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{cnpg_crd, eventually, metric, setup};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{EnvVar, Secret, Service};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;
use terdut_crds::v1alpha1::TerdutServer;

const WAIT: Duration = Duration::from_secs(45);
const DATABASE_SECRET_ANNOTATION: &str = "terdut.ryuvia.com/database-secret-hash";
const KEY_HASH_ANNOTATION: &str = "terdut.ryuvia.com/operator-key-hash";

async fn ready_reason(api: &Api<TerdutServer>, name: &str) -> Option<(String, String)> {
    let st = api.get(name).await.ok()?.status?;
    let c = st.conditions.into_iter().find(|c| c.type_ == "Ready")?;
    Some((c.reason, c.message))
}

async fn wait_reason(api: &Api<TerdutServer>, name: &str, want: &str) -> String {
    let (_, msg) = eventually(want, WAIT, || async {
        ready_reason(api, name).await.filter(|(r, _)| r == want)
    })
    .await;
    msg
}

/// A metadata change starts a pass now (the resync is 5 minutes).
async fn touch(api: &Api<TerdutServer>, name: &str, v: &str) {
    let patch = json!({"metadata": {"annotations": {"test/touch": v}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

fn env_of(d: &Deployment) -> BTreeMap<String, EnvVar> {
    d.spec.template.spec.as_ref().unwrap().containers[0]
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.clone(), e.clone()))
        .collect()
}

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

fn server(name: &str, port: i32, database: serde_json::Value) -> TerdutServer {
    serde_json::from_value(json!({
        "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutServer",
        "metadata": {"name": name},
        "spec": {
            "image": {"tag": "v0.9.3"},
            "networking": {"hostname": "terdut.example.com", "servicePort": port},
            "database": database,
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn cnpg_cluster_ref_resolves_or_says_why_not() {
    let (_, client, ns, op) = setup("cnpg").await;
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    let s = server(
        "terdut",
        19760,
        json!({"cnpgClusterRef": {"name": "terdut-pg"}}),
    );
    servers.create(&PostParams::default(), &s).await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);

    // 1. CloudNativePG is not installed: say so, make no Deployment; the objects gauge counts it.
    let msg = wait_reason(&servers, "terdut", "PostgresOperatorNotInstalled").await;
    assert!(
        msg.contains("CloudNativePG") && msg.contains("terdut-pg"),
        "{msg}"
    );
    assert!(deployments.get_opt("terdut").await.unwrap().is_none());
    let not_installed =
        r#"objects{kind="server",ready="False",reason="PostgresOperatorNotInstalled"}"#;
    eventually("the objects gauge", WAIT, || async {
        metric(op, not_installed).filter(|v| *v >= 1.0)
    })
    .await;

    // 2. Installed, but the Cluster does not exist.
    terdut_testenv::install_crds(&client, vec![cnpg_crd()])
        .await
        .unwrap();
    touch(&servers, "terdut", "1").await;
    let msg = wait_reason(&servers, "terdut", "DatabaseClusterNotFound").await;
    assert!(msg.contains("terdut-pg") && msg.contains(&ns), "{msg}");
    // The series of a reason no object has any more goes to 0, it does not keep its count.
    eventually("the emptied series at 0", WAIT, || async {
        metric(op, not_installed).filter(|v| *v == 0.0)
    })
    .await;

    // 3. The Cluster exists (bootstrapped with its own database and owner); CloudNativePG has
    // not made its -rw Service yet.
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("postgresql.cnpg.io", "v1", "Cluster"),
        "clusters",
    );
    let clusters: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    let cluster: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster",
        "metadata": {"name": "terdut-pg"},
        "spec": {"instances": 1, "storage": {"size": "1Gi"},
                 "bootstrap": {"initdb": {"database": "terdut", "owner": "terdut"}}},
    }))
    .unwrap();
    clusters
        .create(&PostParams::default(), &cluster)
        .await
        .unwrap();
    touch(&servers, "terdut", "2").await;
    let msg = wait_reason(&servers, "terdut", "DatabaseClusterNotRunning").await;
    assert!(msg.contains("terdut-pg-rw"), "{msg}");

    // 4. The -rw Service appears; the application Secret is still missing, and named.
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "terdut-pg-rw", "labels": {"cnpg.io/cluster": "terdut-pg"}},
        "spec": {"ports": [{"name": "postgres", "port": 5432, "targetPort": 5432}]},
    }))
    .unwrap();
    Api::<Service>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &svc)
        .await
        .unwrap();
    let msg = wait_reason(&servers, "terdut", "SecretNotFound").await;
    assert!(
        msg.contains("terdut-pg-app") && msg.contains("cnpgClusterRef"),
        "{msg}"
    );
    assert!(deployments.get_opt("terdut").await.unwrap().is_none());

    // 5. CloudNativePG's application Secret appears: the server notices by itself (it looks
    // again with a growing delay) and wires the DSN and the password from the Cluster.
    common::create_secret(
        &client,
        &ns,
        "terdut-pg-app",
        &[("username", "terdut"), ("password", "not-a-real-password")],
    )
    .await;
    let d = eventually("Deployment", WAIT, || async {
        deployments.get_opt("terdut").await.ok().flatten()
    })
    .await;
    let env = env_of(&d);
    assert_eq!(
        env["TERDUT_DATABASE_DSN"].value.as_deref(),
        Some(
            format!(
                "postgres://terdut@terdut-pg-rw.{ns}.svc.cluster.local.:5432/terdut?sslmode=require"
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
        (pw.name.as_str(), pw.key.as_str()),
        ("terdut-pg-app", "password")
    );
    assert!(env["PGPASSWORD"].value.is_none());
    assert!(pod_annotation(&d, DATABASE_SECRET_ANNOTATION).is_some());
    // The Cluster has reported nothing yet: with no pod available, that is the reason.
    let msg = wait_reason(&servers, "terdut", "DatabaseClusterNotRunning").await;
    assert!(msg.contains("not Ready"), "{msg}");

    // 6. CloudNativePG reports the Cluster Ready: the server waits for its own pods only.
    let ready = json!({"status": {"phase": "Cluster in healthy state",
        "conditions": [{"type": "Ready", "status": "True", "reason": "ClusterIsReady"}]}});
    clusters
        .patch_status("terdut-pg", &PatchParams::default(), &Patch::Merge(&ready))
        .await
        .unwrap();
    touch(&servers, "terdut", "3").await;
    wait_reason(&servers, "terdut", "Progressing").await;

    // What a user reads in the status: the URL the operator calls, the available pods (none
    // without a kubelet), the key's fingerprint (a prefix of the pod annotation's hash).
    let st = servers.get("terdut").await.unwrap().status.unwrap();
    assert_eq!(st.url.as_deref(), Some("http://127.0.0.1:19760"));
    assert_eq!(st.available_replicas, Some(0));
    let fingerprint = st.key_fingerprint.unwrap();
    assert_eq!(fingerprint.len(), 12);
    let d = deployments.get("terdut").await.unwrap();
    assert!(
        pod_annotation(&d, KEY_HASH_ANNOTATION)
            .unwrap()
            .starts_with(&fingerprint)
    );
}

#[tokio::test]
async fn a_rotated_database_password_rolls_the_pods_once() {
    let (_, client, ns, _) = setup("dbrotate").await;
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    common::create_secret(&client, &ns, "db-password", &[("password", "first")]).await;
    let s = server(
        "terdut",
        19761,
        json!({"dsn": "postgres://terdut@db:5432/terdut",
               "passwordSecretRef": {"name": "db-password", "key": "password"}}),
    );
    servers.create(&PostParams::default(), &s).await.unwrap();
    // A stand-in accepting the key, so the server settles into its resync like a healthy one
    // (nothing then looks at the Secret but the passes this test starts).
    let _standin = common::standin_for(&client, &ns, "terdut", 19761).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let d = eventually("Deployment", WAIT, || async {
        deployments.get_opt("terdut").await.ok().flatten()
    })
    .await;
    let pw = env_of(&d)["PGPASSWORD"].value_from.clone().unwrap();
    assert_eq!(pw.secret_key_ref.unwrap().name, "db-password");
    let before = pod_annotation(&d, DATABASE_SECRET_ANNOTATION).expect("annotated");

    // Converged: passes leave the Deployment alone.
    touch(&servers, "terdut", "1").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let d = deployments.get("terdut").await.unwrap();
    assert_eq!(
        pod_annotation(&d, DATABASE_SECRET_ANNOTATION),
        Some(before.clone())
    );
    let generation = d.metadata.generation.unwrap();

    // The password is rotated: the next pass rolls the pods.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let rotated = json!({"stringData": {"password": "second"}});
    secrets
        .patch(
            "db-password",
            &PatchParams::default(),
            &Patch::Merge(&rotated),
        )
        .await
        .unwrap();
    touch(&servers, "terdut", "2").await;
    let after = eventually("a new database-secret annotation", WAIT, || async {
        let d = deployments.get("terdut").await.ok()?;
        pod_annotation(&d, DATABASE_SECRET_ANNOTATION).filter(|a| *a != before)
    })
    .await;

    // ...once: later passes see the same Secret and change nothing.
    for v in ["3", "4"] {
        touch(&servers, "terdut", v).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let d = deployments.get("terdut").await.unwrap();
    assert_eq!(pod_annotation(&d, DATABASE_SECRET_ANNOTATION), Some(after));
    assert_eq!(
        d.metadata.generation,
        Some(generation + 1),
        "one change of the pod template"
    );
    // The annotation follows the Secret's version, not its value: nothing of the password is
    // in the pod template.
    let template = serde_json::to_string(&d.spec.template).unwrap();
    assert!(!template.contains("second") && !template.contains("first"));
}
