//! Reporting a crash-looping actor on its object (the supervisor parked it, see
//! `supervisor::restart_policy`): `Ready=False, reason: CrashLooping` and a Warning Event, the
//! same for every kind.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use kube::core::NamespaceResourceScope;
use kube::runtime::events::EventType;
use serde::de::DeserializeOwned;
use terdut_crds::v1alpha1::conditions::{DesiredCondition, set_condition};
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutServer, TerdutTeam};
use tracing::warn;

use crate::context::Ctx;
use crate::key::ObjectKey;

/// The Ready reason of a parked actor's object.
pub const CRASH_LOOPING: &str = "CrashLooping";

/// A kind whose status carries `conditions`.
pub trait Conditioned:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + DeserializeOwned
    + std::fmt::Debug
{
    fn conditions(&self) -> Vec<Condition>;
}

impl Conditioned for TerdutServer {
    fn conditions(&self) -> Vec<Condition> {
        self.status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default()
    }
}

impl Conditioned for TerdutTeam {
    fn conditions(&self) -> Vec<Condition> {
        self.status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default()
    }
}

impl Conditioned for TerdutAlertSource {
    fn conditions(&self) -> Vec<Condition> {
        self.status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default()
    }
}

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
    let mut conditions = obj.conditions();
    set_condition(
        &mut conditions,
        DesiredCondition::ready(false, CRASH_LOOPING, message.clone())
            .at_generation(obj.meta().generation),
        ctx.clock.k8s_now(),
    );
    let patch = serde_json::json!({"status": {"conditions": conditions}});
    ctx.metrics.kube_write(kind, "status");
    if let Err(e) = api
        .patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        warn!(%key, kind, error = %e, "could not record the crash loop in status");
    }
    ctx.events
        .publish(
            &obj.object_ref(&()),
            EventType::Warning,
            CRASH_LOOPING,
            "Supervise",
            message,
        )
        .await;
}
