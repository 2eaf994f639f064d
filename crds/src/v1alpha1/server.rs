//! `TerdutServer`: one terdut-server install (docs/design.md §4.1).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, EnvFromSource, EnvVar, LocalObjectReference, PodSecurityContext,
    ResourceRequirements, SecurityContext, Toleration, TopologySpreadConstraint, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{AppliedChanges, SecretKeyRef};
use super::policy::Management;
use super::tenant_policy::TeamPolicy;
use crate::GoDuration;

/// The image terdut-server runs by default; a `tag` is always required so nothing floats.
pub const DEFAULT_IMAGE_REPOSITORY: &str = "git.ryuvia.com/niklas/terdut-server";

/// One terdut-server install: its Deployment, Service, database wiring, operator key and the
/// consent it gives to TerdutTeams in other namespaces.
// kube-derive repeats `type_ = "string"` across printcolumn(...) entries, which clippy reads
// as a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "terdut.ryuvia.com",
    version = "v1alpha1",
    kind = "TerdutServer",
    namespaced,
    status = "TerdutServerStatus",
    shortname = "tds",
    category = "terdut",
    derive = "PartialEq",
    doc = "One terdut-server install managed by terdut-operator: its Deployment, Service, operator key Secret, database wiring and the consent it gives to TerdutTeams of other namespaces.",
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
        name = "Replicas",
        type_ = "integer",
        json_path = ".spec.replicas",
        priority = "1"
    ),
    printcolumn(
        name = "Available",
        type_ = "integer",
        json_path = ".status.availableReplicas",
        priority = "1"
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
pub struct TerdutServerSpec {
    /// The terdut-server image the pods run.
    pub image: ImageSpec,
    /// Pod replicas. 2 by default since terdut-server v0.36.0's advisory locks made it safe.
    #[serde(default = "default_replicas")]
    #[schemars(range(min = 0, max = 32))]
    pub replicas: i32,
    /// The server's public hostname and the port of its Service.
    pub networking: NetworkingSpec,
    /// Where the server's Postgres database is: exactly one of `dsn`, `postgresClusterRef`
    /// or `cnpgClusterRef`.
    pub database: DatabaseSpec,
    /// When incidents turn stale and when resolved ones are archived.
    #[serde(default)]
    pub sweeper: SweeperSpec,
    /// How the server sends pages (an ntfy server).
    #[serde(default)]
    pub notify: NotifySpec,
    /// Single sign-on with an OpenID Connect provider; off by default.
    #[serde(default)]
    pub oidc: OidcSpec,
    /// Whether users may log in with a password (`TERDUT_PASSWORD_LOGIN`).
    #[serde(default = "default_true")]
    pub password_login: bool,
    /// Which other namespaces may attach TerdutTeams to this server (teams in its own
    /// namespace always may). None by default.
    // docs/design.md §4.6
    #[serde(default)]
    pub allowed_teams: AllowedTeams,
    /// Pod-level customisation of the Deployment, all optional.
    #[serde(default)]
    pub pod: PodSpec,
    /// `Full` (default) or `ObserveOnly`: plan the Kubernetes objects without writing them
    /// (`status.plan`).
    #[serde(default, skip_serializing_if = "Management::is_default")]
    pub management: Management,
}

fn default_replicas() -> i32 {
    2
}
fn default_true() -> bool {
    true
}

/// The terdut-server image the pods run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageSpec {
    /// Image repository, `git.ryuvia.com/niklas/terdut-server` by default (or a mirror of it).
    #[serde(default = "default_repository")]
    #[schemars(length(min = 1, max = 512))]
    pub repository: String,
    /// Image tag, e.g. `v0.9.3`. Required so that an upgrade is always a spec change.
    #[schemars(length(min = 1, max = 128))]
    pub tag: String,
    /// `Always`, `IfNotPresent` (default) or `Never`, as a container's `imagePullPolicy`.
    #[serde(default = "default_pull_policy")]
    pub pull_policy: PullPolicy,
}

