//! Deleting a TerdutAlertSource (docs/design.md §5 "Finalizers"): DELETE the integration on the
//! server (404 counts as done), then release the finalizer. The webhook Secret is owned, so garbage
//! collection removes it (docs/design.md §7).
//!
//! What deletion does when the integration cannot be reached (engineering-notes: finalizer
//! deadlocks when the server or the team is gone first):
//! - **TerdutTeam gone** (absent from the cache and from a live read), or being deleted with
//!   `deletionPolicy: Delete` without a way to reach the server: released with a Warning. The
//!   team's own finalizer deletes the team on the server, which deletes its integrations, so
//!   nothing is orphaned. A team being deleted with `deletionPolicy: Orphan` stays on the
//!   server with its integrations, so this source deletes its own first (the team waits for
//!   it, `team/finalize.rs`) and stays blocked, saying what is still live, while it cannot. A
//!   team gone for good while it was orphaned is the one case left: the Warning says the
//!   integration may still be live.
//! - **TerdutServer gone** (confirmed live too; e.g. the whole namespace is being deleted):
//!   released with a Warning naming the integration; nothing can delete it any more, and a
//!   server reusing that database keeps the row until someone deletes it by hand.
//! - **`spec.deletionPolicy: Orphan`**: nothing is called on the server; the integration and
//!   its webhook Secret are left (the Secret detached from the source, see [`detached`]).
//! - **Everything else** (the server answers 5xx, is not reachable, has no key yet, the team has
//!   no `teamID` yet): removal stays blocked, with a Warning Event and `DeletionBlocked`, and is
//!   retried with backoff. Removing the finalizer by hand is the documented way out.
//!
//! Nothing a tenant can write is authority (docs/security.md): the team's `status.teamID` is
//! confirmed with the server before anything is deleted on it, and a recorded integration id
//! (the webhook Secret's annotation, `status.integrationID`) is deleted only when the server
//! says its `external_id` is this source's. Otherwise, with no id known (the operator stopped
//! between a POST and recording anything, or a hint was someone else's), the POST is repeated:
//! it answers the existing integration by `external_id` (or creates one whose key is dropped
//! unread) and that id is deleted, so even the crash window leaves no orphan. That POST is a
//! create call, so it is made only while the team's server accepts this namespace; otherwise
//! the finalizer is released with a Warning saying what may be left.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::ObjectRef;
use terdut_crds::v1alpha1::{DeletionPolicy, TerdutAlertSource, TerdutTeam};
use tracing::info;

use super::SourceMemory;
use super::names::{FINALIZER, external_id, secret_labels, secret_name};
use super::observe::{self, Read, TeamCheck, verify_team};
use super::plan::{integration_kind, lookup_id};
use super::secret::controlled_by;
use super::status::{DesiredStatus, Outcome, desired_status};
use crate::api::{ApiError, Deletion, Id, NewIntegration, TerdutClient};
use crate::consent::Consent;
use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::key::ObjectKey;
use crate::pipeline::{Finalized, Next, Pass};
use crate::server::observe::team_server_key;
use crate::team::observe::Uncached;
use crate::tree::Credentials;
use crate::write::{events, finalizer};

/// One deletion pass: the cleanup, and what the user sees while it waits (a `DeleteFailed`
/// Warning on every attempt, folded into one series; `DeletionBlocked`).
pub async fn finalize(
    pass: Pass<'_>,
    source: &TerdutAlertSource,
    _memory: &mut SourceMemory,
) -> Result<Finalized<DesiredStatus>, ReconcileError> {
    let ctx = pass.ctx;
    let outcome = cleanup(pass, source).await;
    let message = match &outcome {
        Ok(Cleanup::Released) => return Ok(Finalized::Released),
        Ok(Cleanup::Blocked(why)) => why.clone(),
        Err(e) => format!("deleting the integration failed: {e}"),
    };
    events::warning(
        ctx,
        source,
        "DeleteFailed",
        "Delete",
        format!("{message}; the TerdutAlertSource stays until the integration is deleted"),
    )
    .await;
    outcome?;
    let secret = secret_name(&source.name_any());
    Ok(Finalized::Waiting {
        desired: Some(desired_status(
            &Outcome::DeletionBlocked(message),
            source.metadata.generation,
            &secret,
        )),
        next: Next::Wait,
    })
}

/// How a deletion pass ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cleanup {
    /// The finalizer is released (or was not there).
    Released,
    /// Waiting for something outside the operator's reach; the message says what.
    Blocked(String),
}

