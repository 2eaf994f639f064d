//! A TerdutTeam being deleted (docs/design.md §5 "Finalizers", §4.6 last bullet): DELETE the team
//! on the server, then release the finalizer.
//!
//! - 404 is success; 409 open incidents keeps the finalizer, publishes a Warning and retries
//!   with backoff, as does any other failure: the finalizer is never removed early.
//! - `deletionPolicy: Orphan` leaves the team on the server, unless the server owner's
//!   policy for the namespace forbids it (docs/design.md §4.6 "Policies"): then the team is
//!   deleted there like any other, with an `OrphanNotAllowed` Warning, so a tenant cannot
//!   squat a display name by orphaning a team and deleting the object.
//! - Consent is not asked: "consent gates what the operator starts acting on, not whether it
//!   may clean up after itself".
//! - **A TerdutServer that no longer exists** (absent from the cache and confirmed by a live
//!   GET) releases the finalizer at once with a Warning Event. Deleting a TerdutServer takes its
//!   Deployment, Service and key with it, and the operator never touches its database
//!   (docs/design.md §1, §8): there is no API left to call and nothing the operator could ever
//!   clean up later, so waiting would only leave the TerdutTeam stuck forever (as
//!   grafana-operator's users met with its finalizers). A TerdutServer that exists but does not
//!   answer keeps the finalizer and is retried.
//! - **Paused** teams are deleted all the same (docs/configuration.md: "deletion still cleans
//!   up"): the pause stops the operator from changing a team that exists, but a deleted
//!   TerdutTeam that waited for an annotation on an object being deleted would be stuck for
//!   anyone who did not know, and deleting it says what the user wants.
//! - **Identity, not hints**: `status.teamID` (and the id the actor remembers) is deleted only
//!   once the server confirms that team's `external_id` is this object's: a tenant can write
//!   the status of their own TerdutTeam, and must not get another tenant's team deleted.
//! - **`deletionPolicy: Orphan` leaves the team, not its alert sources' keys.** Deleting a team
//!   on the server deletes its integrations; orphaning it does not. So an orphaned team waits
//!   (`DeletionBlocked`, naming them) while alert sources of it that delete their integration
//!   (`deletionPolicy: Delete`) still hold their finalizer: they need the team, its id and its
//!   server to delete the integration, and would otherwise be released on the assumption that
//!   the integration went with the team while its webhook key kept working.
//! - **Made by this object** (ADR 0013): a team is looked up and deleted only when the
//!   operator's records say it sent a create call for this object (or the object is older than
//!   the records, ADR 0007's rule). A TerdutTeam that never had one created (a self-added
//!   finalizer, a reused name whose team was declined) holds nothing on the server: its
//!   finalizer is released without any call, and a team with its `external_id` is left alone.
//! - With no confirmed id (lost status, a crash between the finalizer and the create, a forged
//!   id) the team is found with the idempotent POST. The contract has no lookup by
//!   `external_id`; if no team of ours exists the POST creates one, which the DELETE right
//!   after removes again, and a 409 `team_name_taken` proves none exists (a known
//!   `external_id` is answered 200 before names are compared). That POST is a create call: a
//!   server that does not (or no longer) accepts the namespace never gets one (a tenant could
//!   otherwise create rows on it, and learn which display names exist there, by deleting a
//!   refused TerdutTeam carrying a self-added finalizer), and neither does a team the server
//!   owner's policy does not admit (its display name is never created, not even to be deleted
//!   again). Then the finalizer is released with a `TeamLeftOnServer` Warning saying what may
//!   be left there.

use kube::ResourceExt;
use kube::api::Api;
use terdut_crds::v1alpha1::{DeletionPolicy, TerdutAlertSource, TerdutTeam};
use tracing::info;

