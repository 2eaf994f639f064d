//! The JSON bodies of the terdut-server API, exactly as docs/terdut-api.md fixes them: snake_case
//! fields, ids as integers, durations as whole seconds (`*_seconds`). Converting the CRDs' Go
//! durations into these seconds is `terdut_crds::GoDuration::to_seconds`, the one place that
//! does it; these types only carry the result.
//!
//! Nothing secret lives here except [`CreatedIntegration`], whose url and key are
//! [`SecretString`]s.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::secret::{IntegrationKey, WebhookUrl};

/// A server-side id (teams, switches, integrations). Signed to match the CRDs' `teamID` and the
/// server's 64-bit integers.
pub type Id = i64;

/// `Team` (terdut-api.md "Teams").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Team {
    pub id: Id,
    pub name: String,
    pub external_id: String,
    pub oidc: OidcGroups,
}

/// The OIDC groups of a team; `null` on the wire clears one. Both fields are always sent (a
/// `null` rather than an absent field), so a PUT says exactly what the team should have.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OidcGroups {
    #[serde(default)]
    pub member_group: Option<String>,
    #[serde(default)]
    pub owner_group: Option<String>,
}

/// Body of `POST /api/v1/teams`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewTeam {
    pub name: String,
    pub external_id: String,
}

/// Body of `PUT /api/v1/teams/{id}/name`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NameBody {
    pub name: String,
}

/// Body of `PATCH /api/v1/teams/{id}/integrations/{iid}`: the fields a PATCH changes in place
/// (the key is unchanged), built from the spec by `source::plan::Desired::patch`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntegrationPatch {
    pub name: String,
}

/// A team's escalation ladder, replaced whole by one PUT (docs/design.md §5).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ladder {
    pub repeat_count: u32,
    /// Always sent, `null` when the team has none.
    #[serde(default)]
    pub fallback_topic: Option<String>,
    pub levels: Vec<Level>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Level {
    pub timeout_seconds: u64,
    pub targets: Vec<Target>,
}

/// Who a level pages: `{"kind": "oncall"}` or `{"kind": "user", "username": "alice"}`. The
/// server resolves usernames (docs/design.md §2), so the operator never looks users up.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Target {
    Oncall,
    User { username: String },
}

/// A dead man's switch as the server returns it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Switch {
    pub id: Id,
    pub name: String,
    pub matcher: String,
    pub timeout_seconds: u64,
    /// `critical`, `warning` or `info` in the CRD; kept a string so a server that knows more
    /// severities never fails a whole list.
    pub severity: String,
}

/// A dead man's switch without its id: the body of create and update.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchSpec {
    pub name: String,
    pub matcher: String,
    pub timeout_seconds: u64,
    pub severity: String,
}

impl Switch {
    /// The switch without its id, to compare with a desired [`SwitchSpec`] (docs/design.md §5 "Diff
    /// by name against the list").
    pub fn spec(&self) -> SwitchSpec {
        SwitchSpec {
            name: self.name.clone(),
            matcher: self.matcher.clone(),
            timeout_seconds: self.timeout_seconds,
            severity: self.severity.clone(),
        }
    }
}

/// What sends alerts to an integration (terdut-api.md, assumption: the kinds the server
/// accepts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntegrationKind {
    Alertmanager,
    Grafana,
    Generic,
}

impl IntegrationKind {
    pub const ALL: [Self; 3] = [Self::Alertmanager, Self::Grafana, Self::Generic];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Alertmanager => "alertmanager",
            Self::Grafana => "grafana",
            Self::Generic => "generic",
        }
    }
}

impl fmt::Display for IntegrationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An integration (alert source) as every response but the creating one returns it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Integration {
    pub id: Id,
    pub kind: IntegrationKind,
    pub name: String,
    pub external_id: String,
}

/// Body of `POST /api/v1/teams/{id}/integrations`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewIntegration {
    pub kind: IntegrationKind,
    pub name: String,
    pub external_id: String,
}

