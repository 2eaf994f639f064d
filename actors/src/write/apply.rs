//! Server-side apply of the objects a TerdutServer owns, with the one field manager, and never
//! without a precondition on which object it lands (docs/security.md "Never adopt an existing
//! install").
//!
//! A forced apply takes every field it sets from whoever had it, and an apply of a name that
//! does not exist creates it. Without a precondition, an apply meant to create the Service would
//! instead take over one someone made a moment earlier (after the live read that found the name
//! free), and one meant to update ours would take over a replacement. So:
//!
//! - **to create**, a POST: `AlreadyExists` is the answer when one appeared meanwhile, and
//!   nothing is written over it. The POST records its fields under an `Update` entry of the
//!   field manager, which would keep every field it set alive through later applies (an apply
//!   removes a field it no longer sets only when no other entry owns it: measured against the
//!   kube-apiserver). A merge patch right after turns exactly that entry into an `Apply` entry
//!   (the list of entries replaced whole, as client-go's `csaupgrade` rewrites them), guarded by
//!   the resourceVersion it was read at: the POST's answer, read again on a conflict (the
//!   Deployment controller writes a new Deployment at once), and, should that still fail,
//!   before the next apply;
//! - **to update**, a forced apply carrying `metadata.uid`: the uid of the object the caller
//!   read live and found controlled by its TerdutServer. The API server refuses an apply whose
//!   uid differs from the stored object's (422, uids are immutable) or names an object that is
//!   not there (409), so a replacement is never written over.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::NamespaceResourceScope;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::context::Ctx;
use crate::error::{KubeCall, ReconcileError};
use crate::kind::Kind;

pub use crate::names::FIELD_MANAGER;

/// Which object a write may land on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Target<'a> {
    /// None exists: create it, or fail if one appeared meanwhile.
    Create,
    /// The object read live (its metadata) and found to be ours.
    Existing(&'a ObjectMeta),
}

/// How an apply ended, besides success.
#[derive(Debug)]
pub enum ApplyError {
    /// The object is not the one the precondition named any more (one appeared where none
    /// was, or it was replaced): look again, never write over it.
    Precondition,
    Failed(ReconcileError),
}

/// PURE: `object` carrying `uid` as the precondition of an apply.
pub fn guarded<K: Resource + Clone>(object: &K, uid: &str) -> K {
    let mut object = object.clone();
    object.meta_mut().uid = Some(uid.to_owned());
    object
}

/// PURE: the merge patch that turns the field manager's `Update` entry (made by a POST) into
/// an `Apply` entry, only on the version `meta` was read at; `None` when there is none.
pub fn upgrade_patch(meta: &ObjectMeta) -> Option<serde_json::Value> {
    let mut entries = meta.managed_fields.clone().unwrap_or_default();
    let ours = entries.iter_mut().find(|m| {
        m.manager.as_deref() == Some(FIELD_MANAGER) && m.operation.as_deref() == Some("Update")
    })?;
    ours.operation = Some("Apply".into());
    Some(serde_json::json!({"metadata": {
        "resourceVersion": meta.resource_version,
        "managedFields": entries,
    }}))
}

/// PURE: whether an API error is a precondition of [`apply`] refusing the write: a
/// conflict (an object that appeared, a uid no object has), or the uid that is immutable.
pub fn is_precondition(e: &kube::core::Status) -> bool {
    let uid_refused = e
        .details
        .as_ref()
        .is_some_and(|d| d.causes.iter().any(|c| c.field == "metadata.uid"))
        || e.message.contains("metadata.uid");
    e.code == 409 || (e.code == 422 && uid_refused)
}