fn default_repository() -> String {
    DEFAULT_IMAGE_REPOSITORY.into()
}
fn default_pull_policy() -> PullPolicy {
    PullPolicy::IfNotPresent
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PullPolicy {
    Always,
    IfNotPresent,
    Never,
}

impl PullPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Always => "Always",
            Self::IfNotPresent => "IfNotPresent",
            Self::Never => "Never",
        }
    }
}

/// The server's public hostname and the port of its Service.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkingSpec {
    /// Public hostname; terdut-server builds its links and webhook URLs from
    /// `https://<hostname>` (`TERDUT_PUBLIC_URL`). The operator creates no Ingress: route the
    /// hostname to the Service yourself.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?(:[0-9]{1,5})?$")
    )]
    pub hostname: String,
    /// Port of the ClusterIP Service and of the server's listener.
    #[serde(default = "default_service_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub service_port: i32,
}

fn default_service_port() -> i32 {
    8080
}

/// Where the database is: a DSN you bring, a Zalando `postgresql` cluster or a CloudNativePG
/// `Cluster`.
// docs/design.md §8
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "[has(self.dsn), has(self.postgresClusterRef), has(self.cnpgClusterRef)].filter(x, x).size() == 1",
        "message": "set exactly one of database.dsn (bring your own database), database.postgresClusterRef (a Zalando postgresql cluster) or database.cnpgClusterRef (a CloudNativePG Cluster)"
    },
    {
        "rule": "!has(self.passwordSecretRef) || has(self.dsn)",
        "message": "database.passwordSecretRef goes with database.dsn; with postgresClusterRef or cnpgClusterRef the password comes from the cluster's own Secret"
    },
    {
        "rule": "!has(self.dsn) || (!self.dsn.matches('^[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#@]*:[^/?#@]*@') && !self.dsn.matches('(^|[[:space:]?&])password[[:space:]]*='))",
        "message": "database.dsn must not carry a password (the DSN is plain text in the TerdutServer and in the pod spec, readable by anyone who can read either): put the password in a Secret and reference it with database.passwordSecretRef"
    }
]))]
pub struct DatabaseSpec {
    /// A libpq DSN without the password, e.g.
    /// `postgres://terdut@terdut-postgres:5432/terdut?sslmode=require`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    pub dsn: Option<String>,
    /// The password for `dsn`, handed to the pods as `PGPASSWORD`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_secret_ref: Option<SecretKeyRef>,
    /// A Zalando `postgresql.acid.zalan.do` cluster in this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres_cluster_ref: Option<PostgresClusterRef>,
    /// A CloudNativePG `clusters.postgresql.cnpg.io` Cluster in this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cnpg_cluster_ref: Option<CnpgClusterRef>,
}

/// A CloudNativePG Cluster; the DSN host is its `<name>-rw` Service (the primary), the user and
/// database are the ones its bootstrap made (`app` by default), and the password comes from its
/// application Secret, `<name>-app` unless the bootstrap names another.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CnpgClusterRef {
    /// At most 60 characters, so that `<name>-rw` is still a Service name (a DNS label).
    #[schemars(length(min = 1, max = 60))]
    pub name: String,
}

/// A Zalando postgres-operator cluster; the DSN host is its master Service `<name>` and the
/// password comes from `<user>.<name>.credentials.postgresql.acid.zalan.do`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PostgresClusterRef {
    /// Name of the `postgresql` object (and of its master Service) in this namespace.
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// Database role the server logs in as.
    #[serde(default = "default_terdut")]
    #[schemars(length(min = 1, max = 63))]
    pub user: String,
    /// Database name.
    #[serde(default = "default_terdut")]
    #[schemars(length(min = 1, max = 63))]
    pub database: String,
}

fn default_terdut() -> String {
    "terdut".into()
}

/// When incidents turn stale and when resolved ones are archived (Go durations).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SweeperSpec {
    /// An open incident with no activity for this long is marked stale.
    #[serde(default = "default_stale_after")]
    pub stale_after: GoDuration,
    /// A resolved incident is archived after this long.
    #[serde(default = "default_archive_after")]
    pub archive_after: GoDuration,
}

