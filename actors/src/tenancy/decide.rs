//! The server owner's policy, decided without IO (docs/design.md §4.6 "Policies"): which policy
//! applies to a team's namespace, and whether it admits what the team asks for.

use std::collections::BTreeMap;

use terdut_crds::v1alpha1::server::AllowedTeams;
use terdut_crds::v1alpha1::team::TargetKind;
use terdut_crds::v1alpha1::{DeletionPolicy, TeamPolicy, TerdutTeamSpec};

use super::pattern;
use crate::consent::selector_matches;
use crate::key::ObjectKey;

/// Which policy applies to the teams of one namespace.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Applies<'a> {
    /// None: the team is in the server's own namespace, or no policy selects its namespace.
    Unrestricted,
    Policy(&'a TeamPolicy),
    /// A policy selects by labels and the namespace's labels could not be read: which one
    /// applies is not known, so none can admit.
    Unknown,
}

/// The first policy of `allowed` whose namespaces include `team_namespace` (`labels`: its
/// labels, `None` when they could not be read). Same-namespace teams are the owner's own.
pub fn policy_for<'a>(
    allowed: &'a AllowedTeams,
    server_namespace: &str,
    team_namespace: &str,
    labels: Option<&BTreeMap<String, String>>,
) -> Applies<'a> {
    if server_namespace == team_namespace {
        return Applies::Unrestricted;
    }
    for policy in &allowed.policies {
        let ns = &policy.namespaces;
        if ns.names.iter().any(|n| n == team_namespace) {
            return Applies::Policy(policy);
        }
        if let Some(selector) = &ns.selector {
            match labels {
                Some(labels) if selector_matches(selector, labels) => {
                    return Applies::Policy(policy);
                }
                Some(_) => {}
                None => return Applies::Unknown,
            }
        }
    }
    Applies::Unrestricted
}

/// One team, as a policy sees it.
#[derive(Clone, Copy, Debug)]
pub struct Candidate<'a> {
    pub spec: &'a TerdutTeamSpec,
    /// How many TerdutTeams of the same namespace naming the same server are older (creation
    /// time, then name); `None` while they are still being counted.
    pub rank: Option<usize>,
}

/// What the policy says of one team.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    Admitted,
    /// The spec asks for something the policy does not allow; the message says what, which
    /// policy, and what is allowed.
    NotAllowed(String),
    /// Older teams of the namespace fill the policy's `maxTeams`.
    OverLimit(String),
    /// The namespace's teams are still being counted (the cache is listing).
    Uncounted,
}

