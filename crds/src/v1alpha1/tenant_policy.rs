//! What the owner of a shared TerdutServer lets TerdutTeams from other namespaces do on it
//! (docs/design.md §4.6 "Policies", docs/adr/0016-server-owner-policy.md):
//! `spec.allowedTeams.policies`. Consent (`allowedTeams.namespaces`) says which namespaces may
//! attach; a policy says what the teams of a namespace may ask for once attached: which users
//! their ladders may page, which ntfy topics they may use as fallback (published with the
//! server's own token), which OIDC groups and display names they may claim, whether they may
//! be left behind on the server when deleted (`deletionPolicy: Orphan`), and how many teams
//! one namespace may have there.
//!
//! Shaped like cert-manager approver-policy's `CertificateRequestPolicy`: a selector of whom a
//! policy applies to, and an `allowed` block in which each list, once present, is the whole of
//! what may be asked (absent: anything). The first policy whose namespaces match applies.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::policy::DeletionPolicy;

/// One policy for the TerdutTeams of the namespaces it selects.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TeamPolicy {
    /// Names the policy in conditions and Events; unique within the server.
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub name: String,
    /// The namespaces this policy applies to: by name or by label selector (exactly one).
    pub namespaces: PolicyNamespaces,
    /// How many TerdutTeams of one matching namespace may use this server (absent: no limit).
    /// The oldest teams (by creation time, then name) are admitted; the others are
    /// `TeamLimitReached` and make no call to the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 10000))]
    pub max_teams: Option<i32>,
    /// What the teams may ask for. Each list, once present, is the whole of what is allowed
    /// (an empty list allows nothing); an absent list allows anything.
    #[serde(default)]
    pub allowed: AllowedValues,
}

/// Which namespaces a policy applies to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "(has(self.names) && size(self.names) > 0) != has(self.selector)",
        "message": "a policy's namespaces need exactly one of names and selector"
    }
]))]
pub struct PolicyNamespaces {
    /// Namespace names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(min = 1, max = 63)))]
    pub names: Vec<String>,
    /// A label selector over namespaces (`{}` selects every namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

/// What a policy allows. A pattern is a literal, or has `*` standing for any run of characters
/// (`payments-*`, `*-oncall`, `*`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AllowedValues {
    /// Patterns `spec.displayName` must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32), inner(length(min = 1, max = 256)))]
    pub display_names: Option<Vec<String>>,
    /// Patterns every escalation target of kind `user` must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32), inner(length(min = 1, max = 256)))]
    pub users: Option<Vec<String>>,
    /// Patterns `spec.escalation.fallbackTopic` must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32), inner(length(min = 1, max = 256)))]
    pub fallback_topics: Option<Vec<String>>,
    /// Patterns `spec.oidc.memberGroup` and `spec.oidc.ownerGroup` must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32), inner(length(min = 1, max = 256)))]
    pub oidc_groups: Option<Vec<String>>,
    /// The deletion policies a team may have; `[Delete]` forbids leaving teams behind on the
    /// server (a team asking for `Orphan` is refused, and one deleted with it is deleted on
    /// the server all the same).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2))]
    pub deletion_policies: Option<Vec<DeletionPolicy>>,
}
