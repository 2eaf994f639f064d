//! The TerdutServer actor against a real kube-apiserver with kube-controller-manager (GC):
//! the objects it makes, key rotation, PDB lifecycle, garbage collection, isolation of a
//! crashing actor (the no-op resync has a binary of its own: server_steady.rs).

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{eventually, setup};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use terdut_actors::key::ObjectKey;
use terdut_actors::server::TEST_FAULT_ANNOTATION;
use terdut_actors::supervisor::{ChildStatus, snapshot};
use terdut_crds::v1alpha1::TerdutServer;

const WAIT: Duration = Duration::from_secs(30);

fn server(name: &str, port: i32, extra: serde_json::Value) -> TerdutServer {
    let mut spec = json!({
        "image": {"repository": "example.test/terdut-server", "tag": "v0.9.3"},
        "networking": {"hostname": "terdut.example.com", "servicePort": port},
        "database": {"dsn": "postgres://terdut@db:5432/terdut", "passwordSecretRef": {"name": "db", "key": "password"}},
        "pod": {"disruptionBudget": {"minAvailable": 1}},
    });
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            s.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(json!({
        "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutServer",
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap()
}

/// [`setup`], with the Secret `db` that the servers' `passwordSecretRef` names (a missing one
/// holds the Deployment back: tests/bad_input.rs).
async fn setup_with_db(
    prefix: &str,
) -> (
    &'static terdut_testenv::ControlPlane,
    kube::Client,
    String,
    &'static common::TestOperator,
) {
    let (cp, client, ns, op) = setup(prefix).await;
    common::create_secret(&client, &ns, "db", &[("password", "not-a-real-password")]).await;
    (cp, client, ns, op)
}

async fn get_opt<K>(api: &Api<K>, name: &str) -> Option<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.unwrap()
}

fn token(s: &Secret) -> String {
    String::from_utf8(s.data.as_ref().unwrap()["token"].0.clone()).unwrap()
}

fn key_hash(d: &Deployment) -> String {
    d.spec
        .template
        .metadata
        .as_ref()
        .unwrap()
        .annotations
        .as_ref()
        .unwrap()["terdut.ryuvia.com/operator-key-hash"]
        .clone()
}

#[tokio::test]
async fn server_gets_key_deployment_service_and_pdb() {
    let (_, client, ns, _) = setup_with_db("srv").await;
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    servers
        .create(&PostParams::default(), &server("terdut", 18080, json!({})))
        .await
        .unwrap();

    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let secret = eventually("key Secret", WAIT, || {
        get_opt(&secrets, "terdut-operator-key")
    })
    .await;
    let t = token(&secret);
    assert!(
        t.starts_with("tdsa_")
            && t.len() == 53
            && t[5..]
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()),
        "bad key format"
    );
    let owner = &secret.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("TerdutServer", "terdut", Some(true))
    );

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let d = eventually("Deployment", WAIT, || get_opt(&deployments, "terdut")).await;
    let spec = &d.spec;
    assert_eq!(spec.replicas, Some(2));
    let c = &spec.template.spec.as_ref().unwrap().containers[0];
    assert_eq!(
        c.image.as_deref(),
        Some("example.test/terdut-server:v0.9.3")
    );
    let env: BTreeMap<_, _> = c
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.clone(), e.clone()))
        .collect();
    assert_eq!(env["TERDUT_LISTEN_ADDR"].value.as_deref(), Some(":18080"));
    assert_eq!(
        env["TERDUT_PUBLIC_URL"].value.as_deref(),
        Some("https://terdut.example.com")
    );
    assert_eq!(
        env["TERDUT_DATABASE_DSN"].value.as_deref(),
        Some("postgres://terdut@db:5432/terdut")
    );
    let by_ref = |n: &str| {
        let e = &env[n];
        assert!(e.value.is_none(), "{n} must never be inlined");
        let r = e
            .value_from
            .as_ref()
            .unwrap()
            .secret_key_ref
            .as_ref()
            .unwrap();
        (r.name.clone(), r.key.clone())
    };
    assert_eq!(
        by_ref("TERDUT_OPERATOR_KEY"),
        ("terdut-operator-key".into(), "token".into())
    );
    assert_eq!(by_ref("PGPASSWORD"), ("db".into(), "password".into()));
    let pod_text = serde_json::to_string(&d).unwrap();
    assert!(
        !pod_text.contains(&t),
        "the key must not appear in the Deployment"
    );
    assert_eq!(key_hash(&d).len(), 16);

    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let svc = eventually("Service", WAIT, || get_opt(&services, "terdut")).await;
    let s = svc.spec.unwrap();
    assert_eq!(s.type_.as_deref(), Some("ClusterIP"));
    assert_eq!(s.ports.unwrap()[0].port, 18080);

    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &ns);
    let pdb = eventually("PDB", WAIT, || get_opt(&pdbs, "terdut")).await;
    assert_eq!(
        pdb.spec.unwrap().min_available,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1))
    );

    let st = eventually("status", WAIT, || async {
        let s = servers.get("terdut").await.ok()?.status?;
        s.credentials_secret_ref.is_some().then_some(s)
    })
    .await;
    assert_eq!(
        st.credentials_secret_ref.unwrap().name,
        "terdut-operator-key"
    );
    assert_eq!(st.observed_generation, Some(1));
    let ready = &st.conditions[0];
    // No kubelet here: the Deployment never gets an available pod.
    assert_eq!(
        (ready.type_.as_str(), ready.status.as_str()),
        ("Ready", "False")
    );
    assert!(!ready.reason.is_empty() && !ready.message.is_empty());
}

