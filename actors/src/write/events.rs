//! Events on the operator's objects (docs/design.md §12): one per externally visible action,
//! and a not-Ready reason announced once per streak, not once per retry.

use kube::Resource;

use crate::context::Ctx;
use crate::runtime::events::EventType;

/// Publishes an Event about `object`. The note must never carry a secret.
pub async fn publish<K: Resource<DynamicType = ()>>(
    ctx: &Ctx,
    object: &K,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
) {
    ctx.events
        .publish(&object.object_ref(&()), type_, reason, action, note)
        .await;
}

pub async fn normal<K: Resource<DynamicType = ()>>(
    ctx: &Ctx,
    object: &K,
    reason: &str,
    action: &str,
    note: String,
) {
    publish(ctx, object, EventType::Normal, reason, action, note).await;
}

pub async fn warning<K: Resource<DynamicType = ()>>(
    ctx: &Ctx,
    object: &K,
    reason: &str,
    action: &str,
    note: String,
) {
    publish(ctx, object, EventType::Warning, reason, action, note).await;
}

/// A Warning unless `warned` says this reason was published in the current streak already;
/// `warned` is the kind's memory of it (a team's `TeamMemory::warned`), kept between passes.
pub async fn warn_once<K: Resource<DynamicType = ()>>(
    ctx: &Ctx,
    object: &K,
    warned: &mut Option<String>,
    reason: &str,
    action: &str,
    note: String,
) {
    if warned.as_deref() == Some(reason) {
        return;
    }
    *warned = Some(reason.to_owned());
    warning(ctx, object, reason, action, note).await;
}