async fn cleanup(pass: Pass<'_>, source: &TerdutAlertSource) -> Result<Cleanup, ReconcileError> {
    let ctx = pass.ctx;
    if !finalizer::has(source, FINALIZER) {
        return Ok(Cleanup::Released);
    }
    // docs/design.md §5 "Deletion policy": no call to the server at all.
    if source.spec.deletion_policy == DeletionPolicy::Orphan {
        return orphan(ctx, source).await;
    }
    let key = ObjectKey::of(source);
    let team_name = &source.spec.team_ref.name;
    let cached = ctx
        .stores
        .teams
        .get(&ObjectRef::new(team_name).within(&key.namespace));
    let Some(team) = (match cached {
        Some(t) => Some(t),
        None => live::<TerdutTeam>(ctx, &key.namespace, team_name)
            .await?
            .map(Arc::new),
    }) else {
        let what = source
            .status
            .as_ref()
            .and_then(|s| s.integration_id)
            .map_or_else(
                || "its integration".to_owned(),
                |id| format!("integration {id}"),
            );
        return release(
            ctx,
            source,
            format!(
                "TerdutTeam {team_name} no longer exists, so {what} cannot be looked up; deleting \
                 a team on the server deletes its integrations, but if the team was left there \
                 (its finalizer removed by hand), {what} and its webhook key are still live: \
                 delete it on the server"
            ),
        )
        .await;
    };
    let status_id = source.status.as_ref().and_then(|s| s.integration_id);
    let team_deleting = team.metadata.deletion_timestamp.is_some();
    // Only a team the server deletes takes its integrations with it.
    let team_takes_it = team.spec.deletion_policy == DeletionPolicy::Delete;
    let team_gone_note = || {
        format!(
            "TerdutTeam {team_name} is being deleted and the integration cannot be reached; \
             deleting the team on the server deletes its integrations"
        )
    };
    let orphaned_team_note = |why: &str| {
        let what = status_id.map_or_else(
            || "this source's integration".to_owned(),
            |id| format!("integration {id}"),
        );
        format!(
            "TerdutTeam {team_name} is being deleted with deletionPolicy Orphan, so it stays on \
             the server and {what} with its working webhook key stays with it unless deleted \
             here; {why}"
        )
    };
    let server = team_server_key(&team);
    let uncached = if ctx
        .stores
        .servers
        .get(&ObjectRef::new(&server.name).within(&server.namespace))
        .is_none()
    {
        Some(crate::team::observe::uncached(ctx, &server).await?)
    } else {
        None
    };
    let what = status_id.map_or_else(
        || "its integration".to_owned(),
        |id| format!("integration {id}"),
    );
    match uncached {
        Some(Uncached::Absent) => {
            return release(
                ctx,
                source,
                format!(
                    "TerdutServer {server} no longer exists, so {what} cannot be deleted; if a \
                     server reusing its database comes back, delete {what} of TerdutTeam \
                     {team_name} there by hand"
                ),
            )
            .await;
        }
        // Exists, but not this instance's to call: nobody could delete it from here.
        Some(Uncached::NotMine(why)) => {
            return release(
                ctx,
                source,
                format!(
                    "TerdutServer {server} of TerdutTeam {team_name} is not reconciled by this \
                     operator instance ({why}), so {what} cannot be deleted from here; if it \
                     exists, its webhook key is still live: delete it on the server by hand"
                ),
            )
            .await;
        }
        Some(Uncached::NotYetSeen) | None => {}
    }
    let secret = observe::secret(
        ctx,
        &key.namespace,
        &secret_name(&key.name),
        &source.uid().unwrap_or_default(),
        Read::Cache { checked: None },
    )
    .await?;
    let recorded = lookup_id(&secret.view, status_id);
    let Some(team_id) = team.status.as_ref().and_then(|s| s.team_id) else {
        if team_deleting && team_takes_it {
            return release(ctx, source, team_gone_note()).await;
        }
        if team_deleting && recorded.is_some() {
            // The team waits for this source, and without its id nothing can be reached:
            // released, saying what may be left.
            return release(
                ctx,
                source,
                orphaned_team_note(
                    "it has no teamID, so the integration cannot be reached: delete it on the \
                     server by hand",
                ),
            )
            .await;
        }
        if recorded.is_none() {
            // An integration is only ever created on a team id the server confirmed, and its
            // id is recorded with its key: with neither, none was made for this object.
            return release(
                ctx,
                source,
                format!(
                    "TerdutTeam {team_name} has no teamID and no integration was recorded for \
                     this object, so none was created; nothing to delete"
                ),
            )
            .await;
        }
        return Ok(Cleanup::Blocked(format!(
            "TerdutTeam {team_name} has no teamID yet; the integration is deleted once it has one"
        )));
    };
    // One question: the credentials to delete with, and the consent that decides whether a
    // lookup by external_id (a create call) is allowed below.
    let access = pass.parent.access(ctx, &server, &key.namespace).await;
    let client = match access.credentials {
        Credentials::Ready(c) => c,
        Credentials::NotReady(_) if team_deleting && team_takes_it => {
            return release(ctx, source, team_gone_note()).await;
        }
        Credentials::NotReady(why) if team_deleting => {
            return Ok(Cleanup::Blocked(orphaned_team_note(&format!(
                "it is deleted once the server can be reached ({why})"
            ))));
        }
        Credentials::NotReady(why) => {
            return Ok(Cleanup::Blocked(format!(
                "the integration cannot be deleted yet: {why}"
            )));
        }
    };
    let want = external_id(&key.namespace, &key.name);
    // The team's status is a hint a tenant can write: delete nothing on a team the server does
    // not confirm is this one.
    if let TeamCheck::NotOurs(detail) =
        verify_team(&client, team_id, &key.namespace, team_name).await?
    {
        return release(
            ctx,
            source,
            format!(
                "{detail}; nothing was deleted on the server (an integration {want} left on this \
                 source's team, if any, is deleted with the team)"
            ),
        )
        .await;
    }
    let verified = match recorded {
        Some(id) => match client.get_integration(team_id, id).await {
            Ok(i) if i.id == id && i.external_id == want => Some(id),
            // Someone else's id in a tenant-writable hint: never deleted.
            Ok(_) | Err(ApiError::NotFound) => None,
            Err(e) => return Err(e.into()),
        },
        None => None,
    };
    let id = match verified {
        Some(id) => id,
        // No recorded id is this source's (none, gone, or someone else's): the only lookup by
        // external_id is the idempotent POST, and a server that does not accept this namespace
        // gets no create call (docs/security.md).
        None => {
            if let Consent::Refused(why) = access.consent {
                return release(
                    ctx,
                    source,
                    format!(
                        "{why}; the integration {want} on team {team_id}, if one is left there, \
                         was not looked up (the only lookup is a create call) and stays on the \
                         server until its team is deleted"
                    ),
                )
                .await;
            }
            match by_external_id(ctx, source, &client, team_id).await? {
                Some(id) => id,
                None => return Ok(Cleanup::Released),
            }
        }
    };
    let note = match client.delete_integration(team_id, id).await? {
        Deletion::Deleted if recorded == Some(id) => {
            format!("deleted integration {id}; its webhook key no longer works")
        }
        Deletion::Deleted => format!(
            "deleted integration {id} (found by its external_id {want}); its webhook key no \
             longer works"
        ),
        Deletion::AlreadyGone => format!("integration {id} was already gone from the server"),
    };
    info!(source = %key, integration = id, "integration deleted; releasing the finalizer");
    finalizer::release(ctx, source, FINALIZER).await?;
    events::normal(ctx, source, "IntegrationDeleted", "Delete", note).await;
    Ok(Cleanup::Released)
}

