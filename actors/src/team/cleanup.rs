//! The IO of a TerdutTeam's deletion: answers the questions of its plan (`finalize.rs`), one
//! read or server call each; what to do with the answers is the plan's, and releasing the
//! finalizer is the pipeline driver's (`pipeline::deletion`).

use kube::ResourceExt;
use kube::api::Api;
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutTeam};
use tracing::info;

use super::finalize::{self, Facts, Ours, Question, deleting_their_integrations};
use super::guard::Record;
use super::observe::{access, server_cached, uncached};
use super::plan::external_id;
use super::status::DesiredStatus;
use super::{FINALIZER, TeamMemory};
use crate::api::{ApiError, Deletion as Removed, Id, TerdutClient};
use crate::context::Ctx;
use crate::error::{KubeCall, ReconcileError};
use crate::key::ObjectKey;
use crate::pipeline::{Deletion, Pass, Step};
use crate::server::observe::team_server_key;
use crate::tenancy;
use crate::write::finalizer;

/// The TerdutTeam's deletion.
#[derive(Debug)]
pub struct TeamDeletion;

impl Deletion for TeamDeletion {
    type Object = TerdutTeam;
    type Memory = TeamMemory;
    type Desired = DesiredStatus;
    type Facts = Facts;
    type Question = Question;

    const FINALIZER: Option<&'static str> = Some(FINALIZER);

    fn step(
        team: &TerdutTeam,
        memory: &TeamMemory,
        facts: &Facts,
    ) -> Step<Question, DesiredStatus> {
        finalize::step(team, memory, facts)
    }

    async fn learn<'a>(
        pass: Pass<'a>,
        team: &'a TerdutTeam,
        question: Question,
        f: &'a mut Facts,
        _memory: &'a mut TeamMemory,
    ) -> Result<(), ReconcileError> {
        let ctx = pass.ctx;
        let key = ObjectKey::of(team);
        let server = team_server_key(team);
        match question {
            Question::Policy => f.policy = Some(tenancy::deletion_policy(ctx, team, &server)),
            Question::Sources => {
                let sources: Api<TerdutAlertSource> =
                    Api::namespaced(ctx.kube.clone(), &key.namespace);
                let listed = sources.list(&Default::default()).await.map_err(|e| {
                    ReconcileError::kube(
                        KubeCall::ListTeamSources,
                        format!("TerdutAlertSources in {}", key.namespace),
                        e,
                    )
                })?;
                f.sources = Some(deleting_their_integrations(&key.name, &listed.items));
            }
            Question::Server => {
                f.server = Some(if server_cached(ctx, &server) {
                    None
                } else {
                    Some(uncached(ctx, &server).await?)
                });
            }
            Question::Access => {
                f.access = Some(access(pass, &key.namespace, &server, false).await);
            }
            Question::StillOurs => f.still_ours = Some(still_ours(ctx, team).await?),
            Question::Admission => f.admission = Some(tenancy::admit_team(ctx, team, &server)),
            Question::Made => f.made = Some(made_by_this_object(ctx, team).await?),
            Question::Lookup { known, accepted } => {
                let Some(Ok((client, _))) = &f.access else {
                    return Err(unasked("a lookup", team));
                };
                let found = ours(client, team, known, &external_id(&key), accepted).await;
                f.lookup = Some(found.map_err(|e| e.to_string()));
            }
            Question::Delete(id) => {
                let Some(Ok((client, _))) = &f.access else {
                    return Err(unasked("a DELETE", team));
                };
                let deleted = client.delete_team(id).await;
                if let Ok(Removed::Deleted) = deleted {
                    info!(team = %key, id, "deleted the team on the server");
                }
                f.deleted = Some(deleted);
            }
        }
        Ok(())
    }

    /// The object is gone: its record with it. A failure only leaves a record of a uid that
    /// never comes back (logged).
    async fn released<'a>(ctx: &'a Ctx, team: &'a TerdutTeam) {
        if let Err(e) = ctx.records.forget(&team.uid().unwrap_or_default()).await {
            tracing::warn!(team = %ObjectKey::of(team), error = %e, "could not forget the team's record");
        }
    }

    fn warned(memory: &mut TeamMemory) -> Option<&mut Option<String>> {
        Some(&mut memory.warned)
    }
}

/// A plan that asks for a server call before it has a client is a bug in the plan.
fn unasked(what: &str, team: &TerdutTeam) -> ReconcileError {
    ReconcileError::Invalid(format!(
        "the deletion plan of TerdutTeam {} asked for {what} before it had a client",
        ObjectKey::of(team)
    ))
}

/// ADR 0013: whether a recorded create call was made for this object (or, for an object older
/// than the records, whether ADR 0007 would have looked its team up: it has the finalizer).
async fn made_by_this_object(ctx: &Ctx, team: &TerdutTeam) -> Result<bool, ReconcileError> {
    let record = ctx.records.get(&team.uid().unwrap_or_default()).await?;
    let created = team.metadata.creation_timestamp.as_ref().map(|t| t.0);
    Ok(record == Record::Made
        || (record == Record::None && ctx.records.older_than_records(created).await?))
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
        Err(e) => Err(ReconcileError::kube(
            KubeCall::ReadTeamLive,
            format!("TerdutTeam {key}"),
            e,
        )),
    }
}

/// The id of our team on the server, if one exists (see `finalize.rs` for the POST). A known
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