/// The 201 body of integration create: the only response that ever carries the webhook URL and
/// key (docs/design.md §4.5). Both are secrets; `Debug` shows neither.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct CreatedIntegration {
    #[serde(flatten)]
    pub integration: Integration,
    pub url: WebhookUrl,
    pub key: IntegrationKey,
}

/// What integration create did. `Existing` is the 200 answer for an `external_id` the team
/// already has (terdut-api.md, assumption): the server returns it without url/key, so a caller
/// that lost the key must not pretend it has one (docs/design.md §5 "A webhook Secret that is lost
/// fails closed").
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IntegrationCreate {
    Created(CreatedIntegration),
    Existing(Integration),
}

impl IntegrationCreate {
    pub fn integration(&self) -> &Integration {
        match self {
            Self::Created(c) => &c.integration,
            Self::Existing(i) => i,
        }
    }
}

/// What team create did: 201 created, or 200 found by `external_id` (returned as is, its name
/// untouched — the caller renames it if needed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TeamCreate {
    Created(Team),
    Found(Team),
}

impl TeamCreate {
    pub fn team(&self) -> &Team {
        match self {
            Self::Created(t) | Self::Found(t) => t,
        }
    }

    pub fn into_team(self) -> Team {
        match self {
            Self::Created(t) | Self::Found(t) => t,
        }
    }

    pub fn was_created(&self) -> bool {
        matches!(self, Self::Created(_))
    }
}

/// What a DELETE did. A 404 is `AlreadyGone`, which a finalizer counts as success (docs/design.md
/// §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deletion {
    Deleted,
    AlreadyGone,
}

/// `GET /api/v1/whoami`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WhoAmI {
    pub account: String,
    pub scope: String,
}

/// The error body of every non-2xx answer: `{"error": "<code>", "message": "..."}`, plus
/// `"username"` for `unknown_user`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    #[serde(default)]
    pub error: String,
    #[serde(default)]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
}

/// The error codes of terdut-api.md.
pub mod codes {
    pub const NOT_FOUND: &str = "not_found";
    pub const TEAM_NAME_TAKEN: &str = "team_name_taken";
    pub const TEAM_HAS_OPEN_INCIDENTS: &str = "team_has_open_incidents";
    pub const UNKNOWN_USER: &str = "unknown_user";
    pub const SWITCH_NAME_TAKEN: &str = "switch_name_taken";
    pub const INVALID: &str = "invalid";
    pub const UNAUTHORIZED: &str = "unauthorized";
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn team_round_trips_with_null_groups() {
        let v = json!({"id": 42, "name": "Platform", "external_id": "team-ns/platform",
            "oidc": {"member_group": "g1", "owner_group": null}});
        let t: Team = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(t.oidc.owner_group, None);
        assert_eq!(serde_json::to_value(&t).unwrap(), v);
    }

    #[test]
    fn ladder_matches_the_contract_example() {
        let v = json!({"repeat_count": 2, "fallback_topic": null, "levels": [
            {"timeout_seconds": 300, "targets": [{"kind": "oncall"},
                {"kind": "user", "username": "alice"}]}]});
        let l: Ladder = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(
            l.levels[0].targets[1],
            Target::User {
                username: "alice".into()
            }
        );
        assert_eq!(serde_json::to_value(&l).unwrap(), v);
    }

    #[test]
    fn created_integration_carries_secrets_that_debug_hides() {
        let v = json!({"id": 3, "kind": "alertmanager", "name": "prod",
            "external_id": "ns/prod", "url": "http://x/api/v1/ingest/alertmanager/tok123",
            "key": "tdik_00112233"});
        let c: CreatedIntegration = serde_json::from_value(v).unwrap();
        assert_eq!(c.integration.id, 3);
        let dbg = format!("{c:?}");
        assert!(!dbg.contains("tok123") && !dbg.contains("tdik_"), "{dbg}");
    }
}