use super::guard::Record;
use super::observe::{Uncached, access, server_cached, uncached};
use super::plan::external_id;
use super::status::{DesiredStatus, Outcome, StatusInputs, desired_status};
use super::{FINALIZER, TeamMemory};
use crate::api::{ApiError, Deletion, Id, TerdutClient};
use crate::consent::Consent;
use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::key::ObjectKey;
use crate::pipeline::{Finalized, Next, Pass};
use crate::server::observe::team_server_key;
use crate::tenancy::{self, decide::Admission};
use crate::write::{events, finalizer};

/// Waiting with backoff, status as it is.
fn wait() -> Finalized<DesiredStatus> {
    Finalized::Waiting {
        desired: None,
        next: Next::Wait,
    }
}

/// One deletion pass. `warned` keeps the Warning of the current failure streak from repeating;
/// `remembered` is the team id the actor last knew (see `pass::converge`).
pub async fn finalize(
    pass: Pass<'_>,
    team: &TerdutTeam,
    memory: &mut TeamMemory,
) -> Result<Finalized<DesiredStatus>, ReconcileError> {
    let ctx = pass.ctx;
    let (warned, remembered) = (&mut memory.warned, memory.team_id);
    if !finalizer::has(team, FINALIZER) {
        // Not ours to hold: the API server removes the object once others let go.
        return Ok(Finalized::Released);
    }
    let key = ObjectKey::of(team);
    let server = team_server_key(team);
    // docs/design.md §5 "Deletion policy": no call to the server at all, unless the server
    // owner's policy forbids leaving the team behind (§4.6 "Policies"): then it is deleted.
    let (policy, decided_by) = tenancy::deletion_policy(ctx, team, &server);
    if let Some(by) = decided_by {
        events::warn_once(
            ctx,
            team,
            warned,
            "OrphanNotAllowed",
            "Delete",
            format!(
                "spec.deletionPolicy is Orphan, which policy {by:?} of TerdutServer {server} \
                 (spec.allowedTeams.policies) does not allow: the team is deleted on the server"
            ),
        )
        .await;
    }
    if policy == DeletionPolicy::Orphan {
        let sources: Api<TerdutAlertSource> = Api::namespaced(ctx.kube.clone(), &key.namespace);
        let listed = sources.list(&Default::default()).await.map_err(|e| {
            ReconcileError::kube(
                "list",
                format!("TerdutAlertSources in {}", key.namespace),
                e,
            )
        })?;
        let waiting = deleting_their_integrations(&key.name, &listed.items);
        if !waiting.is_empty() {
            let why = orphan_waits(&server, &waiting);
            events::warn_once(ctx, team, warned, "DeletionBlocked", "Delete", why.clone()).await;
            return Ok(Finalized::Waiting {
                desired: Some(desired_status(
                    &Outcome::DeletionBlocked(why),
                    &StatusInputs {
                        server: &server,
                        display_name: &team.spec.display_name,
                        generation: team.metadata.generation,
                        team_id: team.status.as_ref().and_then(|s| s.team_id),
                    },
                )),
                next: Next::Wait,
            });
        }
        let recorded = team
            .status
            .as_ref()
            .and_then(|s| s.team_id)
            .map(|id| format!(" (recorded as team {id})"))
            .unwrap_or_default();
        finalizer::release(ctx, team, FINALIZER).await?;
        forget(ctx, team).await;
        events::normal(
            ctx,
            team,
            "Orphaned",
            "Delete",
            format!(
                "spec.deletionPolicy is Orphan: the team on TerdutServer {server}{recorded} was \
                 left as it is, with its ladder, switches and history; released the finalizer"
            ),
        )
        .await;
        info!(team = %key, "orphaned on the server (deletionPolicy Orphan)");
        return Ok(Finalized::Released);
    }
    if !server_cached(ctx, &server) {
        match uncached(ctx, &server).await? {
            Uncached::Absent => {
                events::warning(
                    ctx,
                    team,
                    "ServerGone",
                    "Delete",
                    format!(
                        "TerdutServer {server} no longer exists: released the finalizer without \
                         deleting the team on it (with the server gone there is no API to call, \
                         and the operator never touches a server's database)"
                    ),
                )
                .await;
                finalizer::release(ctx, team, FINALIZER).await?;
                forget(ctx, team).await;
                return Ok(Finalized::Released);
            }
            // Exists, but another instance's (or none's): nobody could delete the team from
            // here, and waiting would keep the object (and its namespace) for good.
            Uncached::NotMine(why) => {
                if made_by_this_object(ctx, team).await? {
                    let recorded = team
                        .status
                        .as_ref()
                        .and_then(|s| s.team_id)
                        .map(|id| format!(" (recorded as team {id})"))
                        .unwrap_or_default();
                    events::warning(
                        ctx,
                        team,
                        "TeamLeftOnServer",
                        "Delete",
                        format!(
                            "TerdutServer {server} is not reconciled by this operator instance \
                             ({why}), so its team{recorded} cannot be deleted from here, and an \
                             instance that reconciles that server does not select this \
                             TerdutTeam; released the finalizer so the deletion can finish. \
                             Delete the team on the server by hand if it should go (next time, \
                             label the TerdutTeam as its TerdutServer is labelled first)"
                        ),
                    )
                    .await;
                } else {
                    info!(team = %key, %why, "server not reconciled here, and no team was ever created for this object");
                }
                finalizer::release(ctx, team, FINALIZER).await?;
                forget(ctx, team).await;
                return Ok(Finalized::Released);
            }
            // The cache lags behind a server created a moment ago.
            Uncached::NotYetSeen => return Ok(wait()),
        }
    }

    let failed = |why: String| {
        format!(
            "could not delete the team on TerdutServer {server} yet: {why}; the finalizer stays \
             and the delete is retried with backoff"
        )
    };
    let (client, consent) = match access(pass, &key.namespace, &server, false).await {
        Ok(answer) => answer,
        Err(outcome) => {
            let why = why(&outcome, team, &server);
            events::warn_once(ctx, team, warned, "TeamDeleteFailed", "Delete", failed(why)).await;
            return Ok(wait());
        }
    };
    if !still_ours(ctx, team).await? {
        return Ok(Finalized::Released);
    }
    let known = team.status.as_ref().and_then(|s| s.team_id).or(remembered);
    // The lookup by external_id is a create call: made only for a team the server accepts
    // and its owner's policy admits, so a refused display name is never created on the server,
    // not even to be deleted again (docs/design.md §4.6 "Policies").
    let refused = if consent != Consent::Allowed {
        Some(format!(
            "TerdutServer {server} does not accept TerdutTeams from namespace {}",
            key.namespace
        ))
    } else {
        match tenancy::admit_team(ctx, team, &server) {
            Admission::Admitted => None,
            Admission::NotAllowed(why) | Admission::OverLimit(why) => Some(why),
            // Still counting: which teams the limit admits is known in a moment.
            Admission::Uncounted => return Ok(wait()),
        }
    };
    let accepted = refused.is_none();
    let made = made_by_this_object(ctx, team).await?;
    let looked_up = if made {
        ours(&client, team, known, &external_id(&key), accepted).await
    } else if accepted {
        info!(team = %key, "no create call was ever recorded for this object; nothing of it on the server");
        finalizer::release(ctx, team, FINALIZER).await?;
        forget(ctx, team).await;
        return Ok(Finalized::Released);
    } else {
        Ok(Ours::NotLookedUp)
    };
    let id = match looked_up {
        Ok(Ours::Id(id)) => Some(id),
        Ok(Ours::NoneExists) => None,
        Ok(Ours::NotLookedUp) => {
            events::warning(
                ctx,
                team,
                "TeamLeftOnServer",
                "Delete",
                format!(
                    "{} and no team id it confirms as {} is known, so nothing was looked up or \
                     deleted there (the only lookup by external_id is a create call, which a \
                     team the server does not accept never makes); released the finalizer. If \
                     such a team exists on the server, delete it there by hand",
                    refused.unwrap_or_default(),
                    external_id(&key)
                ),
            )
            .await;
            finalizer::release(ctx, team, FINALIZER).await?;
            forget(ctx, team).await;
            return Ok(Finalized::Released);
        }
        Err(e) => {
            let why = e.to_string();
            events::warn_once(ctx, team, warned, "TeamDeleteFailed", "Delete", failed(why)).await;
            return Ok(wait());
        }
    };
    if let Some(id) = id {
        match client.delete_team(id).await {
            Ok(Deletion::Deleted) => {
                info!(team = %key, id, "deleted the team on the server");
                events::normal(
                    ctx,
                    team,
                    "TeamDeleted",
                    "Delete",
                    format!("deleted team {id} on TerdutServer {server}"),
                )
                .await;
            }
            Ok(Deletion::AlreadyGone) => {}
            Err(ApiError::OpenIncidents) => {
                events::warn_once(
                    ctx,
                    team,
                    warned,
                    "TeamDeleteRefused",
                    "Delete",
                    format!(
                        "TerdutServer {server} refuses to delete team {id} while it has open \
                         incidents; the finalizer stays and the delete is retried with backoff \
                         until they are resolved"
                    ),
                )
                .await;
                return Ok(wait());
            }
            Err(e) => {
                let why = e.to_string();
                events::warn_once(ctx, team, warned, "TeamDeleteFailed", "Delete", failed(why))
                    .await;
                return Ok(wait());
            }
        }
    }
    finalizer::release(ctx, team, FINALIZER).await?;
    forget(ctx, team).await;
    Ok(Finalized::Released)
}

