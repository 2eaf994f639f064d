//! Every Kubernetes write of a TerdutAlertSource pass: the finalizer, the webhook Secret (create,
//! or replace only when this object controls it), the rotation record, status and Events.
//!
//! Nothing here logs or returns a Secret's data: errors carry the object's name and the API's
//! own error, which never echoes `data`.

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use serde_json::json;
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutAlertSourceStatus};

use super::names::{ANNOTATION_ROTATE, ANNOTATION_ROTATED_FOR, FINALIZER};
use super::secret::{controlled_by, refill, webhook_secret};
use crate::api::CreatedIntegration;
use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::key::ObjectKey;
use crate::server::names::FIELD_MANAGER;

const KIND: &str = "source";
/// The `OwnWrites` kind of webhook Secrets (keyed by the Secret's own namespace and name).
const SECRET_KIND: &str = "secret";

/// Publishes an Event about the TerdutAlertSource. The note must never carry a url or key.
pub async fn event(
    ctx: &Ctx,
    source: &TerdutAlertSource,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
) {
    ctx.events
        .publish(&source.object_ref(&()), type_, reason, action, note)
        .await;
}

fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    }
}

fn sources(ctx: &Ctx, key: &ObjectKey) -> Api<TerdutAlertSource> {
    Api::namespaced(ctx.kube.clone(), &key.namespace)
}

/// Sets `finalizers` with the object's resourceVersion as a precondition, so a concurrent
/// change to the list is never clobbered; on a conflict (a lagging cache) it re-reads once.
async fn set_finalizers(
    ctx: &Ctx,
    source: &TerdutAlertSource,
    adding: bool,
    edit: impl Fn(&mut Vec<String>) -> bool,
) -> Result<(), ReconcileError> {
    let key = ObjectKey::of(source);
    let api = sources(ctx, &key);
    let what = || format!("finalizers of TerdutAlertSource {key}");
    let mut current = source.clone();
    for attempt in 0..2 {
        let mut finalizers = current.finalizers().to_vec();
        if !edit(&mut finalizers) {
            return Ok(());
        }
        let patch = json!({"metadata": {
            "finalizers": finalizers,
            "resourceVersion": current.resource_version(),
        }});
        ctx.metrics.kube_write(KIND, "finalizer");
        match api
            .patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(written) => {
                ctx.own_writes
                    .record(KIND, &key, written.resource_version());
                return Ok(());
            }
            // Gone already: nothing holds it any more. Not when adding: the pass runs on a copy
            // of an object deleted before it got the finalizer, and must stop before its POST
            // makes an integration no finalizer would delete (found by `just chaos`).
            Err(kube::Error::Api(e)) if e.code == 404 && !adding => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 && attempt == 0 => {
                current = api
                    .get(&key.name)
                    .await
                    .map_err(|e| ReconcileError::kube("get", what(), e))?;
            }
            Err(e) => return Err(ReconcileError::kube("patch", what(), e)),
        }
    }
    Ok(())
}

/// Adds [`FINALIZER`] unless present. Called before any POST, so no integration can exist
/// that the object's deletion would not clean up.
pub async fn ensure_finalizer(ctx: &Ctx, source: &TerdutAlertSource) -> Result<(), ReconcileError> {
    set_finalizers(ctx, source, true, |f| {
        if f.iter().any(|x| x == FINALIZER) {
            return false;
        }
        f.push(FINALIZER.to_owned());
        true
    })
    .await
}

/// Removes [`FINALIZER`]: the object goes once nobody else holds it.
pub async fn release_finalizer(
    ctx: &Ctx,
    source: &TerdutAlertSource,
) -> Result<(), ReconcileError> {
    set_finalizers(ctx, source, false, |f| {
        let before = f.len();
        f.retain(|x| x != FINALIZER);
        f.len() != before
    })
    .await
}

