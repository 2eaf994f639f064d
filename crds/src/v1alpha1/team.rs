//! `TerdutTeam`: one team on a server, with its escalation ladder and dead man's switches
//! folded in (docs/design.md §2, §4.2).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::AppliedChanges;
use super::policy::{DeletionPolicy, Management};
use crate::GoDuration;

/// One team on a terdut-server. Its identity on the server is `external_id`
/// `<namespace>/<name>` of this object.
// docs/design.md §2
// kube-derive repeats `type_ = "string"` across printcolumn(...) entries, which clippy reads
// as a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "terdut.ryuvia.com",
    version = "v1alpha1",
    kind = "TerdutTeam",
    namespaced,
    status = "TerdutTeamStatus",
    shortname = "tdt",
    category = "terdut",
    derive = "PartialEq",
    doc = "One team on a terdut-server, with its escalation ladder and dead man's switches.",
    printcolumn(name = "Server", type_ = "string", json_path = ".spec.serverRef.name"),
    printcolumn(name = "TeamID", type_ = "integer", json_path = ".status.teamID"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].status"#
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].reason"#
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    // Last and only with `-o wide`: the message is long (docs/design.md §3).
    printcolumn(
        name = "Message",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].message"#,
        priority = "1"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct TerdutTeamSpec {
    /// The TerdutServer this team lives on. Immutable: a team cannot move between servers.
    pub server_ref: ServerRef,
    /// The team's name on the server; must not belong to another team there.
    #[schemars(length(min = 1, max = 128))]
    pub display_name: String,
    /// OIDC groups whose members become the team's members and owners.
    #[serde(default)]
    pub oidc: TeamOidc,
    /// The escalation ladder. Absent: the team has none (any on the server is cleared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation: Option<Escalation>,
    /// Dead man's switches, matched by name; ones not listed are deleted on the server.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub deadman_switches: Vec<DeadmanSwitch>,
    /// What deleting this object does to the team on the server: `Delete` (default) or
    /// `Orphan` (left as it is). Read when the deletion is handled, so it may be changed on a
    /// live object.
    #[serde(default, skip_serializing_if = "DeletionPolicy::is_default")]
    pub deletion_policy: DeletionPolicy,
    /// `Full` (default) or `ObserveOnly`: plan without changing the server (`status.plan`).
    #[serde(default, skip_serializing_if = "Management::is_default")]
    pub management: Management,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "self.name == oldSelf.name && (has(self.__namespace__) ? self.__namespace__ : '') == (has(oldSelf.__namespace__) ? oldSelf.__namespace__ : '')",
        "message": "serverRef is immutable: delete the TerdutTeam and create it again to move the team to another server"
    }
]))]
pub struct ServerRef {
    /// Name of the TerdutServer.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Defaults to the team's own namespace; another namespace needs that server's
    /// `spec.allowedTeams` consent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub namespace: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TeamOidc {
    /// Members of this OIDC group become team members.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub member_group: Option<String>,
    /// Members of this OIDC group become team owners.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub owner_group: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Escalation {
    /// How many times the whole ladder repeats before giving up.
    #[serde(default)]
    #[schemars(range(min = 0, max = 100))]
    pub repeat_count: i32,
    /// ntfy topic paged when the ladder is exhausted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub fallback_topic: Option<String>,
    /// The levels, paged in order: each for its `timeout`, then the next.
    #[schemars(length(min = 1, max = 20))]
    pub levels: Vec<EscalationLevel>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EscalationLevel {
    /// How long this level is paged before the next one is.
    pub timeout: GoDuration,
    /// Who this level pages.
    #[schemars(length(min = 1, max = 20))]
    pub targets: Vec<EscalationTarget>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "self.kind == 'user' ? has(self.username) : !has(self.username)",
        "message": "an escalation target of kind user needs a username, and only kind user takes one"
    }
]))]
pub struct EscalationTarget {
    /// `oncall`: whoever is on call for the team; `user`: the user `username`.
    pub kind: TargetKind,
    /// A terdut-server username (kind `user`); the server must know it (else the team's Ready
    /// reason is `UnknownUser`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    pub username: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TargetKind {
    /// Whoever is on call for the team.
    Oncall,
    /// One named user.
    User,
}

impl TargetKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Oncall => "oncall",
            Self::User => "user",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeadmanSwitch {
    /// Unique within the team; the key the operator matches server-side switches by.
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$")
    )]
    pub name: String,
    /// Label matcher of the heartbeat alert, e.g. `alertname=Watchdog,cluster=prod`.
    #[schemars(length(min = 1, max = 1024))]
    pub matcher: String,
    /// The switch fires when no matching alert arrived for this long.
    pub timeout: GoDuration,
    /// Severity of the incident the switch opens: `critical` (default), `warning` or `info`.
    #[serde(default = "default_severity")]
    pub severity: Severity,
}

fn default_severity() -> Severity {
    Severity::Critical
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Critical,
    Warning,
    Info,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Critical => "critical",
            Self::Warning => "warning",
            Self::Info => "info",
        }
    }
}

/// What the operator observed and did; written by the operator only.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TerdutTeamStatus {
    /// `Ready` (why not, in its reason and message), and while they hold `Reconciling`,
    /// `Stalled` and `Paused`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` the last pass reconciled; -1 before the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The team's id on terdut-server.
    #[serde(default, rename = "teamID", skip_serializing_if = "Option::is_none")]
    pub team_id: Option<i64>,
    /// With `spec.management: ObserveOnly`: the changes the operator would make on the server,
    /// one line each; absent when there is nothing to do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 21))]
    pub plan: Option<Vec<String>>,
    /// The changes the last pass that changed something made (at most 20 lines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied: Option<AppliedChanges>,
}

/// `Ready` reasons of a TerdutTeam (docs/design.md §4.2), each documented in docs/runbook.md;
/// what each means and how it is classified is in [`Reason`](crate::v1alpha1::reason::Reason).
/// A missing TerdutServer may still be on its way (applied in the same commit) and its watch
/// event resumes the team: in progress. The rest wait for someone: a name or a user on the
/// server, consent, an adoption.
pub mod reasons {
    crate::v1alpha1::reason::kind_reasons! {
        READY = Ready,
        OBSERVE_ONLY = ObserveOnly,
        SERVER_REF_NOT_FOUND = ServerRefNotFound,
        WAITING_FOR_SERVER = WaitingForServer,
        DELETION_BLOCKED = DeletionBlocked,
        REF_NOT_PERMITTED = RefNotPermitted,
        SERVER_NOT_RECONCILED = ServerNotReconciled,
        TEAM_NAME_TAKEN = TeamNameTaken,
        UNKNOWN_USER = UnknownUser,
        INVALID_SPEC = InvalidSpec,
        ADOPTED = Adopted,
        POLICY_DENIED = PolicyDenied,
        TEAM_LIMIT_REACHED = TeamLimitReached,
        CRASH_LOOPING = CrashLooping,
    }
}