/// ADR 0013: whether a recorded create call was made for this object (or, for an object older
/// than the records, whether ADR 0007 would have looked its team up: it has the finalizer).
async fn made_by_this_object(ctx: &Ctx, team: &TerdutTeam) -> Result<bool, ReconcileError> {
    let record = ctx.records.get(&team.uid().unwrap_or_default()).await?;
    let created = team.metadata.creation_timestamp.as_ref().map(|t| t.0);
    Ok(record == Record::Made
        || (record == Record::None && ctx.records.older_than_records(created).await?))
}

/// PURE: the alert sources (of `sources`, one namespace's) of the team `team` that still hold
/// their finalizer and will delete their integration: their names, sorted.
pub fn deleting_their_integrations(team: &str, sources: &[TerdutAlertSource]) -> Vec<String> {
    let mut names: Vec<String> = sources
        .iter()
        .filter(|s| s.spec.team_ref.name == team)
        .filter(|s| s.spec.deletion_policy == DeletionPolicy::Delete)
        .filter(|s| finalizer::has(*s, crate::source::names::FINALIZER))
        .map(|s| s.name_any())
        .collect();
    names.sort();
    names
}

/// The message of an orphaned team waiting for `sources`.
fn orphan_waits(server: &ObjectKey, sources: &[String]) -> String {
    format!(
        "spec.deletionPolicy is Orphan, so the team stays on TerdutServer {server}, but deleting \
         it there is what would delete the integrations of its alert sources: TerdutAlertSource \
         {} still {} a live integration with a working webhook key on it. The finalizer stays \
         until {} deleted (each deletes its integration first) or set to deletionPolicy: Orphan",
        sources.join(", "),
        if sources.len() == 1 { "has" } else { "have" },
        if sources.len() == 1 {
            "it is"
        } else {
            "they are"
        },
    )
}