impl Default for SweeperSpec {
    fn default() -> Self {
        Self {
            stale_after: default_stale_after(),
            archive_after: default_archive_after(),
        }
    }
}
fn default_stale_after() -> GoDuration {
    GoDuration::from("6h")
}
fn default_archive_after() -> GoDuration {
    GoDuration::from("168h")
}

/// How the server sends pages: an ntfy server, a fallback topic, the repeat interval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NotifySpec {
    /// Base URL of the ntfy server that delivers pages. Empty: notifications are off.
    #[serde(default, rename = "ntfyURL")]
    #[schemars(length(max = 2048))]
    pub ntfy_url: String,
    /// Topic paged when a team's ladder has no topic of its own.
    #[serde(default)]
    #[schemars(length(max = 256))]
    pub fallback_topic: String,
    /// How often an unacknowledged page repeats.
    #[serde(default = "default_repeat_every")]
    pub repeat_every: GoDuration,
    /// ntfy access token (`TERDUT_NTFY_TOKEN`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_secret_ref: Option<SecretKeyRef>,
}

impl Default for NotifySpec {
    fn default() -> Self {
        Self {
            ntfy_url: String::new(),
            fallback_topic: String::new(),
            repeat_every: default_repeat_every(),
            token_secret_ref: None,
        }
    }
}
fn default_repeat_every() -> GoDuration {
    GoDuration::from("15m")
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!self.enabled || (size(self.issuer) > 0 && size(self.clientID) > 0 && has(self.clientSecretRef))",
        "message": "oidc.enabled needs oidc.issuer, oidc.clientID and oidc.clientSecretRef"
    }
]))]
pub struct OidcSpec {
    /// Offer the login with the OIDC provider; needs `issuer`, `clientID` and `clientSecretRef`.
    #[serde(default)]
    pub enabled: bool,
    /// The provider's issuer URL (its `/.well-known/openid-configuration` is read from there).
    #[serde(default)]
    #[schemars(length(max = 2048))]
    pub issuer: String,
    /// The client id registered with the provider for this server.
    #[serde(default, rename = "clientID")]
    #[schemars(length(max = 512))]
    pub client_id: String,
    /// The client secret, from a Secret in this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_ref: Option<SecretKeyRef>,
    /// Label of the login button.
    #[serde(default = "default_oidc_name")]
    #[schemars(length(max = 64))]
    pub name: String,
    /// Scopes asked for, space-separated (`openid profile email` by default).
    #[serde(default = "default_scopes")]
    #[schemars(length(max = 512))]
    pub scopes: String,
    /// Only members of one of these provider groups may log in; empty: anyone the provider
    /// authenticates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(min = 1, max = 256)))]
    pub allowed_groups: Vec<String>,
    /// Members of this provider group are the server's administrators.
    #[serde(default)]
    #[schemars(length(max = 256))]
    pub admin_group: String,
    /// The ID token claim that is the username (`preferred_username` by default).
    #[serde(default = "default_username_claim")]
    #[schemars(length(min = 1, max = 128))]
    pub username_claim: String,
    /// The ID token claim that is the email address (`email` by default).
    #[serde(default = "default_email_claim")]
    #[schemars(length(min = 1, max = 128))]
    pub email_claim: String,
    /// The ID token claim that lists the user's groups (`groups` by default).
    #[serde(default = "default_groups_claim")]
    #[schemars(length(min = 1, max = 128))]
    pub groups_claim: String,
    /// Trust the provider's `email` claim without its `email_verified`.
    #[serde(default)]
    pub trust_email: bool,
    /// How long a login lasts (Go duration, `12h` by default).
    #[serde(default = "default_session_max_age")]
    pub session_max_age: GoDuration,
}