/// Writes `created`'s url and key into the webhook Secret, in the step that created them.
/// `found` is the Secret as observed (controlled by this object) or `None`: a new Secret is
/// created, never applied over a Secret of someone else; an existing one of ours is replaced
/// (with its resourceVersion, re-read on a conflict).
pub async fn write_secret(
    ctx: &Ctx,
    source: &TerdutAlertSource,
    found: Option<&Secret>,
    created: &CreatedIntegration,
    rotated_for: Option<&str>,
) -> Result<(), ReconcileError> {
    let invalid = |e: super::secret::MissingMetadata| ReconcileError::Invalid(e.to_string());
    let ns = source.namespace().unwrap_or_default();
    let api: Api<Secret> = Api::namespaced(ctx.kube.clone(), &ns);
    let fresh = webhook_secret(source, created, rotated_for).map_err(invalid)?;
    let name = fresh.name_any();
    let what = || format!("Secret {ns}/{name}");
    let uid = source.uid().unwrap_or_default();
    let mut current = found.cloned();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let result = match current.take() {
            None => {
                ctx.metrics.kube_write(KIND, "create");
                api.create(&post_params(), &fresh).await
            }
            Some(existing) => {
                let next = refill(existing, source, created, rotated_for).map_err(invalid)?;
                ctx.metrics.kube_write(KIND, "replace");
                api.replace(&name, &post_params(), &next).await
            }
        };
        match result {
            Ok(written) => {
                // Its watch event is this pass's own write, no reason for another (issue 8).
                ctx.own_writes.record(
                    SECRET_KIND,
                    &ObjectKey::new(ns.clone(), name.clone()),
                    written.resource_version(),
                );
                return Ok(());
            }
            // Created meanwhile, or changed since it was read: look again; ours is replaced,
            // anyone else's is left alone.
            Err(kube::Error::Api(e)) if e.code == 409 && attempt < 3 => {
                let live = api
                    .get_opt(&name)
                    .await
                    .map_err(|e| ReconcileError::kube("get", what(), e))?;
                match live {
                    Some(s) if controlled_by(&s, &uid) => current = Some(s),
                    // Someone else's: never overwritten. The conflict is retried, and the next
                    // pass reports WebhookSecretConflict before it would POST again.
                    Some(_) => {
                        return Err(ReconcileError::kube("create", what(), kube::Error::Api(e)));
                    }
                    None => current = None,
                }
            }
            Err(e) => return Err(ReconcileError::kube("write", what(), e)),
        }
    }
}

/// Records on the object that the rotate value `value` was handled; survives a lost Secret, so
/// an old value never mints a key again.
pub async fn record_rotation(
    ctx: &Ctx,
    source: &TerdutAlertSource,
    value: &str,
) -> Result<(), ReconcileError> {
    if source
        .annotations()
        .get(ANNOTATION_ROTATED_FOR)
        .map(String::as_str)
        == Some(value)
    {
        return Ok(());
    }
    let key = ObjectKey::of(source);
    let patch = json!({"metadata": {"annotations": {ANNOTATION_ROTATED_FOR: value}}});
    ctx.metrics.kube_write(KIND, "annotate");
    sources(ctx, &key)
        .patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|e| ReconcileError::kube("annotate", format!("TerdutAlertSource {key}"), e))
}

/// Writes a status patch from `status::status_patch`.
/// Returns the status as written.
pub async fn patch_status(
    ctx: &Ctx,
    key: &ObjectKey,
    patch: &serde_json::Value,
) -> Result<Option<TerdutAlertSourceStatus>, ReconcileError> {
    ctx.metrics.kube_write(KIND, "status");
    let written = sources(ctx, key)
        .patch_status(&key.name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(|e| {
            ReconcileError::kube("patch status of", format!("TerdutAlertSource {key}"), e)
        })?;
    ctx.own_writes.record(KIND, key, written.resource_version());
    Ok(written.status)
}

/// Who set the rotate annotation: the field manager that owns it in `managedFields` (the
/// informer cache strips them, so this reads the object). `None` when it cannot be told.
pub async fn rotation_requester(ctx: &Ctx, key: &ObjectKey) -> Option<String> {
    let source = sources(ctx, key).get(&key.name).await.ok()?;
    let field = format!("f:{ANNOTATION_ROTATE}");
    source
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| {
            m.fields_v1
                .as_ref()
                .is_some_and(|f| f.0["f:metadata"]["f:annotations"].get(&field).is_some())
        })
        .max_by_key(|m| m.time.as_ref().map(|t| t.0))
        .and_then(|m| m.manager.clone())
}