/// Writes `object` in `namespace` on `target` only: created with a POST, or applied taking the
/// fields it sets (`force`: the operator owns them on an object it controls). `kind` labels the
/// write metric.
pub async fn apply<K>(
    ctx: &Ctx,
    kind: Kind,
    namespace: &str,
    object: &K,
    target: Target<'_>,
) -> Result<(), ApplyError>
where
    K: kube::Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Serialize
        + DeserializeOwned
        + std::fmt::Debug,
{
    let name = object.name_any();
    let api: Api<K> = Api::namespaced(ctx.kube.clone(), namespace);
    let what = || format!("{} {namespace}/{name}", K::kind(&()));
    let uid = match target {
        Target::Existing(meta) => {
            // A create whose entry could not be made the apply's yet (its object kept
            // changing): now, before an apply that may drop a field.
            upgrade(ctx, kind, &api, &name, meta.clone()).await;
            meta.uid.as_deref().unwrap_or_default()
        }
        Target::Create => {
            ctx.metrics.kube_write(kind.label(), "create");
            let pp = PostParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            };
            let created = match api.create(&pp, object).await {
                Ok(created) => created,
                Err(kube::Error::Api(e)) if e.code == 409 => return Err(ApplyError::Precondition),
                Err(e) => {
                    return Err(ApplyError::Failed(ReconcileError::kube(
                        KubeCall::CreateApplied,
                        what(),
                        e,
                    )));
                }
            };
            upgrade(ctx, kind, &api, &name, created.meta().clone()).await;
            return Ok(());
        }
    };
    ctx.metrics.kube_write(kind.label(), "apply");
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    match api
        .patch(&name, &pp, &Patch::Apply(guarded(object, uid)))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if is_precondition(&e) => Err(ApplyError::Precondition),
        Err(e) => Err(ApplyError::Failed(ReconcileError::kube(
            KubeCall::Apply,
            what(),
            e,
        ))),
    }
}

/// How often [`upgrade`] tries after a conflict, and its first pause: the Deployment
/// controller writes a new Deployment several times in its first second (revision annotation,
/// then status), and on a loaded machine three immediate retries all lost to it, leaving the
/// `Update` entry until the object's next pass. The pauses double: about 3 s in all.
const UPGRADE_TRIES: u32 = 6;
const UPGRADE_FIRST_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);

/// Makes the field manager's `Update` entry of the object `name` (as `meta` shows it) its
/// `Apply` entry; a conflict (another writer, e.g. the Deployment controller's revision
/// annotation right after a create) reads the object again and retries after a pause, as long
/// as it is the same object. A failure is logged: the object stays ours, and the next apply
/// tries again before it writes.
async fn upgrade<K>(ctx: &Ctx, kind: Kind, api: &Api<K>, name: &str, mut meta: ObjectMeta)
where
    K: kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    for attempt in 0..UPGRADE_TRIES {
        if attempt > 0 {
            tokio::time::sleep(UPGRADE_FIRST_PAUSE * (1 << (attempt - 1))).await;
        }
        let Some(patch) = upgrade_patch(&meta) else {
            return;
        };
        ctx.metrics.kube_write(kind.label(), "patch");
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return,
            Err(kube::Error::Api(e)) if e.code == 409 => match api.get_metadata_opt(name).await {
                Ok(Some(fresh)) if fresh.metadata.uid == meta.uid => meta = fresh.metadata,
                _ => return,
            },
            Err(e) => {
                tracing::warn!(object = %name, error = %e, "could not make the created object's fields the apply's");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Service;

    #[test]
    fn every_apply_names_the_object_it_may_land_on() {
        let svc = Service::default();
        assert_eq!(guarded(&svc, "u-1").metadata.uid.as_deref(), Some("u-1"));
    }

    #[test]
    fn only_the_operators_update_entry_becomes_an_apply_entry_on_that_version() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
        let entry = |manager: &str, op: &str| ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some(op.into()),
            ..Default::default()
        };
        let mut svc = Service::default();
        svc.metadata.resource_version = Some("41".into());
        svc.metadata.managed_fields = Some(vec![
            entry("kube-controller-manager", "Update"),
            entry(FIELD_MANAGER, "Update"),
        ]);
        let p = upgrade_patch(&svc.metadata).unwrap();
        assert_eq!(p["metadata"]["resourceVersion"], "41");
        let ops: Vec<_> = p["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["manager"].clone(), e["operation"].clone()))
            .collect();
        assert_eq!(
            ops,
            [
                ("kube-controller-manager".into(), "Update".into()),
                (FIELD_MANAGER.into(), "Apply".into())
            ]
        );
        svc.metadata.managed_fields = Some(vec![entry(FIELD_MANAGER, "Apply")]);
        assert_eq!(upgrade_patch(&svc.metadata), None);
    }

    #[test]
    fn a_refused_precondition_is_told_from_an_invalid_object() {
        let e = |code, message: &str| kube::core::Status {
            code,
            message: message.into(),
            ..Default::default()
        };
        assert!(is_precondition(&e(409, "conflict")));
        assert!(is_precondition(&e(
            422,
            "Service \"terdut\" is invalid: metadata.uid: Invalid value: \"0000\": field is immutable"
        )));
        assert!(!is_precondition(&e(
            422,
            "Deployment \"terdut\" is invalid: spec.template.spec.containers[0].image: Required value"
        )));
    }
}
