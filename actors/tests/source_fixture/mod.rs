//! What the TerdutAlertSource tests share: a Ready team (set up by hand until the TerdutTeam
//! actor reports it, or by that actor), sources, their webhook Secrets, Events and the
//! stand-in's view of the integrations.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use terdut_actors::api::{ClientConfig, Id, OperatorKey, TerdutClient};
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutTeam};
use terdut_standin::admin::types::AdminIntegration;

use crate::common::eventually;

pub const WAIT: Duration = Duration::from_secs(30);

/// A client of the stand-in with the operator's key (the tests' own, not the operator's).
pub fn api_client(standin: &terdut_standin::Handle) -> TerdutClient {
    TerdutClient::new(ClientConfig::new(
        standin.base_url(),
        OperatorKey::new(standin.operator_key()),
    ))
    .unwrap()
}

pub fn team(name: &str, server: &str) -> TerdutTeam {
    serde_json::from_value(json!({
        "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutTeam",
        "metadata": {"name": name},
        "spec": {"serverRef": {"name": server}, "displayName": format!("Team {name}")},
    }))
    .unwrap()
}

/// Creates the TerdutTeam `name` on server `server`.
pub async fn create_team(client: &kube::Client, ns: &str, name: &str, server: &str) {
    let teams: Api<TerdutTeam> = Api::namespaced(client.clone(), ns);
    teams
        .create(&PostParams::default(), &team(name, server))
        .await
        .unwrap();
}

/// Makes the team Ready the way the TerdutTeam actor would: the team on the server (found by
/// its `external_id` if the actor made it already) and `Ready=True` with its `teamID`. A team
/// the test made is not one the TerdutTeam made, so the object is annotated to adopt it (ADR
/// 0013), as a user hands an existing team to a TerdutTeam: the team actor then takes it over
/// (or already owns it, when its own create came first) and keeps it Ready.
pub async fn make_team_ready(
    client: &kube::Client,
    ns: &str,
    name: &str,
    standin: &terdut_standin::Handle,
) -> Id {
    let created = api_client(standin)
        .create_team(&format!("Team {name}"), &format!("{ns}/{name}"))
        .await
        .unwrap();
    let id = created.team().id;
    let teams: Api<TerdutTeam> = Api::namespaced(client.clone(), ns);
    teams
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                "terdut.ryuvia.com/adopt": id.to_string()}}})),
        )
        .await
        .unwrap();
    let status = json!({"status": {
        "conditions": [{
            "type": "Ready", "status": "True", "reason": "Ready",
            "message": "set by the test", "lastTransitionTime": "2026-01-01T00:00:00Z",
        }],
        "teamID": id,
    }});
    teams
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    id
}

/// Waits until the TerdutTeam actor reports `name` Ready with a `teamID`; returns the id.
pub async fn wait_team_ready(api: &Api<TerdutTeam>, name: &str) -> Id {
    eventually(&format!("team {name} Ready"), WAIT, || async {
        let s = api.get(name).await.ok()?.status?;
        let ready = s
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        ready.then_some(s.team_id?)
    })
    .await
}

/// A TerdutServer with the stand-in behind it and a Ready team `team` on it.
pub async fn server_and_team(
    client: &kube::Client,
    ns: &str,
    port: u16,
    team: &str,
) -> (terdut_standin::Handle, Id) {
    let standin = crate::common::server_with_standin(client, ns, "terdut", port).await;
    create_team(client, ns, team, "terdut").await;
    let id = make_team_ready(client, ns, team, &standin).await;
    (standin, id)
}

pub fn source(name: &str, team: &str, kind: &str, display: &str) -> TerdutAlertSource {
    serde_json::from_value(json!({
        "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutAlertSource",
        "metadata": {"name": name},
        "spec": {"teamRef": {"name": team}, "kind": kind, "name": display},
    }))
    .unwrap()
}

pub fn sources(client: &kube::Client, ns: &str) -> Api<TerdutAlertSource> {
    Api::namespaced(client.clone(), ns)
}

/// Patches `metadata.annotations` (a `null` value removes one).
pub async fn annotate(client: &kube::Client, ns: &str, name: &str, annotations: serde_json::Value) {
    sources(client, ns)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"annotations": annotations}})),
        )
        .await
        .unwrap();
}

/// Makes the operator reconcile `name` now (what the 5-minute resync would do later).
pub async fn nudge(client: &kube::Client, ns: &str, name: &str) {
    let stamp = format!("{:?}", std::time::SystemTime::now());
    annotate(
        client,
        ns,
        name,
        json!({"test.terdut.ryuvia.com/nudge": stamp}),
    )
    .await;
}

