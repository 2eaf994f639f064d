//! Writing a status: only when it changed, never on a stale copy's word, recorded as our own.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};

use super::Managed;
use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::key::ObjectKey;
use crate::kind::Written as Recorded;

/// The status patch a kind computes, pure: `None` when `desired` shows nothing new over
/// `current`.
pub type PatchFn<S, D> = fn(Option<&S>, &D, Time) -> Option<serde_json::Value>;

/// Writes the status `desired` of `object` when it changed. `written` is the status this
/// runtime last wrote for the object (see [`stale_but_equal`]); it is updated. A 404 (the
/// object was deleted meanwhile) is not an error.
pub async fn write<K: Managed, D>(
    ctx: &Ctx,
    object: &K,
    desired: &D,
    patch: PatchFn<K::Status, D>,
    written: &mut Option<K::Status>,
) -> Result<(), ReconcileError> {
    let now = ctx.clock.k8s_now();
    let current = object.status();
    let body = patch(current, desired, now.clone())
        .or_else(|| stale_but_equal(current, written).and_then(|w| patch(Some(w), desired, now)));
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
            "patch status of",
            format!("{} {key}", K::KIND.resource()),
            e,
        )),
    }
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
