//! Cross-namespace consent (docs/design.md §4.6), as a pure decision: may a TerdutTeam in
//! `team_namespace` attach to a TerdutServer in `server_namespace` given its `allowedTeams` and
//! the team namespace's labels? Same-namespace teams never consult `allowedTeams`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use terdut_crds::v1alpha1::server::{AllowedTeams, FromNamespaces};

/// The answer, with a message a user can act on when refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Consent {
    Allowed,
    Refused(String),
}

/// Decides consent. `namespace_labels` is `None` when the team's namespace could not be read
/// (only consulted for `from: Selector`; unknown labels refuse, never allow).
pub fn decide(
    server_namespace: &str,
    server_name: &str,
    allowed: &AllowedTeams,
    team_namespace: &str,
    namespace_labels: Option<&BTreeMap<String, String>>,
) -> Consent {
    if server_namespace == team_namespace {
        return Consent::Allowed;
    }
    let refused = |why: &str| {
        Consent::Refused(format!(
            "TerdutServer {server_namespace}/{server_name} does not allow TerdutTeams from namespace \
             {team_namespace}: {why}"
        ))
    };
    match allowed.namespaces.from {
        FromNamespaces::All => Consent::Allowed,
        FromNamespaces::None | FromNamespaces::Same => refused(
            "its spec.allowedTeams.namespaces.from only admits its own namespace; its owner can set \
             from: All or from: Selector",
        ),
        FromNamespaces::Selector => match (&allowed.namespaces.selector, namespace_labels) {
            (Some(sel), Some(labels)) if selector_matches(sel, labels) => Consent::Allowed,
            (Some(_), Some(_)) => {
                refused("the namespace's labels do not match spec.allowedTeams.namespaces.selector")
            }
            (Some(_), None) => refused("the namespace's labels could not be read"),
            (None, _) => refused("spec.allowedTeams.namespaces.selector is empty"),
        },
    }
}

/// `metav1.LabelSelector` semantics: every matchLabels pair and every expression must hold.
pub fn selector_matches(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let labels_ok = sel
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let exprs_ok = sel.match_expressions.iter().flatten().all(|e| {
        let values = e.values.clone().unwrap_or_default();
        let got = labels.get(&e.key);
        match e.operator.as_str() {
            "In" => got.is_some_and(|v| values.contains(v)),
            "NotIn" => got.is_none_or(|v| !values.contains(v)),
            "Exists" => got.is_some(),
            "DoesNotExist" => got.is_none(),
            // An operator Kubernetes would have refused: match nothing rather than everything.
            _ => false,
        }
    });
    labels_ok && exprs_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
    use terdut_crds::v1alpha1::server::AllowedNamespaces;

    fn allowed(from: FromNamespaces, selector: Option<LabelSelector>) -> AllowedTeams {
        AllowedTeams {
            namespaces: AllowedNamespaces { from, selector },
            ..Default::default()
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn sel(k: &str, v: &str) -> LabelSelector {
        LabelSelector {
            match_labels: Some(labels(&[(k, v)])),
            ..Default::default()
        }
    }

    #[test]
    fn same_namespace_is_always_allowed() {
        for from in [
            FromNamespaces::None,
            FromNamespaces::Same,
            FromNamespaces::Selector,
        ] {
            assert_eq!(
                decide("a", "s", &allowed(from, None), "a", None),
                Consent::Allowed
            );
        }
    }

    #[test]
    fn none_and_same_refuse_other_namespaces() {
        for from in [FromNamespaces::None, FromNamespaces::Same] {
            let c = decide("a", "s", &allowed(from, None), "b", Some(&labels(&[])));
            assert!(
                matches!(c, Consent::Refused(m) if m.contains("a/s") && m.contains("namespace b"))
            );
        }
    }

    #[test]
    fn all_allows_everyone() {
        assert_eq!(
            decide("a", "s", &allowed(FromNamespaces::All, None), "b", None),
            Consent::Allowed
        );
    }

    #[test]
    fn selector_follows_labels() {
        let a = allowed(FromNamespaces::Selector, Some(sel("team", "yes")));
        assert_eq!(
            decide("a", "s", &a, "b", Some(&labels(&[("team", "yes")]))),
            Consent::Allowed
        );
        assert!(matches!(
            decide("a", "s", &a, "b", Some(&labels(&[("team", "no")]))),
            Consent::Refused(_)
        ));
        assert!(
            matches!(decide("a", "s", &a, "b", None), Consent::Refused(m) if m.contains("could not be read"))
        );
    }

    #[test]
    fn expressions() {
        let req = |op: &str, vals: &[&str]| LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "env".into(),
                operator: op.into(),
                values: Some(vals.iter().map(|s| s.to_string()).collect()),
            }]),
            ..Default::default()
        };
        let prod = labels(&[("env", "prod")]);
        let none = labels(&[]);
        assert!(selector_matches(&req("In", &["prod", "stage"]), &prod));
        assert!(!selector_matches(&req("In", &["stage"]), &prod));
        assert!(!selector_matches(&req("NotIn", &["prod"]), &prod));
        assert!(selector_matches(&req("NotIn", &["prod"]), &none));
        assert!(selector_matches(&req("Exists", &[]), &prod));
        assert!(!selector_matches(&req("DoesNotExist", &[]), &prod));
        assert!(!selector_matches(&req("Bogus", &[]), &prod));
    }
}
