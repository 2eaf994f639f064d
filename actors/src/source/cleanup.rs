//! Deleting a TerdutAlertSource (DESIGN §5 "Finalizers"): DELETE the integration on the server
//! (404 counts as done), then release the finalizer. The webhook Secret is owned, so garbage
//! collection removes it (DESIGN §7).
//!
//! What deletion does when the integration cannot be reached (engineering-notes: finalizer
//! deadlocks when the server or the team is gone first):
//! - **TerdutTeam gone** (absent from the cache and from a live read), or being deleted without
//!   a way to reach the server: released with a Warning. The team's own finalizer deletes the
//!   team on the server, which deletes its integrations, so nothing is orphaned.
//! - **TerdutServer gone** (confirmed live too; e.g. the whole namespace is being deleted):
//!   released with a Warning naming the integration; nothing can delete it any more, and a
//!   server reusing that database keeps the row until someone deletes it by hand.
//! - **Everything else** (the server answers 5xx, is not reachable, has no key yet, the team has
//!   no `teamID` yet): removal stays blocked, with a Warning Event and `DeletionBlocked`, and is
//!   retried with backoff. Removing the finalizer by hand is the documented way out.
//!
//! With no integration id known (the operator stopped between a POST and recording anything), the
//! POST is repeated: it answers the existing integration by `external_id` (or creates one whose
//! key is dropped unread) and that id is deleted, so even the crash window leaves no orphan.

use std::sync::Arc;

use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutServer, TerdutTeam};
use tracing::info;

use super::apply::{event, release_finalizer};
use super::names::{FINALIZER, external_id, secret_name};
use super::observe::{self, Read};
use super::plan::{integration_kind, lookup_id};
use super::resolve::{ServerAccess, credentials};
use crate::api::{Deletion, Id, NewIntegration, TerdutClient};
use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::key::ObjectKey;
use crate::server::observe::team_server_key;

/// How a deletion pass ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cleanup {
    /// The finalizer is released (or was not there).
    Released,
    /// Waiting for something outside the operator's reach; the message says what.
    Blocked(String),
}

pub async fn cleanup(ctx: &Ctx, source: &TerdutAlertSource) -> Result<Cleanup, ReconcileError> {
    if !source.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(Cleanup::Released);
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
        return release(
            ctx,
            source,
            format!(
                "TerdutTeam {team_name} no longer exists; deleting a team on the server deletes \
                 its integrations, so there is nothing left to delete"
            ),
        )
        .await;
    };
    let team_deleting = team.metadata.deletion_timestamp.is_some();
    let team_gone_note = || {
        format!(
            "TerdutTeam {team_name} is being deleted and the integration cannot be reached; \
             deleting the team on the server deletes its integrations"
        )
    };
    let server = team_server_key(&team);
    let status_id = source.status.as_ref().and_then(|s| s.integration_id);
    if ctx
        .stores
        .servers
        .get(&ObjectRef::new(&server.name).within(&server.namespace))
        .is_none()
        && live::<TerdutServer>(ctx, &server.namespace, &server.name)
            .await?
            .is_none()
    {
        let what = status_id.map_or_else(
            || "its integration".to_owned(),
            |id| format!("integration {id}"),
        );
        return release(
            ctx,
            source,
            format!(
                "TerdutServer {server} no longer exists, so {what} cannot be deleted; if a server \
                 reusing its database comes back, delete {what} of TerdutTeam {team_name} there by \
                 hand"
            ),
        )
        .await;
    }
    let Some(team_id) = team.status.as_ref().and_then(|s| s.team_id) else {
        if team_deleting {
            return release(ctx, source, team_gone_note()).await;
        }
        return Ok(Cleanup::Blocked(format!(
            "TerdutTeam {team_name} has no teamID yet; the integration is deleted once it has one"
        )));
    };
    let client = match credentials(ctx, &server).await? {
        ServerAccess::Ready(c) => c,
        ServerAccess::NotReady(_) if team_deleting => {
            return release(ctx, source, team_gone_note()).await;
        }
        ServerAccess::NotReady(why) => {
            return Ok(Cleanup::Blocked(format!(
                "the integration cannot be deleted yet: {why}"
            )));
        }
    };
    let secret = observe::secret(
        ctx,
        &key.namespace,
        &secret_name(&key.name),
        &source.uid().unwrap_or_default(),
        Read::Cache,
    )
    .await?;
    let recorded = lookup_id(&secret.view, status_id);
    let id = match recorded {
        Some(id) => id,
        None => match by_external_id(ctx, source, &client, team_id).await? {
            Some(id) => id,
            None => return Ok(Cleanup::Released),
        },
    };
    let deletion = client.delete_integration(team_id, id).await?;
    let mut note = match deletion {
        Deletion::Deleted => format!("deleted integration {id}; its webhook key no longer works"),
        Deletion::AlreadyGone => format!("integration {id} was already gone from the server"),
    };
    // A recorded id that is already gone may be one this source replaced: a kind change or a
    // rotation deletes the old integration, then creates the new one, and a crash or a failed
    // write before the Secret and status record the new id leaves the old id recorded (found
    // by the long `just chaos` run: the new integration stayed as an orphan). The server keeps
    // one integration per external_id and team, so one look by external_id settles it.
    let mut id = id;
    if recorded.is_some() && matches!(deletion, Deletion::AlreadyGone) {
        match by_external_id(ctx, source, &client, team_id).await? {
            Some(other) => {
                client.delete_integration(team_id, other).await?;
                note = format!(
                    "integration {id} was already gone; deleted integration {other}, created for \
                     this source after it; its webhook key no longer works"
                );
                id = other;
            }
            None => return Ok(Cleanup::Released),
        }
    }
    info!(source = %key, integration = id, "integration deleted; releasing the finalizer");
    release_finalizer(ctx, source).await?;
    event(
        ctx,
        source,
        EventType::Normal,
        "IntegrationDeleted",
        "Delete",
        note,
    )
    .await;
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
    if !live
        .is_some_and(|l| l.uid() == source.uid() && l.finalizers().iter().any(|f| f == FINALIZER))
    {
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
async fn release(
    ctx: &Ctx,
    source: &TerdutAlertSource,
    why: String,
) -> Result<Cleanup, ReconcileError> {
    info!(source = %ObjectKey::of(source), %why, "releasing the finalizer without a server-side delete");
    release_finalizer(ctx, source).await?;
    event(
        ctx,
        source,
        EventType::Warning,
        "FinalizerReleased",
        "Delete",
        why,
    )
    .await;
    Ok(Cleanup::Released)
}
