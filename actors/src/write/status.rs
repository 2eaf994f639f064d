//! Writing a status: only when it changed, never on a stale copy's word, recorded as our own.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};

use super::shared::{Shared, diff, overlay};
use super::{Conditioned, Managed};
use crate::context::Ctx;
use crate::error::{KubeCall, ReconcileError};
use crate::key::ObjectKey;
use crate::kind::Written as Recorded;

/// The status patch a kind computes, pure: `None` when `desired` shows nothing new over
/// `current`.
pub type PatchFn<S, D> = fn(Option<&S>, &D, Time) -> Option<serde_json::Value>;

/// Writes the status of `object` when it changed: the kind's part `desired` (`None`: left as
/// it is, e.g. while paused) and the part every kind shares (`shared`: the Paused condition,
/// the plan, the last applied changes). `written` is the status this runtime last wrote for
/// the object (see [`stale_but_equal`]); it is updated. A 404 (the object was deleted
/// meanwhile) is not an error.
pub async fn write<K: Managed, D>(
    ctx: &Ctx,
    object: &K,
    desired: Option<&D>,
    patch: PatchFn<K::Status, D>,
    written: &mut Option<K::Status>,
    shared: &Shared,
) -> Result<(), ReconcileError> {
    let now = ctx.clock.k8s_now();
    let current = object.status();
    let generation = object.meta().generation;
    let body_over = |base: Option<&K::Status>| {
        body(
            base,
            desired,
            patch,
            shared,
            K::KIND.resource(),
            generation,
            &now,
        )
    };
    let body = body_over(current)
        .or_else(|| stale_but_equal(current, written).and_then(|w| body_over(Some(w))));
    let Some(body) = body else {
        return Ok(());
    };
    let key = ObjectKey::of(object);
    let api: Api<K> = Api::namespaced(ctx.kube.clone(), &key.namespace);
    ctx.metrics.kube_write(K::KIND.label(), "status");
    match api
        .patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&body))
        .await
    {
        Ok(after) => {
            ctx.own_writes
                .record(Recorded::Object(K::KIND), &key, after.resource_version());
            *written = after.into_status();
            Ok(())
        }
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(ReconcileError::kube(
            KubeCall::WriteStatus,
            format!("{} {key}", K::KIND.resource()),
            e,
        )),
    }
}

/// Writes `patch`, a merge patch of the status of `key`'s object, as it is: for a report made
/// outside a pass (the supervisor parking a crash-looping actor, `crash_loop.rs`), which has no
/// copy of its own to compare with. `label` labels the write metric.
pub async fn merge<K: Conditioned>(
    ctx: &Ctx,
    label: &'static str,
    key: &ObjectKey,
    patch: &serde_json::Value,
) -> Result<(), ReconcileError> {
    let api: Api<K> = Api::namespaced(ctx.kube.clone(), &key.namespace);
    ctx.metrics.kube_write(label, "status");
    api.patch_status(&key.name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map(|_| ())
        .map_err(|e| {
            ReconcileError::kube(KubeCall::WriteStatus, format!("{} {key}", K::kind(&())), e)
        })
}

/// PURE: the merge patch that takes `current` to what the kind's `desired` and `shared` say;
/// `None` when nothing changes.
pub fn body<S: serde::Serialize, D>(
    current: Option<&S>,
    desired: Option<&D>,
    patch: PatchFn<S, D>,
    shared: &Shared,
    kind: &str,
    generation: Option<i64>,
    now: &Time,
) -> Option<serde_json::Value> {
    let base = current
        .and_then(|s| serde_json::to_value(s).ok())
        .and_then(|v| v.as_object().cloned())
        .unwrap_or_default();
    let mut next = base.clone();
    let kind_patch = desired.and_then(|d| patch(current, d, now.clone()));
    if let Some(serde_json::Value::Object(fields)) =
        kind_patch.as_ref().and_then(|p| p.get("status"))
    {
        for (k, v) in fields {
            if v.is_null() {
                next.remove(k);
            } else {
                next.insert(k.clone(), v.clone());
            }
        }
    }
    overlay(&mut next, shared, kind, generation, now);
    diff(&base, &next)
}

/// `written` when the cached copy's status `current` differs from it: the copy may predate
/// that write. The watch event of the operator's own write triggers no pass (`OwnWrites`), so
/// a pass that starts right after a write can read the copy from before it; a status equal to
/// that stale copy would then never be written (found by `just chaos`: a team wrote
/// WaitingForServer, the next pass found it Ready and compared against the older Ready copy).
/// Costs at most one redundant write while the event is in flight; none in steady state.
///
/// Once the copy shows the last write, `written` says nothing the copy does not and is
/// dropped: a later write sets it again, so the copy cannot be behind a write while it is
/// `None`. In steady state no object keeps a second copy of its status (ADR 0005).
pub fn stale_but_equal<'a, S: PartialEq>(
    current: Option<&S>,
    written: &'a mut Option<S>,
) -> Option<&'a S> {
    if written.as_ref() == current {
        *written = None;
    }
    written.as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_older_than_the_last_write_is_not_trusted() {
        // The copy still shows what the last write replaced: compare against the write, and
        // keep remembering it.
        let mut written = Some("waiting");
        assert_eq!(
            stale_but_equal(Some(&"ready"), &mut written),
            Some(&"waiting")
        );
        assert_eq!(written, Some("waiting"));
        assert_eq!(stale_but_equal(None, &mut written), Some(&"waiting"));
        // The copy has caught up: the copy alone decides, and the write is forgotten.
        assert_eq!(stale_but_equal(Some(&"waiting"), &mut written), None);
        assert_eq!(written, None, "nothing kept once the copy shows it");
        // Nothing written yet.
        assert_eq!(stale_but_equal(Some(&"ready"), &mut None::<&str>), None);
    }
}