/// The id of this source's integration on team `team_id`, found by its external_id, for a
/// deletion that knows no (live) id. The POST may create: only for the object itself, still
/// holding the finalizer (`None` otherwise: nothing to do). A pass on a stale copy after the
/// release would make an integration that, were the operator killed before the DELETE that
/// follows, no CR is left to delete. Any key in the answer is dropped unread.
async fn by_external_id(
    ctx: &Ctx,
    source: &TerdutAlertSource,
    client: &TerdutClient,
    team_id: Id,
) -> Result<Option<Id>, ReconcileError> {
    let key = ObjectKey::of(source);
    let live = live::<TerdutAlertSource>(ctx, &key.namespace, &key.name).await?;
    if !live.is_some_and(|l| l.uid() == source.uid() && finalizer::has(&l, FINALIZER)) {
        return Ok(None);
    }
    let new = NewIntegration {
        kind: integration_kind(source.spec.kind),
        name: source.spec.name.clone(),
        external_id: external_id(&key.namespace, &key.name),
    };
    Ok(Some(
        client
            .create_integration(team_id, &new)
            .await?
            .integration()
            .id,
    ))
}

/// The object read live. Releasing the finalizer because the team or server is gone abandons
/// the integration on the server, so their absence from the cache is never enough: right after
/// a restart the cache may not have listed them yet, and an integration released on that
/// word stays on the server with no CR left to delete it (found by `just chaos`).
async fn live<K>(ctx: &Ctx, namespace: &str, name: &str) -> Result<Option<K>, ReconcileError>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::namespaced(ctx.kube.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| ReconcileError::kube("get", format!("{} {namespace}/{name}", K::kind(&())), e))
}

