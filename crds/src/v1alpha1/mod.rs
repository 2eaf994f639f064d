//! `terdut.ryuvia.com/v1alpha1` (docs/design.md §3, §4). Every field of the schema carries a
//! description, which `kubectl explain` shows: written for a cluster's users, so it cites no
//! document of this repository (tests/descriptions.rs).

pub mod alert_source;
pub mod common;
pub mod conditions;
pub mod policy;
pub mod reason;
pub mod server;
pub mod team;
pub mod tenant_policy;

pub use alert_source::{
    AlertSourceKind, TerdutAlertSource, TerdutAlertSourceSpec, TerdutAlertSourceStatus,
};
pub use common::{AppliedChanges, LocalObjectRef, SecretKeyRef};
pub use policy::{DeletionPolicy, Management};
pub use reason::Reason;
pub use server::{TerdutServer, TerdutServerSpec, TerdutServerStatus};
pub use team::{TerdutTeam, TerdutTeamSpec, TerdutTeamStatus};
pub use tenant_policy::{AllowedValues, PolicyNamespaces, TeamPolicy};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSON, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use kube::CustomResourceExt;

/// Every CRD of this version, in the order they are documented (docs/design.md §3), with the schema
/// post-processing of [`tidy_schema`] applied.
pub fn crds() -> Vec<CustomResourceDefinition> {
    let mut all = vec![
        TerdutServer::crd(),
        TerdutTeam::crd(),
        TerdutAlertSource::crd(),
    ];
    for crd in &mut all {
        for version in &mut crd.spec.versions {
            if let Some(schema) = version
                .schema
                .as_mut()
                .and_then(|s| s.open_api_v3_schema.as_mut())
            {
                tidy_schema(schema);
            }
        }
    }
    all
}

/// Three rewrites of the derived schema:
/// - `nullable: true` is dropped everywhere: an explicit `null` is then pruned by the API server
///   like an absent field, so `has(...)` in the CEL rules means "set to a value" and a gitops
///   tool writing `dsn: null` cannot slip past the exactly-one-of rules.
/// - Descriptions inside the corev1 passthrough types under `spec.pod` are cut to their first
///   sentence (their own field descriptions stay whole), as controller-gen's `maxDescLen`
///   does: Kubernetes' full documentation would make the TerdutServer CRD ~250 KB, past what
///   client-side `kubectl apply` can annotate, and the first sentence says what a field is.
/// - `status` defaults to `{observedGeneration: -1}` ([`default_status`]).
fn tidy_schema(schema: &mut JSONSchemaProps) {
    strip_nullable(schema);
    default_status(schema);
    if let Some(pod) = schema
        .properties
        .as_mut()
        .and_then(|p| p.get_mut("spec"))
        .and_then(|spec| spec.properties.as_mut())
        .and_then(|p| p.get_mut("pod"))
        .and_then(|pod| pod.properties.as_mut())
    {
        for field in pod.values_mut() {
            if field.properties.is_some() || field.items.is_some() {
                shorten_nested_descriptions(field);
            }
        }
    }
}

/// The status of an object no pass has seen yet, as the API server serves it: an
/// `observedGeneration` of -1, behind any `metadata.generation`, so kstatus (Flux's `wait`,
/// Helm's, kpt) and the Argo CD health checks read "in progress" from the moment it exists
/// instead of "current" (kstatus counts an object without conditions as current). Flux's own
/// kinds do the same (docs/design.md §7).
fn default_status(schema: &mut JSONSchemaProps) {
    if let Some(status) = schema.properties.as_mut().and_then(|p| p.get_mut("status")) {
        status.default = Some(JSON(serde_json::json!({"observedGeneration": -1})));
    }
}

fn children(s: &mut JSONSchemaProps) -> Vec<&mut JSONSchemaProps> {
    let mut out: Vec<&mut JSONSchemaProps> = vec![];
    if let Some(p) = s.properties.as_mut() {
        out.extend(p.values_mut());
    }
    if let Some(JSONSchemaPropsOrArray::Schema(i)) = s.items.as_mut() {
        out.push(i);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(a)) = s.additional_properties.as_mut() {
        out.push(a);
    }
    for list in [s.all_of.as_mut(), s.any_of.as_mut(), s.one_of.as_mut()]
        .into_iter()
        .flatten()
    {
        out.extend(list.iter_mut());
    }
    out
}

fn strip_nullable(s: &mut JSONSchemaProps) {
    s.nullable = None;
    for c in children(s) {
        strip_nullable(c);
    }
}

fn shorten_nested_descriptions(s: &mut JSONSchemaProps) {
    for c in children(s) {
        c.description = c.description.as_deref().map(first_sentence);
        shorten_nested_descriptions(c);
    }
}

/// The longest description [`first_sentence`] keeps.
const MAX_SHORT_DESCRIPTION: usize = 200;

/// The first sentence of `text` (up to a period followed by a space, not one of "e.g." or
/// "i.e."), whitespace collapsed, at most [`MAX_SHORT_DESCRIPTION`] characters (cut at a word,
/// with an ellipsis).
pub(crate) fn first_sentence(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut out = String::new();
    for w in words {
        if !out.is_empty() {
            out.push(' ');
        }
        if out.chars().count() + w.chars().count() > MAX_SHORT_DESCRIPTION {
            let cut = out.trim_end().to_owned();
            return format!("{cut}…");
        }
        out.push_str(w);
        // "(e.g." and "(i.e." too: Kubernetes' texts open asides with them.
        let abbreviation = matches!(
            w.trim_start_matches(['(', '[', '"', '`']),
            "e.g." | "i.e." | "etc." | "vs."
        );
        if w.ends_with('.') && !abbreviation {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::first_sentence;

    #[test]
    fn first_sentence_stops_at_a_period_but_not_at_an_abbreviation() {
        assert_eq!(
            first_sentence("Describes node affinity.\n More info: https://example.com."),
            "Describes node affinity."
        );
        assert_eq!(
            first_sentence("A label key, e.g. `zone`. Then more."),
            "A label key, e.g. `zone`."
        );
        assert_eq!(
            first_sentence("Pod affinity rules (e.g. co-locate this pod). More."),
            "Pod affinity rules (e.g. co-locate this pod)."
        );
        assert_eq!(first_sentence("no period at all"), "no period at all");
        let long = "word ".repeat(100);
        let short = first_sentence(&long);
        assert!(
            short.ends_with('…') && short.chars().count() <= 201,
            "{short}"
        );
    }
}
