//! Helpers of the TerdutTeam tests (team_actor.rs, team_consent.rs, team_delete.rs,
//! team_steady.rs): building teams, waiting for a Ready reason, reading Events, forcing a pass,
//! and a client of the stand-in with the operator's own key (to change things behind the
//! operator's back).

#![allow(dead_code)]

use std::time::Duration;

use k8s_openapi::api::events::v1::Event as K8sEvent;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use terdut_actors::api::{ClientConfig, OperatorKey, TerdutClient};
use terdut_actors::key::ObjectKey;
use terdut_actors::routing::ChildKind;
use terdut_crds::v1alpha1::TerdutTeam;
use terdut_crds::v1alpha1::conditions::{self, READY};
use terdut_standin::admin::types::AdminTeam;

use super::common::{TestOperator, eventually};

pub const WAIT: Duration = Duration::from_secs(30);

/// A TerdutTeam `name` on server `server` (`{"name": .., "namespace": ..}`), display name
/// `display`, with `extra` merged into its spec.
pub fn team(
    name: &str,
    server: serde_json::Value,
    display: &str,
    extra: serde_json::Value,
) -> TerdutTeam {
    let mut spec = json!({"serverRef": server, "displayName": display});
    for (k, v) in extra.as_object().expect("extra is an object") {
        spec[k] = v.clone();
    }
    serde_json::from_value(json!({
        "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutTeam",
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap()
}

/// The spec of the design's example (docs/design.md §4.2), with `alice` on the ladder.
pub fn full_spec() -> serde_json::Value {
    json!({
        "oidc": {"memberGroup": "platform-members", "ownerGroup": "platform-owners"},
        "escalation": {"repeatCount": 2, "fallbackTopic": "platform-oncall", "levels": [
            {"timeout": "5m", "targets": [{"kind": "oncall"}, {"kind": "user", "username": "alice"}]},
            {"timeout": "15m", "targets": [{"kind": "oncall"}]}]},
        "deadmanSwitches": [
            {"name": "watchdog", "matcher": "alertname=Watchdog,cluster=prod", "timeout": "15m", "severity": "critical"}],
    })
}

pub async fn create(api: &Api<TerdutTeam>, t: &TerdutTeam) {
    api.create(&PostParams::default(), t).await.unwrap();
}

/// Merge-patches the team's spec.
pub async fn patch_spec(api: &Api<TerdutTeam>, name: &str, spec: serde_json::Value) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": spec})),
    )
    .await
    .unwrap();
}

/// `(status, reason, message)` of Ready, if any.
pub fn ready(t: &TerdutTeam) -> Option<(String, String, String)> {
    let s = t.status.as_ref()?;
    conditions::find(&s.conditions, READY)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Waits until Ready has `reason` at the object's current generation; returns the object.
pub async fn wait_reason(api: &Api<TerdutTeam>, name: &str, reason: &str) -> TerdutTeam {
    wait_reason_for(api, name, reason, WAIT).await
}

pub async fn wait_reason_for(
    api: &Api<TerdutTeam>,
    name: &str,
    reason: &str,
    limit: Duration,
) -> TerdutTeam {
    let what = format!("TerdutTeam {name} to be {reason}");
    let mut last = None;
    let found = tokio::time::timeout(limit, async {
        loop {
            let t = api.get(name).await.unwrap();
            let at_gen =
                t.status.as_ref().and_then(|s| s.observed_generation) == t.metadata.generation;
            if at_gen && ready(&t).is_some_and(|(_, r, _)| r == reason) {
                return t;
            }
            last = ready(&t);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    match found {
        Ok(t) => t,
        Err(_) => panic!("timed out after {limit:?} waiting for {what}; last Ready: {last:?}"),
    }
}

pub fn team_id(t: &TerdutTeam) -> i64 {
    t.status
        .as_ref()
        .and_then(|s| s.team_id)
        .expect("status.teamID")
}

/// Events about the object `name` in `ns`: (type, reason, note).
pub async fn events(client: &kube::Client, ns: &str, name: &str) -> Vec<(String, String, String)> {
    Api::<K8sEvent>::namespaced(client.clone(), ns)
        .list(&Default::default())
        .await
        .unwrap()
        .items
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

/// Waits for an Event with `reason` about `name`; returns its note.
pub async fn wait_event(client: &kube::Client, ns: &str, name: &str, reason: &str) -> String {
    eventually(&format!("a {reason} Event on {name}"), WAIT, || async {
        events(client, ns, name)
            .await
            .into_iter()
            .find(|(_, r, _)| r == reason)
            .map(|(_, _, note)| note)
    })
    .await
}

/// Makes the team's actor run a pass now (as its resync timer would), under whichever host
/// it lives.
pub async fn resync(op: &TestOperator, ns: &str, name: &str) {
    let key = ObjectKey::new(ns, name);
    let host = op
        .tree
        .host_of(ChildKind::Team, &key)
        .await
        .expect("the team is known to the operator");
    host.resync(ChildKind::Team, key);
}

/// A client of the stand-in with the operator's key: changes made with it are changes "behind
/// the operator's back".
pub fn server_client(standin: &terdut_standin::Handle) -> TerdutClient {
    TerdutClient::new(ClientConfig::new(
        standin.base_url(),
        OperatorKey::new(standin.operator_key()),
    ))
    .unwrap()
}

/// The team the stand-in holds for `external_id`, if any.
pub async fn on_server(standin: &terdut_standin::Handle, external_id: &str) -> Option<AdminTeam> {
    standin
        .admin()
        .state()
        .await
        .unwrap()
        .team_by_external_id(external_id)
        .cloned()
}

/// How many teams the stand-in holds with this `external_id`.
pub async fn count_on_server(standin: &terdut_standin::Handle, external_id: &str) -> usize {
    standin
        .admin()
        .state()
        .await
        .unwrap()
        .teams
        .iter()
        .filter(|t| t.external_id == external_id)
        .count()
}

/// Merge-patches a TerdutServer's `spec.allowedTeams.namespaces`.
pub async fn allow(client: &kube::Client, ns: &str, server: &str, namespaces: serde_json::Value) {
    let api: Api<terdut_crds::v1alpha1::TerdutServer> = Api::namespaced(client.clone(), ns);
    api.patch(
        server,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"allowedTeams": {"namespaces": namespaces}}})),
    )
    .await
    .unwrap();
}