/// Releases the finalizer without deleting anything on the server, with a Warning saying why.
/// `Orphan`: the integration stays on the server, and so does its webhook Secret, no longer
/// the operator's (its owner reference and managed labels removed, so garbage collection
/// leaves it and the operator's watch no longer sees it): whatever reads the key keeps
/// working. A Secret this source does not control is not touched.
async fn orphan(ctx: &Ctx, source: &TerdutAlertSource) -> Result<Cleanup, ReconcileError> {
    let key = ObjectKey::of(source);
    let name = secret_name(&key.name);
    let uid = source.uid().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(ctx.kube.clone(), &key.namespace);
    let kept = match live::<Secret>(ctx, &key.namespace, &name).await? {
        Some(secret) if controlled_by(&secret, &uid) => {
            secrets
                .replace(&name, &PostParams::default(), &detached(secret, &uid))
                .await
                .map_err(|e| {
                    ReconcileError::kube("update", format!("Secret {}/{name}", key.namespace), e)
                })?;
            ctx.metrics.kube_write("Secret", "replace");
            format!(
                "; its webhook Secret {name} was kept and is no longer managed by the operator (delete it when done)"
            )
        }
        _ => String::new(),
    };
    let recorded = source
        .status
        .as_ref()
        .and_then(|s| s.integration_id)
        .map(|id| format!(" (recorded as integration {id})"))
        .unwrap_or_default();
    finalizer::release(ctx, source, FINALIZER).await?;
    events::normal(
        ctx,
        source,
        "Orphaned",
        "Delete",
        format!(
            "spec.deletionPolicy is Orphan: the integration{recorded} was left on the server{kept}; \
             released the finalizer"
        ),
    )
    .await;
    info!(source = %key, "orphaned on the server (deletionPolicy Orphan)");
    Ok(Cleanup::Released)
}

/// PURE: the webhook Secret without this source's owner reference and the operator's labels.
pub fn detached(mut secret: Secret, source_uid: &str) -> Secret {
    if let Some(refs) = secret.metadata.owner_references.as_mut() {
        refs.retain(|o| o.uid != source_uid);
    }
    if let Some(labels) = secret.metadata.labels.as_mut() {
        for label in secret_labels("").keys() {
            labels.remove(label);
        }
    }
    secret.metadata.managed_fields = None;
    secret
}

async fn release(
    ctx: &Ctx,
    source: &TerdutAlertSource,
    why: String,
) -> Result<Cleanup, ReconcileError> {
    info!(source = %ObjectKey::of(source), %why, "releasing the finalizer without a server-side delete");
    finalizer::release(ctx, source, FINALIZER).await?;
    events::warning(ctx, source, "FinalizerReleased", "Delete", why).await;
    Ok(Cleanup::Released)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
    use std::collections::BTreeMap;

    #[test]
    fn a_detached_secret_keeps_its_data_and_other_owners_and_labels_only() {
        let owner = |uid: &str| OwnerReference {
            api_version: "v1".into(),
            kind: "Thing".into(),
            name: uid.into(),
            uid: uid.into(),
            controller: Some(uid == "source-uid"),
            ..Default::default()
        };
        let mut labels = secret_labels("am");
        labels.insert("team".into(), "payments".into());
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some("am-terdut-webhook".into()),
                labels: Some(labels),
                owner_references: Some(vec![owner("source-uid"), owner("other")]),
                ..Default::default()
            },
            string_data: Some(BTreeMap::from([("key".into(), "k".into())])),
            ..Default::default()
        };
        let d = detached(secret.clone(), "source-uid");
        assert_eq!(d.metadata.owner_references, Some(vec![owner("other")]));
        assert_eq!(
            d.metadata.labels,
            Some(BTreeMap::from([("team".into(), "payments".into())]))
        );
        assert_eq!(d.string_data, secret.string_data, "the key stays");
        assert!(!controlled_by(&d, "source-uid"));
    }
}
