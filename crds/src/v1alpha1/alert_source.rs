//! `TerdutAlertSource`: one alert-ingest integration on a team, owning its webhook Secret
//! (docs/design.md §4.5).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{AppliedChanges, LocalObjectRef};
use super::policy::{DeletionPolicy, Management};

/// One alert-ingest integration on the TerdutTeam named by `teamRef` (same namespace). The
/// webhook URL and key land in the Secret `<name>-terdut-webhook`, never in spec or status.
// kube-derive repeats `type_ = "string"` across printcolumn(...) entries, which clippy reads
// as a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "terdut.ryuvia.com",
    version = "v1alpha1",
    kind = "TerdutAlertSource",
    namespaced,
    status = "TerdutAlertSourceStatus",
    shortname = "tdas",
    category = "terdut",
    derive = "PartialEq",
    doc = "One alert-ingest integration on a TerdutTeam; its webhook URL and key live in a Secret the operator owns.",
    printcolumn(name = "Team", type_ = "string", json_path = ".spec.teamRef.name"),
    printcolumn(name = "Kind", type_ = "string", json_path = ".spec.kind"),
    printcolumn(
        name = "IntegrationID",
        type_ = "integer",
        json_path = ".status.integrationID"
    ),
    printcolumn(
        name = "Secret",
        type_ = "string",
        json_path = ".status.webhookURLSecretRef.name"
    ),
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
pub struct TerdutAlertSourceSpec {
    /// The TerdutTeam (same namespace). Immutable.
    pub team_ref: TeamRef,
    /// What sends the alerts: `alertmanager`, `grafana` or `generic`. Changing it deletes and
    /// recreates the integration, which rotates the webhook key.
    pub kind: AlertSourceKind,
    /// The integration's display name on the server.
    #[schemars(length(min = 1, max = 128))]
    pub name: String,
    /// What deleting this object does to the integration on the server: `Delete` (default)
    /// or `Orphan` (the integration and the webhook Secret are left, the Secret no longer
    /// owned by the operator). Read when the deletion is handled.
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
        "rule": "self.name == oldSelf.name",
        "message": "teamRef is immutable: delete the TerdutAlertSource and create it again to move it to another team"
    }
]))]
pub struct TeamRef {
    /// Name of the TerdutTeam, in this namespace.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AlertSourceKind {
    Alertmanager,
    Grafana,
    Generic,
}

impl AlertSourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Alertmanager => "alertmanager",
            Self::Grafana => "grafana",
            Self::Generic => "generic",
        }
    }
}

/// What the operator observed and did; written by the operator only.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TerdutAlertSourceStatus {
    /// `Ready` (why not, in its reason and message), and while they hold `Reconciling`,
    /// `Stalled` and `Paused`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` the last pass reconciled; -1 before the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The integration's id on terdut-server.
    #[serde(
        default,
        rename = "integrationID",
        skip_serializing_if = "Option::is_none"
    )]
    pub integration_id: Option<i64>,
    /// The Secret holding `url` and `key`; never the values themselves.
    #[serde(
        default,
        rename = "webhookURLSecretRef",
        skip_serializing_if = "Option::is_none"
    )]
    pub webhook_url_secret_ref: Option<LocalObjectRef>,
    /// With `spec.management: ObserveOnly`: the changes the operator would make on the server,
    /// one line each; absent when there is nothing to do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 21))]
    pub plan: Option<Vec<String>>,
    /// The changes the last pass that changed something made (at most 20 lines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied: Option<AppliedChanges>,
}

/// `Ready` reasons of a TerdutAlertSource, each documented in docs/runbook.md; what each means
/// and how it is classified is in [`Reason`](crate::v1alpha1::reason::Reason). Waiting for
/// the team or the server, a team that may still be on its way, and retries after a failed
/// call or write are in progress; a fail-closed Secret, someone else's Secret, a refused
/// consent and a name that cannot work wait for someone.
pub mod reasons {
    crate::v1alpha1::reason::kind_reasons! {
        READY = Ready,
        OBSERVE_ONLY = ObserveOnly,
        TEAM_NOT_FOUND = TeamNotFound,
        WAITING_FOR_TEAM = WaitingForTeam,
        WAITING_FOR_SERVER = WaitingForServer,
        SERVER_ERROR = ServerError,
        APPLY_FAILED = ApplyFailed,
        DELETION_BLOCKED = DeletionBlocked,
        REF_NOT_PERMITTED = RefNotPermitted,
        WEBHOOK_SECRET_LOST = WebhookSecretLost,
        WEBHOOK_SECRET_CONFLICT = WebhookSecretConflict,
        INVALID_SPEC = InvalidSpec,
        CRASH_LOOPING = CrashLooping,
    }
}