pub async fn patch_spec(client: &kube::Client, ns: &str, name: &str, spec: serde_json::Value) {
    sources(client, ns)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "spec": spec })),
        )
        .await
        .unwrap();
}

/// The Ready condition's (status, reason, message), once there is one.
pub async fn ready(
    client: &kube::Client,
    ns: &str,
    name: &str,
) -> Option<(String, String, String)> {
    let s = sources(client, ns).get_opt(name).await.ok()??;
    let c = s
        .status?
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Ready")?;
    Some((c.status, c.reason, c.message))
}

/// Waits until Ready has `reason`; returns the object.
pub async fn wait_reason(
    client: &kube::Client,
    ns: &str,
    name: &str,
    reason: &str,
) -> TerdutAlertSource {
    let what = format!("{name} to report {reason}");
    eventually(&what, WAIT, || async {
        let (_, r, _) = ready(client, ns, name).await?;
        if r != reason {
            return None;
        }
        sources(client, ns).get_opt(name).await.ok()?
    })
    .await
}

/// Waits until Ready=True naming an integration other than `not`; returns its id.
pub async fn wait_ready_id(client: &kube::Client, ns: &str, name: &str, not: Option<Id>) -> Id {
    eventually("Ready with a (new) integration", WAIT, || async {
        let s = sources(client, ns).get_opt(name).await.ok()??;
        let st = s.status?;
        let ready = st
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        let id = st.integration_id?;
        (ready && Some(id) != not && st.webhook_url_secret_ref.is_some()).then_some(id)
    })
    .await
}

/// The webhook Secret's url, key and recorded integration id.
#[derive(Clone, Debug)]
pub struct Webhook {
    pub url: String,
    pub key: String,
    pub integration_id: Option<Id>,
    pub secret: Secret,
}

impl Webhook {
    /// The secret token in the url: its last path segment.
    pub fn token(&self) -> String {
        self.url.rsplit('/').next().unwrap_or_default().to_owned()
    }
}

pub async fn webhook(client: &kube::Client, ns: &str, name: &str) -> Option<Webhook> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let secret = secrets
        .get_opt(&format!("{name}-terdut-webhook"))
        .await
        .ok()??;
    let data = secret.data.clone()?;
    let text = |k: &str| data.get(k).map(|v| String::from_utf8(v.0.clone()).unwrap());
    Some(Webhook {
        url: text("url")?,
        key: text("key")?,
        integration_id: secret
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("terdut.ryuvia.com/integration-id"))
            .and_then(|v| v.parse().ok()),
        secret,
    })
}

/// Waits for the webhook Secret to hold the key of integration `id`.
pub async fn wait_webhook(client: &kube::Client, ns: &str, name: &str, id: Id) -> Webhook {
    eventually("the webhook Secret of the integration", WAIT, || async {
        webhook(client, ns, name)
            .await
            .filter(|w| w.integration_id == Some(id))
    })
    .await
}

/// Whether the stand-in says `key` is live, and for which integration.
pub async fn key_live(standin: &terdut_standin::Handle, key: &str) -> (bool, Option<Id>) {
    let check = standin.admin().key_check(key).await.unwrap();
    (check.live, check.integration_id)
}

/// The integrations the stand-in holds for `external_id`, over all teams.
pub async fn integrations_for(
    standin: &terdut_standin::Handle,
    external_id: &str,
) -> Vec<AdminIntegration> {
    let state = standin.admin().state().await.unwrap();
    state
        .teams
        .into_iter()
        .flat_map(|t| t.integrations)
        .filter(|i| i.external_id == external_id)
        .collect()
}

/// Events about `name` in `ns` as (type, reason, note).
pub async fn events_of(
    client: &kube::Client,
    ns: &str,
    name: &str,
) -> Vec<(String, String, String)> {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    let list = api.list(&ListParams::default()).await.unwrap();
    list.items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .map(|e| {
            (
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.note.unwrap_or_default(),
            )
        })
        .collect()
}

/// Waits for an Event about `name` with `reason`; returns its note.
pub async fn wait_event(
    client: &kube::Client,
    ns: &str,
    name: &str,
    type_: &str,
    reason: &str,
) -> String {
    let what = format!("a {type_} Event {reason} about {name}");
    eventually(&what, WAIT, || async {
        events_of(client, ns, name)
            .await
            .into_iter()
            .find(|(t, r, _)| t == type_ && r == reason)
            .map(|(_, _, n)| n)
    })
    .await
}

pub fn labels(secret: &Secret) -> BTreeMap<String, String> {
    secret.metadata.labels.clone().unwrap_or_default()
}