impl Default for OidcSpec {
    fn default() -> Self {
        Self {
            enabled: false,
            issuer: String::new(),
            client_id: String::new(),
            client_secret_ref: None,
            name: default_oidc_name(),
            scopes: default_scopes(),
            allowed_groups: vec![],
            admin_group: String::new(),
            username_claim: default_username_claim(),
            email_claim: default_email_claim(),
            groups_claim: default_groups_claim(),
            trust_email: false,
            session_max_age: default_session_max_age(),
        }
    }
}
fn default_oidc_name() -> String {
    "SSO".into()
}
fn default_scopes() -> String {
    "openid profile email".into()
}
fn default_username_claim() -> String {
    "preferred_username".into()
}
fn default_email_claim() -> String {
    "email".into()
}
fn default_groups_claim() -> String {
    "groups".into()
}
fn default_session_max_age() -> GoDuration {
    GoDuration::from("12h")
}

/// Consent for cross-namespace TerdutTeams (docs/design.md §4.6), shaped like Gateway API's
/// `Gateway.spec.allowedListeners`, and what the teams of each admitted namespace may do.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AllowedTeams {
    /// The namespaces whose TerdutTeams may attach.
    #[serde(default)]
    pub namespaces: AllowedNamespaces,
    // docs/design.md §4.6 "Policies".
    /// Per-namespace rules for the admitted TerdutTeams of other namespaces, in order: the
    /// first whose `namespaces` match applies; a namespace no policy matches is not restricted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub policies: Vec<TeamPolicy>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "self.from == 'Selector' ? has(self.selector) : !has(self.selector)",
        "message": "allowedTeams.namespaces.selector is required when from is Selector, and only allowed then"
    }
]))]
pub struct AllowedNamespaces {
    /// `None` (default) and `Same`: no other namespace (`Same` as in Gateway API); `All`:
    /// every namespace; `Selector`: the namespaces whose labels match `selector`.
    #[serde(default)]
    pub from: FromNamespaces,
    /// Namespaces whose labels match may attach TerdutTeams (only with `from: Selector`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

/// Which namespaces may attach TerdutTeams to this server (same-namespace is always allowed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum FromNamespaces {
    #[default]
    None,
    Same,
    All,
    Selector,
}

/// Pod-level customisation; Kubernetes' own types are passed through unchanged to the pods.
// docs/design.md §4.1
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    /// CPU and memory requests and limits of the terdut-server container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Tolerations of the server's pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub tolerations: Vec<Toleration>,
    /// Affinity of the server's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// Topology spread constraints of the server's pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    /// Node selector of the server's pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Extra pod annotations (the operator's own key-hash annotation always wins).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Security context of the server's pods (the default runs as non-root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<PodSecurityContext>,
    /// Security context of the terdut-server container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_security_context: Option<SecurityContext>,
    /// Environment variables added to the container after the operator's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub extra_env: Vec<EnvVar>,
    /// ConfigMaps or Secrets whose keys become environment variables of the container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub extra_env_from: Vec<EnvFromSource>,
    /// Volumes added to the pods (mount them with `extraVolumeMounts`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub extra_volumes: Vec<Volume>,
    /// Mounts of `extraVolumes` in the container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub extra_volume_mounts: Vec<VolumeMount>,
    /// Secrets the kubelet uses to pull the image from a private registry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub image_pull_secrets: Vec<LocalObjectReference>,
    /// When set, a PodDisruptionBudget selects this server's pods; clearing it deletes the
    /// budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disruption_budget: Option<DisruptionBudgetSpec>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.minAvailable) != has(self.maxUnavailable)",
        "message": "set exactly one of disruptionBudget.minAvailable or disruptionBudget.maxUnavailable"
    }
]))]
pub struct DisruptionBudgetSpec {
    /// Pods that must stay available during a voluntary disruption (a number or a percentage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<IntOrString>,
    /// Pods that may be unavailable during a voluntary disruption (a number or a percentage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
}