#[tokio::test]
async fn deleting_the_key_secret_makes_a_new_key_and_rolls_the_pods() {
    let (_, client, ns, _) = setup_with_db("rotate").await;
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    servers
        .create(&PostParams::default(), &server("terdut", 18081, json!({})))
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let old = eventually("key Secret", WAIT, || {
        get_opt(&secrets, "terdut-operator-key")
    })
    .await;
    let old_hash =
        key_hash(&eventually("Deployment", WAIT, || get_opt(&deployments, "terdut")).await);

    secrets
        .delete("terdut-operator-key", &DeleteParams::default())
        .await
        .unwrap();
    let new = eventually("a new key Secret", WAIT, || async {
        get_opt(&secrets, "terdut-operator-key")
            .await
            .filter(|s| s.metadata.uid != old.metadata.uid)
    })
    .await;
    assert_ne!(token(&new), token(&old));
    let new_hash = eventually("the Deployment to roll", WAIT, || async {
        let h = key_hash(&get_opt(&deployments, "terdut").await?);
        (h != old_hash).then_some(h)
    })
    .await;
    assert_eq!(new_hash.len(), 16);
}

#[tokio::test]
async fn clearing_the_disruption_budget_deletes_the_pdb() {
    let (_, client, ns, _) = setup_with_db("pdb").await;
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    servers
        .create(&PostParams::default(), &server("terdut", 18082, json!({})))
        .await
        .unwrap();
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &ns);
    eventually("PDB", WAIT, || get_opt(&pdbs, "terdut")).await;
    let patch = json!({"spec": {"pod": {"disruptionBudget": null}}});
    servers
        .patch("terdut", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually("PDB deleted", WAIT, || async {
        get_opt(&pdbs, "terdut").await.is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn deleting_the_server_garbage_collects_everything() {
    let (_, client, ns, _) = setup_with_db("gc").await;
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    servers
        .create(&PostParams::default(), &server("terdut", 18083, json!({})))
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &ns);
    eventually("PDB", WAIT, || get_opt(&pdbs, "terdut")).await;
    eventually("Deployment", WAIT, || get_opt(&deployments, "terdut")).await;
    servers
        .delete("terdut", &DeleteParams::foreground())
        .await
        .unwrap();
    eventually("everything collected", Duration::from_secs(60), || async {
        let gone = get_opt(&secrets, "terdut-operator-key").await.is_none()
            && get_opt(&deployments, "terdut").await.is_none()
            && get_opt(&services, "terdut").await.is_none()
            && get_opt(&pdbs, "terdut").await.is_none()
            && get_opt(&servers, "terdut").await.is_none();
        gone.then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_crashing_actor_restarts_alone_with_growing_delays() {
    let (_, client, ns, op) = setup_with_db("crash").await;
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    servers
        .create(&PostParams::default(), &server("good", 18084, json!({})))
        .await
        .unwrap();
    let mut bad = server("bad", 18085, json!({}));
    bad.metadata.annotations = Some(BTreeMap::from([(
        TEST_FAULT_ANNOTATION.to_owned(),
        "panic".to_owned(),
    )]));
    servers.create(&PostParams::default(), &bad).await.unwrap();

    let bad_key = ObjectKey::new(ns.clone(), "bad");
    let good_key = ObjectKey::new(ns.clone(), "good");
    // Sample the supervisor until the bad actor is parked; record each backoff it announces.
    let mut delays = vec![];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let parked = loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the bad actor was never parked; delays {delays:?}"
        );
        let snap = snapshot(&op.servers(), Duration::from_secs(5))
            .await
            .unwrap();
        if let Some(child) = snap.children.get(&bad_key) {
            match &child.status {
                ChildStatus::BackingOff { delay, .. } if delays.last() != Some(delay) => {
                    delays.push(*delay)
                }
                ChildStatus::CrashLooping { .. } => break child.restarts,
                _ => {}
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    eprintln!("restart delays observed: {delays:?}; restarts before parking: {parked}");
    assert!(
        delays.len() >= 3,
        "expected several backoffs, saw {delays:?}"
    );
    assert!(
        delays.windows(2).all(|w| w[1] > w[0]),
        "delays must grow: {delays:?}"
    );

    // The good server converged meanwhile, and its actor never restarted.
    let snap = snapshot(&op.servers(), Duration::from_secs(5))
        .await
        .unwrap();
    let good = &snap.children[&good_key];
    assert_eq!(good.restarts, 0);
    assert!(matches!(good.status, ChildStatus::Running));
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    eventually("good Deployment", WAIT, || get_opt(&deployments, "good")).await;

    // The parked server says so on its CR.
    let cond = eventually("CrashLooping condition", WAIT, || async {
        let st = servers.get("bad").await.ok()?.status?;
        st.conditions
            .into_iter()
            .find(|c| c.reason == "CrashLooping")
    })
    .await;
    assert!(cond.message.contains("injected fault"), "{}", cond.message);

    // Fixing the object (removing the fault) resets and restarts it.
    let patch = json!({"metadata": {"annotations": {TEST_FAULT_ANNOTATION: null}}});
    servers
        .patch("bad", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually("bad Deployment after the fix", WAIT, || {
        get_opt(&deployments, "bad")
    })
    .await;
}