/// The object is gone: its record with it. A failure only leaves a record of a uid that never
/// comes back (logged).
async fn forget(ctx: &Ctx, team: &TerdutTeam) {
    if let Err(e) = ctx.records.forget(&team.uid().unwrap_or_default()).await {
        tracing::warn!(team = %ObjectKey::of(team), error = %e, "could not forget the team's record");
    }
}

/// Whether the object still exists (same uid) with our finalizer, read live. The copy a pass
/// runs on (the cache, or the supervisor's last copy once the cache dropped it) can outlive the
/// object: a pass queued behind the one that deleted the team and released the finalizer would
/// find the team gone (404), POST to look for it and so create a new one; were the operator
/// killed before the DELETE right after, that team would be orphaned, with no CR left to
/// delete it (found by `just chaos`).
async fn still_ours(ctx: &Ctx, team: &TerdutTeam) -> Result<bool, ReconcileError> {
    let key = ObjectKey::of(team);
    let api: Api<TerdutTeam> = Api::namespaced(ctx.kube.clone(), &key.namespace);
    match api.get_opt(&key.name).await {
        Ok(live) => {
            Ok(live.is_some_and(|l| l.uid() == team.uid() && finalizer::has(&l, FINALIZER)))
        }
        Err(e) => Err(ReconcileError::kube("get", format!("TerdutTeam {key}"), e)),
    }
}

