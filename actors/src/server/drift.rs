//! Whether an owned object needs a server-side apply at all.
//!
//! After convergence a resync must make zero Kubernetes writes (docs/performance.md: a converged
//! operator writes nothing), and an apply of an unchanged object is still a write request. Two pure
//! checks decide instead:
//!
//! - **What we want changed**: the desired object's hash is stamped into its
//!   [`APPLIED_HASH_ANNOTATION`]; a different hash on the observed object means the spec (or the
//!   operator) changed, including a field we stopped setting, which only an apply removes.
//! - **Someone changed what we set**: every field of the desired object must be present with the
//!   same value in the observed one. Fields the API server defaulted or others set are ignored;
//!   in lists of objects, each desired element must match some observed element.
//!
//! A value the API server normalizes (a quantity `1000m` read back as `1`) reads as drift, so
//! such an object is re-applied on every pass. That apply is a no-op on the server (no new
//! resourceVersion, so no watch event and no hot loop), only not free.

use kube::Resource;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Annotation carrying the hash of what the operator last applied.
pub const APPLIED_HASH_ANNOTATION: &str = "terdut.ryuvia.com/applied-hash";

/// Returns `desired` with its hash in [`APPLIED_HASH_ANNOTATION`]. The hash covers the object
/// without that annotation, so stamping twice gives the same result.
pub fn stamp<K>(mut desired: K) -> K
where
    K: Resource + Serialize,
{
    if let Some(a) = desired.meta_mut().annotations.as_mut() {
        a.remove(APPLIED_HASH_ANNOTATION);
        if a.is_empty() {
            desired.meta_mut().annotations = None;
        }
    }
    let json = serde_json::to_vec(&desired).unwrap_or_default();
    let hash = hex::encode(Sha256::digest(&json))[..16].to_owned();
    desired
        .meta_mut()
        .annotations
        .get_or_insert_default()
        .insert(APPLIED_HASH_ANNOTATION.into(), hash);
    desired
}

/// True when `desired` (already [`stamp`]ed) must be applied over `observed`.
pub fn needs_apply<K>(desired: &K, observed: Option<&K>) -> bool
where
    K: Resource + Serialize,
{
    let Some(observed) = observed else {
        return true;
    };
    let hash = |k: &K| {
        k.meta()
            .annotations
            .as_ref()
            .and_then(|a| a.get(APPLIED_HASH_ANNOTATION))
            .cloned()
    };
    if hash(desired) != hash(observed) {
        return true;
    }
    match (
        serde_json::to_value(desired),
        serde_json::to_value(observed),
    ) {
        (Ok(d), Ok(o)) => !contains(&o, &d),
        _ => true,
    }
}

/// True when every field of `want` is in `have` with the same value.
fn contains(have: &Value, want: &Value) -> bool {
    match (have, want) {
        (_, Value::Null) => true,
        (Value::Object(h), Value::Object(w)) => w.iter().all(|(k, wv)| match h.get(k) {
            Some(hv) => contains(hv, wv),
            None => wv.is_null(),
        }),
        (Value::Array(h), Value::Array(w)) if w.iter().all(Value::is_object) => {
            w.iter().all(|wv| h.iter().any(|hv| contains(hv, wv)))
        }
        _ => have == want,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::deployment::deployment;
    use crate::server::names::tests::{byo_server, parent};
    use crate::server::rotation::RollTriggers;
    use crate::server::service::service;
    use k8s_openapi::api::apps::v1::Deployment;
    use serde_json::json;

    fn desired() -> Deployment {
        stamp(
            deployment(
                &parent(),
                &byo_server().spec,
                vec![],
                &RollTriggers::key("aaaa"),
            )
            .deployment,
        )
    }

    /// What the API server hands back: defaults filled in, status and bookkeeping added.
    fn as_read_back(d: &Deployment) -> Deployment {
        let mut v = serde_json::to_value(d).unwrap();
        v["metadata"]["resourceVersion"] = json!("42");
        v["metadata"]["generation"] = json!(1);
        v["spec"]["revisionHistoryLimit"] = json!(10);
        v["spec"]["strategy"] = json!({"type": "RollingUpdate"});
        let c = &mut v["spec"]["template"]["spec"]["containers"][0];
        c["terminationMessagePath"] = json!("/dev/termination-log");
        c["readinessProbe"]["timeoutSeconds"] = json!(1);
        v["spec"]["template"]["spec"]["dnsPolicy"] = json!("ClusterFirst");
        v["status"] = json!({"replicas": 2});
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn stamping_is_idempotent() {
        let a = desired();
        assert_eq!(stamp(a.clone()), a);
        let h = a.metadata.annotations.as_ref().unwrap()[APPLIED_HASH_ANNOTATION].clone();
        assert_eq!(h.len(), 16);
    }

    #[test]
    fn missing_object_needs_apply() {
        assert!(needs_apply(&desired(), None));
    }

    #[test]
    fn defaults_added_by_the_server_are_not_drift() {
        let d = desired();
        assert!(!needs_apply(&d, Some(&as_read_back(&d))));
        let s = stamp(service(&parent(), &byo_server().spec));
        let mut back = serde_json::to_value(&s).unwrap();
        back["spec"]["clusterIP"] = json!("10.0.0.7");
        back["spec"]["sessionAffinity"] = json!("None");
        let back = serde_json::from_value(back).unwrap();
        assert!(!needs_apply(&s, Some(&back)));
    }

    #[test]
    fn a_spec_change_needs_apply() {
        let d = desired();
        let old = as_read_back(&stamp(
            deployment(
                &parent(),
                &byo_server().spec,
                vec![],
                &RollTriggers::key("bbbb"),
            )
            .deployment,
        ));
        assert!(needs_apply(&d, Some(&old)));
    }

    #[test]
    fn an_edit_by_someone_else_needs_apply() {
        let d = desired();
        let mut edited = as_read_back(&d);
        edited.spec.replicas = Some(5);
        assert!(needs_apply(&d, Some(&edited)));
        let mut edited = as_read_back(&d);
        let pod = edited.spec.template.spec.as_mut().unwrap();
        pod.containers[0].image = Some("evil:latest".into());
        assert!(needs_apply(&d, Some(&edited)));
    }

    #[test]
    fn contains_semantics() {
        assert!(contains(&json!({"a": 1, "b": 2}), &json!({"a": 1})));
        assert!(!contains(&json!({"a": 1}), &json!({"a": 2})));
        assert!(!contains(&json!({}), &json!({"a": 1})));
        assert!(contains(
            &json!([{"n": 1, "x": 0}, {"n": 2}]),
            &json!([{"n": 2}])
        ));
        assert!(!contains(&json!([{"n": 1}]), &json!([{"n": 2}])));
        assert!(!contains(&json!(["ALL", "X"]), &json!(["ALL"])));
        assert!(contains(&json!(["ALL"]), &json!(["ALL"])));
    }
}
