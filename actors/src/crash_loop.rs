//! Reporting a crash-looping actor on its object (the supervisor parked it, see
//! `supervisor::restart_policy`): `Ready=False, reason: CrashLooping`, `Stalled=True` and a
//! Warning Event, the same for every kind (docs/design.md §7).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::Api;
use terdut_crds::v1alpha1::conditions::{DesiredCondition, Progress, set_ready};
use tracing::warn;

use crate::context::Ctx;
use crate::key::ObjectKey;
use crate::write::{events, status};

/// Below the write layer, which needs it too (docs/architecture.md "Modules").
pub use crate::write::Conditioned;

/// The Ready reason of a parked actor's object.
pub const CRASH_LOOPING: &str = terdut_crds::v1alpha1::Reason::CrashLooping.as_str();

/// Writes the CrashLooping condition and Event on `key`'s object; `kind` labels metrics.
pub async fn report<K: Conditioned>(
    ctx: &Ctx,
    kind: &'static str,
    key: &ObjectKey,
    last_error: &str,
) {
    let api: Api<K> = Api::namespaced(ctx.kube.clone(), &key.namespace);
    let Ok(Some(obj)) = api.get_opt(&key.name).await else {
        return;
    };
    let message = format!(
        "the operator stopped reconciling this {} after repeated crashes (last: {last_error}); \
         it retries when the object changes",
        K::kind(&())
    );
    let patch = crash_loop_patch(
        obj.conditions(),
        obj.meta().generation,
        &message,
        ctx.clock.k8s_now(),
    );
    if let Err(e) = status::merge::<K>(ctx, kind, key, &patch).await {
        warn!(%key, kind, error = %e, "could not record the crash loop in status");
    }
    events::warning(ctx, &obj, CRASH_LOOPING, "Supervise", message).await;
}

/// The status patch of a parked object: Ready False with `message`, Stalled (it restarts only
/// when the object changes), and `observedGeneration` at the object's generation, so kstatus
/// reads Failed rather than "generation not observed yet" when a new spec is what crashes
/// (docs/design.md §7).
pub fn crash_loop_patch(
    mut conditions: Vec<Condition>,
    generation: Option<i64>,
    message: &str,
    now: Time,
) -> serde_json::Value {
    set_ready(
        &mut conditions,
        DesiredCondition::ready(false, CRASH_LOOPING, message).at_generation(generation),
        Progress::Stalled,
        now,
    );
    serde_json::json!({"status": {"conditions": conditions, "observedGeneration": generation}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    #[test]
    fn a_parked_object_is_stalled_at_its_generation() {
        let now = Time(Timestamp::from_second(10).unwrap());
        let mut waiting = vec![];
        set_ready(
            &mut waiting,
            DesiredCondition::ready(false, "WaitingForServer", "starting").at_generation(Some(1)),
            Progress::Reconciling,
            now.clone(),
        );
        let p = crash_loop_patch(waiting, Some(2), "crashed", now);
        let conditions: Vec<Condition> =
            serde_json::from_value(p["status"]["conditions"].clone()).unwrap();
        let got: Vec<_> = conditions
            .iter()
            .map(|c| {
                (
                    c.type_.as_str(),
                    c.status.as_str(),
                    c.reason.as_str(),
                    c.observed_generation,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("Ready", "False", CRASH_LOOPING, Some(2)),
                ("Stalled", "True", CRASH_LOOPING, Some(2)),
            ]
        );
        assert_eq!(p["status"]["observedGeneration"], 2);
    }
}