/// What [`ours`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ours {
    /// The server confirms this id is the team's `external_id`.
    Id(Id),
    /// No team with this `external_id` exists (the POST met the name of another team).
    NoneExists,
    /// No known id is confirmed, and the server does not accept this namespace, so the POST
    /// that would find the team by `external_id` was not made.
    NotLookedUp,
}

/// The id of our team on the server, if one exists (see the module doc for the POST). A known
/// id (status or memory: hints a tenant can write) counts only once the server confirms it;
/// the POST is made only for a namespace the server accepts.
async fn ours(
    client: &TerdutClient,
    team: &TerdutTeam,
    known: Option<Id>,
    external_id: &str,
    accepted: bool,
) -> Result<Ours, ApiError> {
    if let Some(id) = known {
        match client.get_team(id).await {
            Ok(t) if t.id == id && t.external_id == external_id => return Ok(Ours::Id(id)),
            Ok(_) | Err(ApiError::NotFound) => {}
            Err(e) => return Err(e),
        }
    }
    if !accepted {
        return Ok(Ours::NotLookedUp);
    }
    match client
        .create_team(&team.spec.display_name, external_id)
        .await
    {
        Ok(c) => Ok(Ours::Id(c.team().id)),
        Err(ApiError::TeamNameTaken) => Ok(Ours::NoneExists),
        Err(e) => Err(e),
    }
}

/// The Ready message an access refusal would have, for the Warning's note.
fn why(outcome: &Outcome, team: &TerdutTeam, server: &ObjectKey) -> String {
    let status = desired_status(
        outcome,
        &StatusInputs {
            server,
            display_name: &team.spec.display_name,
            generation: team.metadata.generation,
            team_id: None,
        },
    );
    status.ready.map(|c| c.message).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(name: &str, team: &str, policy: &str, finalizers: &[&str]) -> TerdutAlertSource {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutAlertSource",
            "metadata": {"name": name, "namespace": "ns", "finalizers": finalizers},
            "spec": {"teamRef": {"name": team}, "kind": "generic", "name": name,
                     "deletionPolicy": policy},
        }))
        .unwrap()
    }

    #[test]
    fn an_orphaned_team_waits_for_the_sources_that_delete_their_integration() {
        let f = crate::source::names::FINALIZER;
        let sources = [
            source("b", "payments", "Delete", &[f]),
            source("a", "payments", "Delete", &[f, "other.io/x"]),
            // Leaves its integration on purpose.
            source("kept", "payments", "Orphan", &[f]),
            // Already released (or never had one): nothing of it left to delete.
            source("done", "payments", "Delete", &[]),
            // Another team's.
            source("other", "billing", "Delete", &[f]),
        ];
        assert_eq!(
            deleting_their_integrations("payments", &sources),
            ["a", "b"]
        );
        assert!(deleting_their_integrations("nobody", &sources).is_empty());
        let m = orphan_waits(&ObjectKey::new("oncall", "terdut"), &["a".into()]);
        assert!(
            m.contains("TerdutAlertSource a still has") && m.contains("oncall/terdut"),
            "{m}"
        );
    }
}
