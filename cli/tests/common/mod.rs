//! Fixtures: the objects and Events an operator would have written, made with terdut-crds'
//! own types (so a renamed status field breaks these tests, not a user), statuses through the
//! status subresource as the operator writes them.

#![allow(dead_code)]

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ObjectReference, Secret};
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, MicroTime, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource, ResourceExt as _};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use terdut_crds::v1alpha1::{
    TerdutAlertSource, TerdutAlertSourceStatus, TerdutServer, TerdutServerStatus, TerdutTeam,
    TerdutTeamStatus,
};

pub fn cond(type_: &str, status: bool, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: if status { "True" } else { "False" }.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: Some(1),
        last_transition_time: Time(Timestamp::now()),
    }
}

/// Creates `obj` (a typed CR from JSON) and writes its status.
async fn create_with_status<K, S>(client: &Client, ns: &str, obj: Value, status: S) -> K
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + Serialize
        + DeserializeOwned,
    S: Serialize,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let typed: K = serde_json::from_value(obj).expect("a valid object");
    let created = api
        .create(&PostParams::default(), &typed)
        .await
        .expect("created");
    api.patch_status(
        &created.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .expect("status written")
}

pub async fn server(
    client: &Client,
    ns: &str,
    name: &str,
    spec_extra: Value,
    status: TerdutServerStatus,
) -> TerdutServer {
    let mut spec = json!({
        "image": {"tag": "v0.9.3"},
        "networking": {"hostname": "terdut.example.com"},
        "database": {"dsn": "postgres://terdut@db:5432/terdut"},
    });
    merge(&mut spec, spec_extra);
    let obj = json!({
        "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutServer",
        "metadata": {"name": name, "namespace": ns}, "spec": spec,
    });
    create_with_status(client, ns, obj, status).await
}

pub async fn team(
    client: &Client,
    ns: &str,
    name: &str,
    server: (&str, &str),
    annotations: BTreeMap<String, String>,
    status: TerdutTeamStatus,
) -> TerdutTeam {
    let obj = json!({
        "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutTeam",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations},
        "spec": {
            "serverRef": {"namespace": server.0, "name": server.1},
            "displayName": capitalised(name),
        },
    });
    create_with_status(client, ns, obj, status).await
}

pub async fn source(
    client: &Client,
    ns: &str,
    name: &str,
    team: &str,
    kind: &str,
    status: TerdutAlertSourceStatus,
) -> TerdutAlertSource {
    let obj = json!({
        "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutAlertSource",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"teamRef": {"name": team}, "kind": kind, "name": name},
    });
    create_with_status(client, ns, obj, status).await
}

fn controller_ref(server: &TerdutServer) -> OwnerReference {
    OwnerReference {
        api_version: "terdut.ryuvia.com/v1alpha1".into(),
        kind: "TerdutServer".into(),
        name: server.name_any(),
        uid: server.uid().expect("uid"),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The server's Deployment as the operator makes it, as far as the plugin reads it: same name,
/// controlled by the server, the key-hash annotation on the pod template.
pub async fn deployment(client: &Client, server: &TerdutServer, key_hash: &str) {
    let name = server.name_any();
    let ns = server.namespace().expect("namespaced");
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns, "ownerReferences": [controller_ref(server)]},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app.kubernetes.io/instance": name}},
            "template": {
                "metadata": {
                    "labels": {"app.kubernetes.io/instance": name},
                    "annotations": {"terdut.ryuvia.com/operator-key-hash": key_hash},
                },
                "spec": {"containers": [{"name": "terdut-server", "image": "terdut-server:v0.9.3"}]},
            },
        },
    }))
    .expect("deployment");
    Api::<Deployment>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &d)
        .await
        .expect("deployment created");
}

/// The key Secret `<server>-operator-key`, controlled by `owner` (None: a foreign Secret).
pub async fn key_secret(
    client: &Client,
    ns: &str,
    server: &str,
    owner: Option<&TerdutServer>,
    key: &str,
) {
    let s: Secret = serde_json::from_value(json!({
        "metadata": {
            "name": format!("{server}-operator-key"), "namespace": ns,
            "ownerReferences": owner.map(controller_ref).into_iter().collect::<Vec<_>>(),
        },
        "stringData": {"token": key},
    }))
    .expect("secret");
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &s)
        .await
        .expect("secret created");
}

/// An Event about `regarding` as the operator publishes it (events.k8s.io/v1), `count`
/// occurrences folded into one series.
pub async fn event<K: Resource<DynamicType = ()>>(
    client: &Client,
    regarding: &K,
    type_: &str,
    reason: &str,
    action: &str,
    note: &str,
    count: i32,
) {
    let ns = regarding.namespace().expect("namespaced");
    let now = MicroTime(Timestamp::now());
    let e = Event {
        metadata: kube::api::ObjectMeta {
            generate_name: Some(format!("{}-", regarding.name_any())),
            namespace: Some(ns.clone()),
            ..Default::default()
        },
        event_time: Some(now.clone()),
        reporting_controller: Some("terdut-operator".into()),
        reporting_instance: Some("terdut-operator-0".into()),
        action: Some(action.into()),
        reason: Some(reason.into()),
        type_: Some(type_.into()),
        note: Some(note.into()),
        regarding: Some(ObjectReference {
            api_version: Some(K::api_version(&()).into_owned()),
            kind: Some(K::kind(&()).into_owned()),
            name: Some(regarding.name_any()),
            namespace: Some(ns.clone()),
            uid: regarding.uid(),
            ..Default::default()
        }),
        series: (count > 1).then(|| EventSeries {
            count,
            last_observed_time: now.clone(),
        }),
        ..Default::default()
    };
    Api::<Event>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &e)
        .await
        .expect("event created");
}

fn merge(a: &mut Value, b: Value) {
    if let (Some(a), Value::Object(b)) = (a.as_object_mut(), b) {
        for (k, v) in b {
            a.insert(k, v);
        }
    }
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

pub fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
