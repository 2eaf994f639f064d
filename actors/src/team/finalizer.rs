//! The TerdutTeam finalizer (DESIGN §5 "Finalizers ... call the server's DELETE first").
//!
//! Added before the first call that can create the team on the server, removed once the team
//! is deleted there (or provably cannot exist any more). Both are merge patches of
//! `metadata.finalizers` carrying `metadata.resourceVersion`: the API server refuses the patch
//! with 409 when the object changed since it was read, so a finalizer another controller added
//! meanwhile is never dropped; the 409 is retried with backoff after the cache caught up.

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use terdut_crds::v1alpha1::TerdutTeam;

use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::key::ObjectKey;

/// The finalizer of every TerdutTeam the operator created a team for.
pub const FINALIZER: &str = "terdut.ryuvia.com/team-cleanup";

pub fn has(team: &TerdutTeam) -> bool {
    team.finalizers().iter().any(|f| f == FINALIZER)
}

/// The patch that adds the finalizer; `None` when it is there.
pub fn adding(team: &TerdutTeam) -> Option<serde_json::Value> {
    if has(team) {
        return None;
    }
    let mut list = team.finalizers().to_vec();
    list.push(FINALIZER.to_owned());
    Some(patch(team, list))
}

/// The patch that removes the finalizer; `None` when it is not there.
pub fn removing(team: &TerdutTeam) -> Option<serde_json::Value> {
    if !has(team) {
        return None;
    }
    let list = team
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    Some(patch(team, list))
}

fn patch(team: &TerdutTeam, finalizers: Vec<String>) -> serde_json::Value {
    json!({
        "metadata": {
            "finalizers": finalizers,
            "resourceVersion": team.resource_version(),
        }
    })
}

/// Sends a patch from [`removing`] (or [`adding`], see [`add`]). A 404 (the object is gone)
/// is success: nothing is held any more.
pub async fn apply(
    ctx: &Ctx,
    team: &TerdutTeam,
    patch: &serde_json::Value,
) -> Result<(), ReconcileError> {
    match send(ctx, team, patch).await {
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        other => other.map_err(|e| failed(team, e)),
    }
}

/// Adds the finalizer unless present. Here a 404 is an error: the pass runs on a copy of an
/// object deleted before it got the finalizer, and must stop before it creates a team that no
/// finalizer would ever delete (found by `just chaos`).
pub async fn add(ctx: &Ctx, team: &TerdutTeam) -> Result<(), ReconcileError> {
    match adding(team) {
        Some(patch) => send(ctx, team, &patch).await.map_err(|e| failed(team, e)),
        None => Ok(()),
    }
}

/// Removes the finalizer from the object as it is now (read live): for a pass that added it
/// moments ago, whose copy's resourceVersion is already stale.
pub async fn release_live(ctx: &Ctx, team: &TerdutTeam) -> Result<(), ReconcileError> {
    let key = ObjectKey::of(team);
    let api: Api<TerdutTeam> = Api::namespaced(ctx.kube.clone(), &key.namespace);
    let live = api
        .get_opt(&key.name)
        .await
        .map_err(|e| ReconcileError::kube("get", format!("TerdutTeam {key}"), e))?;
    match live.as_ref().and_then(|l| removing(l).map(|p| (l, p))) {
        Some((live, patch)) => apply(ctx, live, &patch).await,
        None => Ok(()),
    }
}

async fn send(ctx: &Ctx, team: &TerdutTeam, patch: &serde_json::Value) -> Result<(), kube::Error> {
    let key = ObjectKey::of(team);
    let api: Api<TerdutTeam> = Api::namespaced(ctx.kube.clone(), &key.namespace);
    ctx.metrics.kube_write("team", "finalizer");
    let written = api
        .patch(&key.name, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    ctx.own_writes
        .record("team", &key, written.resource_version());
    Ok(())
}

fn failed(team: &TerdutTeam, e: kube::Error) -> ReconcileError {
    ReconcileError::kube(
        "patch finalizers of",
        format!("TerdutTeam {}", ObjectKey::of(team)),
        e,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn team(finalizers: &[&str]) -> TerdutTeam {
        serde_json::from_value(json!({
            "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutTeam",
            "metadata": {"name": "t", "namespace": "ns", "resourceVersion": "17",
                         "finalizers": finalizers},
            "spec": {"serverRef": {"name": "s"}, "displayName": "T"},
        }))
        .unwrap()
    }

    #[test]
    fn adds_after_others_with_a_resource_version_precondition() {
        let p = adding(&team(&["other.io/keep"])).unwrap();
        assert_eq!(
            p,
            json!({"metadata": {"finalizers": ["other.io/keep", FINALIZER], "resourceVersion": "17"}})
        );
        assert_eq!(adding(&team(&[FINALIZER])), None);
    }

    #[test]
    fn removes_only_its_own() {
        let p = removing(&team(&["other.io/keep", FINALIZER])).unwrap();
        assert_eq!(p["metadata"]["finalizers"], json!(["other.io/keep"]));
        let p = removing(&team(&[FINALIZER])).unwrap();
        assert_eq!(p["metadata"]["finalizers"], json!([]));
        assert_eq!(removing(&team(&["other.io/keep"])), None);
    }
}