/// Whether the policy that applies admits `team`. Checked before any call to the server.
pub fn admit(server: &ObjectKey, applies: Applies<'_>, team: Candidate<'_>) -> Admission {
    let policy = match applies {
        Applies::Unrestricted => return Admission::Admitted,
        Applies::Unknown => {
            return Admission::NotAllowed(format!(
                "TerdutServer {server} applies policies by namespace label, and this namespace's \
                 labels could not be read, so no policy can admit the team yet"
            ));
        }
        Applies::Policy(p) => p,
    };
    if let Some(refusal) = first_refusal(policy, team.spec) {
        return Admission::NotAllowed(format!(
            "policy {:?} of TerdutServer {server} (spec.allowedTeams.policies) does not allow \
             {refusal}; nothing is sent to the server until this spec or the policy changes",
            policy.name
        ));
    }
    let Some(most) = policy.max_teams else {
        return Admission::Admitted;
    };
    let most = usize::try_from(most).unwrap_or(0);
    match team.rank {
        None => Admission::Uncounted,
        Some(rank) if rank < most => Admission::Admitted,
        Some(_) => Admission::OverLimit(format!(
            "policy {:?} of TerdutServer {server} admits {most} TerdutTeam{} of this namespace \
             (maxTeams), and {most} older one{} already name{} it; nothing is sent to the server \
             for this team until one of them is deleted or the limit is raised",
            policy.name,
            plural(most),
            plural(most),
            if most == 1 { "s" } else { "" },
        )),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The first field of `spec` the policy does not allow, described with its value and what is
/// allowed.
fn first_refusal(policy: &TeamPolicy, spec: &TerdutTeamSpec) -> Option<String> {
    let allowed = &policy.allowed;
    let refused = |field: &str, value: &str, patterns: &[String]| {
        Some(format!(
            "{field} {value:?} (allowed: {})",
            if patterns.is_empty() {
                "none".to_owned()
            } else {
                patterns.join(", ")
            }
        ))
    };
    if let Some(policies) = &allowed.deletion_policies
        && !policies.contains(&spec.deletion_policy)
    {
        let names: Vec<String> = policies.iter().map(|p| format!("{p:?}")).collect();
        return refused(
            "spec.deletionPolicy",
            &format!("{:?}", spec.deletion_policy),
            &names,
        );
    }
    if let Some(patterns) = &allowed.display_names
        && !pattern::any(patterns, &spec.display_name)
    {
        return refused("spec.displayName", &spec.display_name, patterns);
    }
    if let Some(patterns) = &allowed.oidc_groups {
        for (field, group) in [
            ("spec.oidc.memberGroup", &spec.oidc.member_group),
            ("spec.oidc.ownerGroup", &spec.oidc.owner_group),
        ] {
            if let Some(group) = group
                && !pattern::any(patterns, group)
            {
                return refused(field, group, patterns);
            }
        }
    }
    let escalation = spec.escalation.as_ref()?;
    if let (Some(patterns), Some(topic)) = (&allowed.fallback_topics, &escalation.fallback_topic)
        && !pattern::any(patterns, topic)
    {
        return refused("spec.escalation.fallbackTopic", topic, patterns);
    }
    let patterns = allowed.users.as_ref()?;
    for (l, level) in escalation.levels.iter().enumerate() {
        for (t, target) in level.targets.iter().enumerate() {
            if target.kind == TargetKind::User
                && let Some(user) = &target.username
                && !pattern::any(patterns, user)
            {
                return refused(
                    &format!("spec.escalation.levels[{l}].targets[{t}].username"),
                    user,
                    patterns,
                );
            }
        }
    }
    None
}

/// What deleting a team with `requested` does under `applies`: the request, unless the policy
/// does not allow it, in which case the team is deleted on the server (`Delete`) and the name
/// of the policy that decided it is returned. With the policy unknown, `Orphan` is honoured
/// only when no policy of the server forbids it: a name is never left squatted by a guess.
pub fn deletion(
    allowed: &AllowedTeams,
    applies: Applies<'_>,
    requested: DeletionPolicy,
) -> (DeletionPolicy, Option<String>) {
    let forbids = |p: &TeamPolicy| {
        p.allowed
            .deletion_policies
            .as_ref()
            .is_some_and(|allowed| !allowed.contains(&requested))
    };
    let decided_by = match applies {
        Applies::Unrestricted => None,
        Applies::Policy(p) => forbids(p).then(|| p.name.clone()),
        Applies::Unknown => allowed
            .policies
            .iter()
            .find(|p| forbids(p))
            .map(|p| p.name.clone()),
    };
    match decided_by {
        Some(name) => (DeletionPolicy::Delete, Some(name)),
        None => (requested, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn allowed(policies: serde_json::Value) -> AllowedTeams {
        serde_json::from_value(json!({"namespaces": {"from": "All"}, "policies": policies}))
            .unwrap()
    }

    fn spec(extra: serde_json::Value) -> TerdutTeamSpec {
        let mut base = json!({"serverRef": {"name": "terdut", "namespace": "shared"},
            "displayName": "Payments"});
        for (k, v) in extra.as_object().unwrap() {
            base[k] = v.clone();
        }
        serde_json::from_value(base).unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn server() -> ObjectKey {
        ObjectKey::new("shared", "terdut")
    }

    fn admitted(a: &AllowedTeams, ns: &str, s: &TerdutTeamSpec, rank: usize) -> Admission {
        let applies = policy_for(a, "shared", ns, Some(&labels(&[("tier", "tenant")])));
        admit(
            &server(),
            applies,
            Candidate {
                spec: s,
                rank: Some(rank),
            },
        )
    }

    #[test]
    fn the_first_matching_policy_applies_and_the_owners_namespace_is_free() {
        let a = allowed(json!([
            {"name": "payments", "namespaces": {"names": ["payments"]}, "maxTeams": 1},
            {"name": "tenants", "namespaces": {"selector": {"matchLabels": {"tier": "tenant"}}}},
            {"name": "rest", "namespaces": {"selector": {}}, "maxTeams": 0},
        ]));
        let tenant = labels(&[("tier", "tenant")]);
        let name =
            |ns: &str, l: &BTreeMap<String, String>| match policy_for(&a, "shared", ns, Some(l)) {
                Applies::Policy(p) => p.name.clone(),
                other => format!("{other:?}"),
            };
        assert_eq!(
            name("payments", &tenant),
            "payments",
            "names first, in order"
        );
        assert_eq!(name("search", &tenant), "tenants");
        assert_eq!(
            name("search", &labels(&[])),
            "rest",
            "`{{}}` selects everything"
        );
        assert_eq!(
            policy_for(&a, "shared", "shared", None),
            Applies::Unrestricted
        );
        assert_eq!(policy_for(&a, "shared", "search", None), Applies::Unknown);
        assert_eq!(
            policy_for(&allowed(json!([])), "shared", "x", None),
            Applies::Unrestricted,
            "no policy: as before"
        );
        let only_names = allowed(json!([{"name": "p", "namespaces": {"names": ["payments"]}}]));
        assert_eq!(
            policy_for(&only_names, "shared", "other", None),
            Applies::Unrestricted,
            "names need no labels"
        );
    }

    #[test]
    fn every_field_a_tenant_could_abuse_is_checked_with_what_is_allowed() {
        let a = allowed(json!([{"name": "tenants", "namespaces": {"selector": {}},
        "allowed": {
            "displayNames": ["Payments*"],
            "users": ["pay-*"],
            "fallbackTopics": ["payments-*"],
            "oidcGroups": ["terdut-payments-*"],
            "deletionPolicies": ["Delete"],
        }}]));
        let ok = spec(json!({
            "oidc": {"memberGroup": "terdut-payments-members"},
            "escalation": {"fallbackTopic": "payments-oncall", "levels": [
                {"timeout": "5m", "targets": [{"kind": "oncall"}, {"kind": "user", "username": "pay-alice"}]}]},
        }));
        assert_eq!(admitted(&a, "payments", &ok, 0), Admission::Admitted);
        let cases = [
            (
                json!({"deletionPolicy": "Orphan"}),
                "spec.deletionPolicy \"Orphan\" (allowed: Delete)",
            ),
            (
                json!({"displayName": "Platform"}),
                "spec.displayName \"Platform\" (allowed: Payments*)",
            ),
            (
                json!({"oidc": {"ownerGroup": "terdut-admins"}}),
                "spec.oidc.ownerGroup \"terdut-admins\"",
            ),
            (
                json!({"escalation": {"fallbackTopic": "ceo-phone", "levels": [
                    {"timeout": "5m", "targets": [{"kind": "oncall"}]}]}}),
                "spec.escalation.fallbackTopic \"ceo-phone\" (allowed: payments-*)",
            ),
            (
                json!({"escalation": {"levels": [
                    {"timeout": "5m", "targets": [{"kind": "oncall"}]},
                    {"timeout": "5m", "targets": [{"kind": "oncall"}, {"kind": "user", "username": "ceo"}]}]}}),
                "spec.escalation.levels[1].targets[1].username \"ceo\" (allowed: pay-*)",
            ),
        ];
        for (extra, want) in cases {
            match admitted(&a, "payments", &spec(extra.clone()), 0) {
                Admission::NotAllowed(m) => {
                    assert!(m.contains(want), "{m} lacks {want}");
                    assert!(
                        m.contains("policy \"tenants\" of TerdutServer shared/terdut"),
                        "{m}"
                    );
                }
                other => panic!("{extra} admitted: {other:?}"),
            }
        }
        let none = allowed(json!([{"name": "n", "namespaces": {"selector": {}},
            "allowed": {"users": []}}]));
        let asks = spec(json!({"escalation": {"levels": [
            {"timeout": "5m", "targets": [{"kind": "user", "username": "bob"}]}]}}));
        assert!(
            matches!(admitted(&none, "x", &asks, 0), Admission::NotAllowed(m) if m.contains("(allowed: none)"))
        );
        let oncall_only = spec(json!({"escalation": {"levels": [
            {"timeout": "5m", "targets": [{"kind": "oncall"}]}]}}));
        assert_eq!(admitted(&none, "x", &oncall_only, 0), Admission::Admitted);
    }

    #[test]
    fn the_oldest_teams_fill_the_limit() {
        let a =
            allowed(json!([{"name": "two", "namespaces": {"names": ["payments"]}, "maxTeams": 2}]));
        let s = spec(json!({}));
        assert_eq!(admitted(&a, "payments", &s, 0), Admission::Admitted);
        assert_eq!(admitted(&a, "payments", &s, 1), Admission::Admitted);
        match admitted(&a, "payments", &s, 2) {
            Admission::OverLimit(m) => assert!(
                m.contains("admits 2 TerdutTeams") && m.contains("2 older ones already name it"),
                "{m}"
            ),
            other => panic!("{other:?}"),
        }
        let applies = policy_for(&a, "shared", "payments", None);
        assert_eq!(
            admit(
                &server(),
                applies,
                Candidate {
                    spec: &s,
                    rank: None
                }
            ),
            Admission::Uncounted
        );
        let zero = allowed(
            json!([{"name": "none", "namespaces": {"names": ["payments"]}, "maxTeams": 0}]),
        );
        assert!(matches!(
            admitted(&zero, "payments", &s, 0),
            Admission::OverLimit(_)
        ));
    }

    #[test]
    fn an_orphan_the_policy_forbids_is_deleted_instead() {
        let a = allowed(json!([
            {"name": "keep", "namespaces": {"names": ["keep"]}},
            {"name": "strict", "namespaces": {"selector": {"matchLabels": {"tier": "tenant"}}},
             "allowed": {"deletionPolicies": ["Delete"]}},
        ]));
        let tenant = labels(&[("tier", "tenant")]);
        let of = |ns: &str, l: Option<&BTreeMap<String, String>>, r| {
            deletion(&a, policy_for(&a, "shared", ns, l), r)
        };
        assert_eq!(
            of("x", Some(&tenant), DeletionPolicy::Orphan),
            (DeletionPolicy::Delete, Some("strict".into()))
        );
        assert_eq!(
            of("keep", None, DeletionPolicy::Orphan),
            (DeletionPolicy::Orphan, None)
        );
        assert_eq!(
            of("x", Some(&tenant), DeletionPolicy::Delete),
            (DeletionPolicy::Delete, None)
        );
        assert_eq!(
            of("x", None, DeletionPolicy::Orphan),
            (DeletionPolicy::Delete, Some("strict".into())),
            "unknown labels: never a guessed orphan"
        );
        assert_eq!(
            of("shared", None, DeletionPolicy::Orphan),
            (DeletionPolicy::Orphan, None)
        );
    }
}
