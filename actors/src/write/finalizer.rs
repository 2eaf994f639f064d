//! The operator's finalizers (docs/design.md §5 "Finalizers"): added before the first call
//! that can create something on the server, released once it is deleted there (or provably
//! cannot exist any more). One policy for every kind: a merge patch of
//! `metadata.finalizers` carrying `metadata.resourceVersion`, so a finalizer another
//! controller added meanwhile is never dropped; on a conflict the object is read again once
//! and the patch recomputed, a second conflict is a (retryable) error.

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::Managed;
use crate::context::Ctx;
use crate::error::{KubeCall, ReconcileError};
use crate::key::ObjectKey;
use crate::kind::Written as Recorded;

/// Whether `object` carries `finalizer`.
pub fn has<K: ResourceExt>(object: &K, finalizer: &str) -> bool {
    object.finalizers().iter().any(|f| f == finalizer)
}

/// The patch that adds `finalizer` after the others; `None` when it is there.
pub fn adding<K: ResourceExt>(object: &K, finalizer: &str) -> Option<serde_json::Value> {
    if has(object, finalizer) {
        return None;
    }
    let mut list = object.finalizers().to_vec();
    list.push(finalizer.to_owned());
    Some(patch(object, list))
}

/// The patch that removes `finalizer` only; `None` when it is not there.
pub fn removing<K: ResourceExt>(object: &K, finalizer: &str) -> Option<serde_json::Value> {
    if !has(object, finalizer) {
        return None;
    }
    let list = object
        .finalizers()
        .iter()
        .filter(|f| *f != finalizer)
        .cloned()
        .collect();
    Some(patch(object, list))
}

fn patch<K: ResourceExt>(object: &K, finalizers: Vec<String>) -> serde_json::Value {
    json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": object.resource_version(),
    }})
}

/// Adds `finalizer` unless present. A 404 is an error here: the pass runs on a copy of an
/// object deleted before it got the finalizer, and must stop before it creates something on
/// the server no finalizer would ever delete (found by `just chaos`).
pub async fn add<K: Managed>(ctx: &Ctx, object: &K, finalizer: &str) -> Result<(), ReconcileError> {
    edit(ctx, object, finalizer, true).await
}

/// Releases `finalizer` (the object goes once nobody else holds it). A 404 is success.
pub async fn release<K: Managed>(
    ctx: &Ctx,
    object: &K,
    finalizer: &str,
) -> Result<(), ReconcileError> {
    edit(ctx, object, finalizer, false).await
}

async fn edit<K: Managed>(
    ctx: &Ctx,
    object: &K,
    finalizer: &str,
    adding_it: bool,
) -> Result<(), ReconcileError> {
    let key = ObjectKey::of(object);
    let api: Api<K> = Api::namespaced(ctx.kube.clone(), &key.namespace);
    let what = || format!("finalizers of {} {key}", K::KIND.resource());
    let mut current = object.clone();
    for attempt in 0..2 {
        let body = if adding_it {
            adding(&current, finalizer)
        } else {
            removing(&current, finalizer)
        };
        let Some(body) = body else {
            return Ok(());
        };
        ctx.metrics.kube_write(K::KIND.label(), "finalizer");
        match api
            .patch(&key.name, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            Ok(after) => {
                ctx.own_writes
                    .record(Recorded::Object(K::KIND), &key, after.resource_version());
                return Ok(());
            }
            Err(kube::Error::Api(e)) if e.code == 404 && !adding_it => return Ok(()),
            // The copy was older than the object: read it again once and recompute.
            Err(kube::Error::Api(e)) if e.code == 409 && attempt == 0 => {
                match api.get_opt(&key.name).await {
                    Ok(Some(live)) if live.uid() == object.uid() => current = live,
                    Ok(_) if !adding_it => return Ok(()),
                    Ok(_) => {
                        return Err(ReconcileError::Invalid(format!(
                            "{} {key} was replaced while its finalizer was added",
                            K::KIND.resource()
                        )));
                    }
                    Err(e) => {
                        return Err(ReconcileError::kube(KubeCall::ReadForFinalizer, what(), e));
                    }
                }
            }
            Err(e) => return Err(ReconcileError::kube(KubeCall::PatchFinalizer, what(), e)),
        }
    }
    Err(ReconcileError::Conflict(what()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use terdut_crds::v1alpha1::TerdutTeam;

    fn team(finalizers: &[&str]) -> TerdutTeam {
        serde_json::from_value(json!({
            "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutTeam",
            "metadata": {"name": "t", "namespace": "ns", "resourceVersion": "17",
                         "finalizers": finalizers},
            "spec": {"serverRef": {"name": "s"}, "displayName": "T"},
        }))
        .unwrap()
    }

    const F: &str = "terdut.ryuvia.com/team-cleanup";

    #[test]
    fn adds_after_others_with_a_resource_version_precondition() {
        let p = adding(&team(&["other.io/keep"]), F).unwrap();
        assert_eq!(
            p,
            json!({"metadata": {"finalizers": ["other.io/keep", F], "resourceVersion": "17"}})
        );
        assert_eq!(adding(&team(&[F]), F), None);
    }

    #[test]
    fn removes_only_its_own() {
        let p = removing(&team(&["other.io/keep", F]), F).unwrap();
        assert_eq!(p["metadata"]["finalizers"], json!(["other.io/keep"]));
        let p = removing(&team(&[F]), F).unwrap();
        assert_eq!(p["metadata"]["finalizers"], json!([]));
        assert_eq!(removing(&team(&["other.io/keep"]), F), None);
    }
}
