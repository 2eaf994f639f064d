//! Lenient views of the three kinds: only what the plugin shows, every field optional, read
//! from the object's JSON. An object written by an older or newer operator still renders; what
//! is missing shows as `-`.

use k8s_openapi::jiff::Timestamp;
use kube::api::DynamicObject;
use serde::Deserialize;
use serde_json::Value;
use terdut_crds::v1alpha1::conditions::READY;

use crate::kinds::Kind;

/// The annotation the operator's pause honours, on every kind.
pub const PAUSE_ANNOTATION: &str = "terdut.ryuvia.com/paused";

/// One `metav1.Condition`, as far as the plugin reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Cond {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
    pub observed_generation: Option<i64>,
    pub last_transition_time: Option<Timestamp>,
}

/// What every kind has: identity, age, generation and conditions.
#[derive(Clone, Debug, PartialEq)]
pub struct Common {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub created: Option<Timestamp>,
    pub generation: Option<i64>,
    pub observed_generation: Option<i64>,
    pub conditions: Vec<Cond>,
    pub paused: bool,
    pub deleting: bool,
}

impl Common {
    pub fn of(kind: Kind, obj: &DynamicObject) -> Self {
        let m = &obj.metadata;
        let status = obj.data.get("status");
        let paused = m
            .annotations
            .as_ref()
            .and_then(|a| a.get(PAUSE_ANNOTATION))
            .is_some_and(|v| v == "true");
        Common {
            kind,
            namespace: m.namespace.clone().unwrap_or_default(),
            name: m.name.clone().unwrap_or_default(),
            uid: m.uid.clone().unwrap_or_default(),
            created: m.creation_timestamp.as_ref().map(|t| t.0),
            generation: m.generation,
            observed_generation: status
                .and_then(|s| s.get("observedGeneration"))
                .and_then(Value::as_i64),
            conditions: status
                .and_then(|s| s.get("conditions"))
                .and_then(|c| serde_json::from_value(c.clone()).ok())
                .unwrap_or_default(),
            paused,
            deleting: m.deletion_timestamp.is_some(),
        }
    }

    pub fn condition(&self, type_: &str) -> Option<&Cond> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    pub fn ready(&self) -> Option<&Cond> {
        self.condition(READY)
    }

    /// `namespace/name`.
    pub fn key(&self) -> (String, String) {
        (self.namespace.clone(), self.name.clone())
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ServerView {
    pub common: Common,
    /// `spec.allowedTeams.namespaces.from` (the CRD's default `None` when unset).
    pub consent: String,
    pub teams_accepted: Option<u64>,
    pub teams_refused: Option<u64>,
    /// `status.keyFingerprint` when the operator writes one; else filled in from the
    /// Deployment's key-hash annotation by the collector.
    pub key_fingerprint: Option<String>,
    /// `status.url`: where the operator calls the server's API.
    pub url: Option<String>,
    /// `status.availableReplicas`.
    pub available_replicas: Option<i64>,
}

impl ServerView {
    pub fn of(obj: &DynamicObject) -> Self {
        let d = &obj.data;
        let str_at = |ptr: &str| d.pointer(ptr).and_then(Value::as_str).map(str::to_owned);
        ServerView {
            common: Common::of(Kind::Server, obj),
            consent: str_at("/spec/allowedTeams/namespaces/from").unwrap_or_else(|| "None".into()),
            teams_accepted: d.pointer("/status/teams/accepted").and_then(Value::as_u64),
            teams_refused: d.pointer("/status/teams/refused").and_then(Value::as_u64),
            key_fingerprint: str_at("/status/keyFingerprint"),
            url: str_at("/status/url"),
            available_replicas: d
                .pointer("/status/availableReplicas")
                .and_then(Value::as_i64),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct TeamView {
    pub common: Common,
    /// `spec.serverRef`, its namespace defaulted to the team's own (as the operator does).
    pub server: (String, String),
    pub display_name: Option<String>,
    pub team_id: Option<i64>,
}

impl TeamView {
    pub fn of(obj: &DynamicObject) -> Self {
        let common = Common::of(Kind::Team, obj);
        let d = &obj.data;
        let server_ns = d
            .pointer("/spec/serverRef/namespace")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map_or_else(|| common.namespace.clone(), str::to_owned);
        let server_name = d
            .pointer("/spec/serverRef/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        TeamView {
            server: (server_ns, server_name),
            display_name: d
                .pointer("/spec/displayName")
                .and_then(Value::as_str)
                .map(str::to_owned),
            team_id: d.pointer("/status/teamID").and_then(Value::as_i64),
            common,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct SourceView {
    pub common: Common,
    /// `spec.teamRef.name`: a team in the source's own namespace.
    pub team: String,
    pub source_kind: Option<String>,
    pub integration_id: Option<i64>,
    pub webhook_secret: Option<String>,
}

impl SourceView {
    pub fn of(obj: &DynamicObject) -> Self {
        let d = &obj.data;
        let s = |ptr: &str| d.pointer(ptr).and_then(Value::as_str).map(str::to_owned);
        SourceView {
            common: Common::of(Kind::Source, obj),
            team: s("/spec/teamRef/name").unwrap_or_default(),
            source_kind: s("/spec/kind"),
            integration_id: d.pointer("/status/integrationID").and_then(Value::as_i64),
            webhook_secret: s("/status/webhookURLSecretRef/name"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> DynamicObject {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_bare_object_renders_with_defaults() {
        let s = ServerView::of(&obj(serde_json::json!({
            "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutServer",
            "metadata": {"name": "a", "namespace": "n"}
        })));
        assert_eq!(s.consent, "None");
        assert_eq!(s.common.ready(), None);
        assert_eq!(s.teams_accepted, None);
    }

    #[test]
    fn team_server_namespace_defaults_to_its_own() {
        let t = TeamView::of(&obj(serde_json::json!({
            "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutTeam",
            "metadata": {"name": "t", "namespace": "n", "annotations": {PAUSE_ANNOTATION: "true"}},
            "spec": {"serverRef": {"name": "s"}},
            "status": {"teamID": 7, "conditions": [
                {"type": "Ready", "status": "False", "reason": "UnknownUser", "message": "m",
                 "lastTransitionTime": "2026-11-29T10:00:00Z", "future": 1}]}
        })));
        assert_eq!(t.server, ("n".into(), "s".into()));
        assert_eq!(t.team_id, Some(7));
        assert!(t.common.paused);
        assert_eq!(t.common.ready().unwrap().reason, "UnknownUser");
    }
}
