//! Events on a TerdutTeam (DESIGN §12): one per external action, and a Warning once per
//! failure streak rather than once per retry (kube's recorder folds repeats within six minutes
//! into a count, but each fold is still a write).

use kube::Resource;
use terdut_crds::v1alpha1::TerdutTeam;

use crate::context::Ctx;
use crate::runtime::events::EventType;

pub async fn normal(ctx: &Ctx, team: &TerdutTeam, reason: &str, action: &str, note: String) {
    ctx.events
        .publish(
            &team.object_ref(&()),
            EventType::Normal,
            reason,
            action,
            note,
        )
        .await;
}

pub async fn warning(ctx: &Ctx, team: &TerdutTeam, reason: &str, action: &str, note: String) {
    ctx.events
        .publish(
            &team.object_ref(&()),
            EventType::Warning,
            reason,
            action,
            note,
        )
        .await;
}

/// A Warning unless `warned` says this reason was already published in the current streak;
/// the actor clears `warned` when a pass succeeds.
pub async fn warn_once(
    ctx: &Ctx,
    team: &TerdutTeam,
    warned: &mut Option<String>,
    reason: &str,
    action: &str,
    note: String,
) {
    if warned.as_deref() == Some(reason) {
        return;
    }
    *warned = Some(reason.to_owned());
    warning(ctx, team, reason, action, note).await;
}