/// What the operator observed and did; written by the operator only.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TerdutServerStatus {
    /// `Ready` (why not, in its reason and message), `KeyAccepted`, and while they hold
    /// `Reconciling`, `Stalled` and `Paused`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` the last pass reconciled; -1 before the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The operator key Secret, in this TerdutServer's own namespace. Pure output.
    // docs/design.md §6
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret_ref: Option<SecretKeyRef>,
    /// TerdutTeams attached to this server, counted by whether their namespace has consent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teams: Option<TeamCounts>,
    /// With `spec.management: ObserveOnly`: the changes the operator would make on the server,
    /// one line each; absent when there is nothing to do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 21))]
    pub plan: Option<Vec<String>>,
    /// The changes the last pass that changed something made (at most 20 lines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied: Option<AppliedChanges>,
    /// The base URL the operator calls this server's API at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Pods of the server's Deployment that are available; absent until the Deployment exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
    /// The first 12 hex characters of the operator key's SHA-256, to tell keys apart (the
    /// pod template's `terdut.ryuvia.com/operator-key-hash` starts with the same characters);
    /// never the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_fingerprint: Option<String>,
}

/// TerdutTeams naming this server, by consent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TeamCounts {
    /// Teams this server serves (its own namespace, or one `allowedTeams` admits).
    pub accepted: u32,
    /// Teams refused for lack of consent (their Ready reason is `RefNotPermitted`).
    pub refused: u32,
}

/// `Ready` reasons of a TerdutServer, each documented in docs/runbook-server.md; what each
/// means and how it is classified is in [`Reason`](crate::v1alpha1::reason::Reason). With no
/// pod available Ready is False with the most actionable reason: the database, a stalled
/// rollout, a refused pod, or plain `Progressing`.
pub mod reasons {
    crate::v1alpha1::reason::kind_reasons! {
        READY = Ready,
        SCALED_TO_ZERO = ScaledToZero,
        OBSERVE_ONLY = ObserveOnly,
        ROLLING_OUT = RollingOut,
        PROGRESSING = Progressing,
        DATABASE_CLUSTER_NOT_RUNNING = DatabaseClusterNotRunning,
        DATABASE_CLUSTER_NOT_FOUND = DatabaseClusterNotFound,
        SECRET_NOT_FOUND = SecretNotFound,
        APPLY_FAILED = ApplyFailed,
        ROLLOUT_STALLED = RolloutStalled,
        REPLICA_FAILURE = ReplicaFailure,
        KEY_SECRET_INVALID = KeySecretInvalid,
        KEY_SECRET_NOT_OWNED = KeySecretNotOwned,
        RESOURCE_NOT_OWNED = ResourceNotOwned,
        INVALID_SPEC = InvalidSpec,
        POSTGRES_OPERATOR_NOT_INSTALLED = PostgresOperatorNotInstalled,
        SECRET_KEY_NOT_FOUND = SecretKeyNotFound,
        CRASH_LOOPING = CrashLooping,
    }
}

/// The `KeyAccepted` condition: whether the running server accepts the operator key (a
/// `whoami` after each pass; docs/design.md §6). One place that says why a server's teams wait.
pub mod key_accepted {
    pub const TYPE: &str = "KeyAccepted";
    /// `whoami` answered as the operator account.
    pub const ACCEPTED: &str = "Accepted";
    /// The server answered 401: it was seeded with another key (pods not rolled yet, or a
    /// server that does not read `TERDUT_OPERATOR_KEY`).
    pub const KEY_REJECTED: &str = "KeyRejected";
    /// No answer (no pod serving yet, the Service unreachable, a 5xx).
    pub const UNREACHABLE: &str = "Unreachable";
    /// No key or client to ask with yet.
    pub const NO_KEY: &str = "NoKey";
    /// Not asked: the Service or Deployment at the server's address is not this server's own,
    /// so the key is not sent (docs/security.md).
    pub const KEY_WITHHELD: &str = "KeyWithheld";
}

/// The `PodSecurity` condition: whether the generated pods meet the `restricted` Pod Security
/// level, and if not, which fields of the spec break it.
pub mod pod_security {
    pub const TYPE: &str = "PodSecurity";
    pub const RESTRICTED: &str = "Restricted";
    pub const BREAKS_RESTRICTED: &str = "BreaksRestricted";
}
