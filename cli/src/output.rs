//! `kubectl terdut status -o json|yaml`: the tree as data, for scripts. Pure: a [`Tree`] in, a
//! JSON value out, the same fields the table shows (kind, namespace, name, Ready's status,
//! reason and message, ids, the key fingerprint, the consent mode, the flags) plus the
//! creation time instead of an age. Strings are written as the objects hold them: JSON and
//! YAML escape control characters themselves, so a tenant-written reason cannot reach the
//! terminal as an escape sequence through this format.

use serde_json::{Value, json};
use terdut_crds::v1alpha1::server::key_accepted;

use crate::tree::{ServerNode, TeamNode, Tree};
use crate::view::{Common, ServerView, SourceView, TeamView};

/// `-o` of `status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Json,
    Yaml,
}

/// The tree as text in `format`, ending with a newline.
pub fn render(tree: &Tree, format: Format) -> anyhow::Result<String> {
    let value = to_value(tree);
    let mut text = match format {
        Format::Json => serde_json::to_string_pretty(&value)?,
        Format::Yaml => serde_yaml_ng::to_string(&value)?,
    };
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}

/// `{"servers": [...], "sourcesWithoutTeam": [...], "summary": {...}}`: every server with its
/// teams and their sources nested, a server that could not be read as `found: false`.
pub fn to_value(tree: &Tree) -> Value {
    let mut summary = Summary::default();
    let servers: Vec<Value> = tree
        .servers
        .iter()
        .map(|n| server(n, &mut summary))
        .collect();
    let lost: Vec<Value> = tree
        .lost_sources
        .iter()
        .map(|((ns, team), sources)| {
            json!({
                "namespace": ns,
                "team": team,
                "found": false,
                "sources": sources.iter().map(|s| source(s, &mut summary)).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "apiVersion": "terdut.ryuvia.com/v1alpha1",
        "kind": "StatusTree",
        "servers": servers,
        "sourcesWithoutTeam": lost,
        "summary": {
            "servers": summary.servers,
            "teams": summary.teams,
            "alertSources": summary.sources,
            "notReady": summary.not_ready,
        },
    })
}

#[derive(Default)]
struct Summary {
    servers: u64,
    teams: u64,
    sources: u64,
    not_ready: u64,
}

impl Summary {
    fn add(&mut self, c: &Common) {
        match c.kind {
            crate::kinds::Kind::Server => self.servers += 1,
            crate::kinds::Kind::Team => self.teams += 1,
            crate::kinds::Kind::Source => self.sources += 1,
        }
        if c.ready().is_none_or(|r| r.status != "True") {
            self.not_ready += 1;
        }
    }
}

fn common(c: &Common) -> serde_json::Map<String, Value> {
    let ready = c.ready();
    let mut m = serde_json::Map::new();
    m.insert("namespace".into(), json!(c.namespace));
    m.insert("name".into(), json!(c.name));
    m.insert("found".into(), json!(true));
    m.insert(
        "ready".into(),
        json!(
            ready
                .map(|r| r.status.clone())
                .unwrap_or_else(|| "Unknown".into())
        ),
    );
    m.insert("reason".into(), json!(ready.map(|r| r.reason.clone())));
    m.insert("message".into(), json!(ready.map(|r| r.message.clone())));
    m.insert(
        "creationTimestamp".into(),
        json!(c.created.map(|t| t.to_string())),
    );
    m.insert("paused".into(), json!(c.paused));
    m.insert("deleting".into(), json!(c.deleting));
    // A spec change the operator has not reconciled yet.
    m.insert(
        "generationObserved".into(),
        json!(match (c.generation, c.observed_generation) {
            (Some(g), Some(o)) => o >= g,
            _ => false,
        }),
    );
    m
}

fn server(n: &ServerNode, summary: &mut Summary) -> Value {
    let (ns, name) = &n.key;
    let mut m = match &n.server {
        Some(s) => {
            summary.add(&s.common);
            server_fields(s)
        }
        None => {
            let mut m = serde_json::Map::new();
            m.insert("namespace".into(), json!(ns));
            m.insert("name".into(), json!(name));
            m.insert("found".into(), json!(false));
            m
        }
    };
    m.insert(
        "teams".into(),
        Value::Array(n.teams.iter().map(|t| team(t, summary)).collect()),
    );
    Value::Object(m)
}

fn server_fields(s: &ServerView) -> serde_json::Map<String, Value> {
    let mut m = common(&s.common);
    m.insert("keyFingerprint".into(), json!(s.key_fingerprint));
    m.insert(
        "keyAccepted".into(),
        json!(
            s.common
                .condition(key_accepted::TYPE)
                .map(|c| c.reason.clone())
        ),
    );
    m.insert("consent".into(), json!(s.consent));
    m.insert("teamsAccepted".into(), json!(s.teams_accepted));
    m.insert("teamsRefused".into(), json!(s.teams_refused));
    m.insert("url".into(), json!(s.url));
    m.insert("availableReplicas".into(), json!(s.available_replicas));
    m
}

fn team(n: &TeamNode, summary: &mut Summary) -> Value {
    let t: &TeamView = &n.team;
    summary.add(&t.common);
    let mut m = common(&t.common);
    m.insert("displayName".into(), json!(t.display_name));
    m.insert("teamID".into(), json!(t.team_id));
    m.insert(
        "alertSources".into(),
        Value::Array(n.sources.iter().map(|s| source(s, summary)).collect()),
    );
    Value::Object(m)
}

fn source(s: &SourceView, summary: &mut Summary) -> Value {
    summary.add(&s.common);
    let mut m = common(&s.common);
    m.insert("sourceKind".into(), json!(s.source_kind));
    m.insert("integrationID".into(), json!(s.integration_id));
    m.insert("webhookSecret".into(), json!(s.webhook_secret));
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::Inventory;
    use kube::api::DynamicObject;

    fn obj(v: Value) -> DynamicObject {
        serde_json::from_value(v).unwrap()
    }

    fn inventory() -> Inventory {
        let ready = |status: &str, reason: &str| {
            json!({"conditions": [{"type": "Ready", "status": status, "reason": reason,
                "message": "m\u{1b}[31m", "lastTransitionTime": "2026-11-29T10:00:00Z"}]})
        };
        Inventory {
            servers: vec![ServerView::of(&obj(json!({
                "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutServer",
                "metadata": {"name": "terdut", "namespace": "oncall", "generation": 2,
                    "creationTimestamp": "2026-11-29T09:00:00Z"},
                "spec": {"allowedTeams": {"namespaces": {"from": "Selector"}}},
                "status": {"observedGeneration": 2, "keyFingerprint": "3f2a9c0d1e4b",
                    "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                        "lastTransitionTime": "2026-11-29T10:00:00Z"}]}
            })))],
            teams: vec![
                TeamView::of(&obj(json!({
                    "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutTeam",
                    "metadata": {"name": "platform", "namespace": "oncall", "generation": 3},
                    "spec": {"serverRef": {"name": "terdut"}, "displayName": "Platform"},
                    "status": {"teamID": 7, "observedGeneration": 2, "conditions": ready("False", "UnknownUser")["conditions"]}
                }))),
                TeamView::of(&obj(json!({
                    "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutTeam",
                    "metadata": {"name": "ghost", "namespace": "strays"},
                    "spec": {"serverRef": {"name": "gone"}}
                }))),
            ],
            sources: vec![SourceView::of(&obj(json!({
                "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutAlertSource",
                "metadata": {"name": "am", "namespace": "oncall"},
                "spec": {"teamRef": {"name": "platform"}, "kind": "alertmanager"},
                "status": {"integrationID": 4, "webhookURLSecretRef": {"name": "am-terdut-webhook"},
                    "conditions": ready("True", "Ready")["conditions"]}
            })))],
        }
    }

    #[test]
    fn the_tree_as_data() {
        let v = to_value(&crate::tree::build(inventory()));
        let s = &v["servers"][0];
        assert_eq!(s["name"], "terdut");
        assert_eq!(s["ready"], "True");
        assert_eq!(s["consent"], "Selector");
        assert_eq!(s["keyFingerprint"], "3f2a9c0d1e4b");
        assert_eq!(s["generationObserved"], true);
        let t = &s["teams"][0];
        assert_eq!(
            (&t["name"], &t["teamID"], &t["reason"]),
            (&json!("platform"), &json!(7), &json!("UnknownUser"))
        );
        assert_eq!(t["generationObserved"], false);
        assert_eq!(t["alertSources"][0]["integrationID"], 4);
        assert_eq!(t["alertSources"][0]["webhookSecret"], "am-terdut-webhook");
        let gone = &v["servers"][1];
        assert_eq!(
            (&gone["name"], &gone["found"]),
            (&json!("gone"), &json!(false))
        );
        assert_eq!(gone["teams"][0]["ready"], "Unknown");
        assert_eq!(
            v["summary"],
            json!({"servers": 1, "teams": 2, "alertSources": 1, "notReady": 2})
        );
    }

    #[test]
    fn json_and_yaml_parse_back_and_escape_control_characters() {
        let tree = crate::tree::build(inventory());
        let want = to_value(&tree);
        let text = render(&tree, Format::Json).unwrap();
        assert!(!text.contains('\u{1b}'), "{text}");
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), want);
        let text = render(&tree, Format::Yaml).unwrap();
        assert!(!text.contains('\u{1b}'), "{text}");
        assert_eq!(serde_yaml_ng::from_str::<Value>(&text).unwrap(), want);
    }
}
