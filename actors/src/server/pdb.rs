//! The optional PodDisruptionBudget (docs/design.md §4.1, §7).
//!
//! It exists only while `spec.pod.disruptionBudget` is set: `None` here tells the caller to delete
//! any PDB it created earlier (docs/design.md §7: "the controller deletes it itself when the field
//! is cleared"; owner references alone would keep it until the server is deleted).

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use terdut_crds::v1alpha1::TerdutServerSpec;

use super::names::{Parent, labels, pdb_name, selector_labels};

/// The PDB selecting this server's pods, or `None` when the spec asks for none.
/// `minAvailable` and `maxUnavailable` are passed as given: the CRD's CEL rule guarantees
/// exactly one of them.
pub fn pdb(parent: &Parent, spec: &TerdutServerSpec) -> Option<PodDisruptionBudget> {
    let budget = spec.pod.disruption_budget.as_ref()?;
    Some(PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some(pdb_name(&parent.name)),
            namespace: Some(parent.namespace.clone()),
            labels: Some(labels(&parent.name)),
            owner_references: Some(vec![parent.owner.clone()]),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            selector: Some(LabelSelector {
                match_labels: Some(selector_labels(&parent.name)),
                match_expressions: None,
            }),
            min_available: budget.min_available.clone(),
            max_unavailable: budget.max_unavailable.clone(),
            ..Default::default()
        }),
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::names::tests::{byo_server, parent, server};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use serde_json::json;

    fn with_budget(b: serde_json::Value) -> TerdutServerSpec {
        server(json!({"database": {"dsn": "postgres://x"}, "pod": {"disruptionBudget": b}})).spec
    }

    #[test]
    fn no_budget_means_no_pdb() {
        assert_eq!(pdb(&parent(), &byo_server().spec), None);
    }

    #[test]
    fn min_available_selects_the_server_pods() {
        let p = pdb(&parent(), &with_budget(json!({"minAvailable": 1}))).unwrap();
        assert_eq!(p.metadata.name.as_deref(), Some("terdut"));
        assert_eq!(p.metadata.owner_references, Some(vec![parent().owner]));
        let spec = p.spec.unwrap();
        assert_eq!(
            spec.selector.unwrap().match_labels,
            Some(selector_labels("terdut"))
        );
        assert_eq!(spec.min_available, Some(IntOrString::Int(1)));
        assert_eq!(spec.max_unavailable, None);
    }

    #[test]
    fn max_unavailable_percent_passes_through() {
        let p = pdb(&parent(), &with_budget(json!({"maxUnavailable": "50%"}))).unwrap();
        let spec = p.spec.unwrap();
        assert_eq!(
            spec.max_unavailable,
            Some(IntOrString::String("50%".into()))
        );
        assert_eq!(spec.min_available, None);
    }
}
