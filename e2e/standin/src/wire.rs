//! The JSON bodies of docs/terdut-api.md, written out again on the server side. They are
//! deliberately not shared with the operator's client (`terdut_actors::api::wire`): two
//! independent readings of one document, checked against each other by the contract suite.

use serde::{Deserialize, Serialize};

/// A server-side id. One sequence serves teams, switches and integrations (assumption: the
/// contract only needs ids unique per kind).
pub type Id = i64;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Oidc {
    #[serde(default)]
    pub member_group: Option<String>,
    #[serde(default)]
    pub owner_group: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Team {
    pub id: Id,
    pub name: String,
    pub external_id: String,
    pub oidc: Oidc,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewTeam {
    pub name: String,
    pub external_id: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NameBody {
    pub name: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ladder {
    pub repeat_count: u32,
    #[serde(default)]
    pub fallback_topic: Option<String>,
    pub levels: Vec<Level>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Level {
    pub timeout_seconds: u64,
    pub targets: Vec<Target>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Target {
    Oncall,
    User { username: String },
}

/// A switch without its id: the body of create and update.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchBody {
    pub name: String,
    pub matcher: String,
    pub timeout_seconds: u64,
    pub severity: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Switch {
    pub id: Id,
    pub name: String,
    pub matcher: String,
    pub timeout_seconds: u64,
    pub severity: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Alertmanager,
    Grafana,
    Generic,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Alertmanager => "alertmanager",
            Self::Grafana => "grafana",
            Self::Generic => "generic",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::Alertmanager, Self::Grafana, Self::Generic]
            .into_iter()
            .find(|k| k.as_str() == s)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewIntegration {
    pub kind: Kind,
    pub name: String,
    pub external_id: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Integration {
    pub id: Id,
    pub kind: Kind,
    pub name: String,
    pub external_id: String,
}

/// The 201 body of integration create, the one response carrying url and key.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatedIntegration {
    #[serde(flatten)]
    pub integration: Integration,
    pub url: String,
    pub key: String,
}

impl std::fmt::Debug for CreatedIntegration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreatedIntegration")
            .field("integration", &self.integration)
            .field("url", &"<redacted>")
            .field("key", &"<redacted>")
            .finish()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WhoAmI {
    pub account: String,
    pub scope: String,
}

/// `{"error", "message"}`, plus `username` for `unknown_user`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
}
