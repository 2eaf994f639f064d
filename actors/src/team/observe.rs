//! The observing half of a TerdutTeam pass (docs/design.md §4.2, §4.6, §5): what the spec
//! asks for, whether the server may be called at all (it exists, it accepts the namespace,
//! its actor has a client the server accepts), and the team as the server has it.
//!
//! Consent is asked before anything touches the server, so a revoked consent stops every
//! call, reads included, and leaves the team on the server as it is (§4.6); so is the server
//! owner's policy for the namespace (`tenancy/`, §4.6 "Policies").
//!
//! **What is read to see drift**: `GET /teams/{id}`, `GET .../escalation` and
//! `GET .../deadman-switches` — three reads, no write. With a known id the team is read with
//! a GET rather than the idempotent POST: the POST is a write (it would create the team if it
//! had been deleted, before the operator could notice and report it). A GET that answers 404,
//! or a team with another `external_id` (the server's database was replaced and the id
//! reused, or the id in status was written by hand), means the team is unknown: the plan is
//! then the POST alone.
//!
//! **A team found by id is not yet this object's**: the id may be a tenant's forgery, or the
//! team an earlier object's of the same namespace and name. The guard (`guard.rs`, ADR 0013)
//! judges it from the operator's records before anything is planned on it; a team it declines
//! is [`Observed::Declined`], and nothing is planned.

use std::sync::Arc;

use kube::runtime::reflector::ObjectRef;
use terdut_crds::v1alpha1::TerdutTeam;

use kube::ResourceExt;

use super::guard::{self, Evidence, Judgement, Legacy, Reached, Record};
use super::plan::{Desired, Observed as ServerState, desired};
use super::status::{Outcome, converged};
use super::{ADOPT_ANNOTATION, Applied, FINALIZER, TeamMemory};
use crate::api::{ApiError, Id, Team, TerdutClient};
use crate::consent::Consent;
use crate::context::Ctx;
use crate::error::{KubeCall, ReconcileError};
use crate::key::ObjectKey;
use crate::pipeline::{Observation, Pass};
use crate::server::observe::team_server_key;
use crate::tenancy::{self, decide::Admission};
use crate::tree::Credentials;
use crate::write::finalizer;

/// What observing found.
#[derive(Debug)]
pub enum Observed {
    /// The server may be called.
    Reachable(Box<Reachable>),
    /// A known id names a team of this object's `external_id` that the guard says this object
    /// did not make: nothing is planned on it (`Adopted`).
    Declined(Box<Declined>),
}

/// See [`Observed::Declined`].
#[derive(Debug)]
pub struct Declined {
    pub server: ObjectKey,
    pub team: Team,
    /// What the records keep of the object ([`guard::kept_after_decline`]).
    pub keep: Record,
}

/// A team whose server may be called, and what it holds.
#[derive(Debug)]
pub struct Reachable {
    pub client: Arc<TerdutClient>,
    pub server: ObjectKey,
    pub desired: Desired,
    /// The team the known id names on the server (`None`: unknown, create-or-find).
    pub known: Option<ServerState>,
    /// The id the status (or the actor) had.
    pub team_id: Option<Id>,
    /// The last pass had converged on this spec: differences now were made behind the
    /// operator's back.
    pub drift: bool,
    /// The object carried the finalizer before this pass (ADR 0007, for objects older than
    /// the records).
    pub had_finalizer: bool,
    /// `known` is not this object's, but the adopt annotation names it: take it over.
    pub adopt: bool,
    /// `known` is this object's by ADR 0007's rule (the object is older than the records):
    /// recorded now, so nothing written later changes that judgement.
    pub record: bool,
}

pub async fn observe(
    pass: Pass<'_>,
    team: &TerdutTeam,
    memory: &TeamMemory,
) -> Result<Observation<Observed, Applied>, ReconcileError> {
    let key = ObjectKey::of(team);
    let server = team_server_key(team);
    let status = team.status.as_ref();
    let team_id = status.and_then(|s| s.team_id).or(memory.team_id);
    // No call to the server was possible or allowed: the pass ends here.
    let stopped = |outcome| Ok(Observation::End(Applied { outcome, team_id }));

    let desired = match desired(&key, &team.spec) {
        Ok(d) => d,
        Err(e) => return stopped(Outcome::InvalidSpec(e.0)),
    };
    let client = match access(pass, &key.namespace, &server, true).await {
        Ok((client, _allowed)) => client,
        Err(outcome) => return stopped(outcome),
    };
    // The server owner's policy for this namespace, before any call (docs/design.md §4.6).
    match tenancy::admit_team(pass.ctx, team, &server) {
        Admission::Admitted => {}
        Admission::NotAllowed(why) => return stopped(Outcome::PolicyDenied(why)),
        Admission::OverLimit(why) => return stopped(Outcome::TeamLimitReached(why)),
        Admission::Uncounted => {
            return stopped(Outcome::WaitingForServer(format!(
                "the TerdutTeams of this namespace on TerdutServer {server} are still being \
                 counted for its policy's maxTeams; retrying"
            )));
        }
    }
    // The id a pass declined is looked at by GET, so a declined team costs no write.
    let known = match team_id.or(memory.declined) {
        Some(id) => match known_team(&client, id, &desired.external_id).await {
            Ok(known) => known,
            Err(e) => {
                let why = format!("TerdutServer {server} could not be read: {e}; retrying");
                return stopped(Outcome::WaitingForServer(why));
            }
        },
        None => None,
    };
    // The team this actor itself last converged is gone: the server lost its data (a restored
    // backup, a reset database), so every team and source of it must look now, not at their
    // resyncs. Only an id the actor remembers counts: a status is the tenant's to write.
    if known.is_none() && team_id.is_some() && team_id == memory.team_id {
        pass.parent.data_lost(&server);
    }
    let had_finalizer = finalizer::has(team, FINALIZER);
    let (mut adopt, mut record_it) = (false, false);
    if let Some(state) = &known {
        let record = pass
            .ctx
            .records
            .get(&team.uid().unwrap_or_default())
            .await?;
        let e = evidence(
            pass.ctx,
            team,
            memory,
            Reached::ById,
            state.team.id,
            false,
            record,
        )
        .await?;
        match guard::judge(&e) {
            Judgement::Ours => record_it = e.legacy.is_some(),
            Judgement::Adopt => adopt = true,
            Judgement::Decline => {
                return Ok(Observation::Go(Observed::Declined(Box::new(Declined {
                    server,
                    team: state.team.clone(),
                    keep: guard::kept_after_decline(record, e.legacy.is_some()),
                }))));
            }
        }
    }
    Ok(Observation::Go(Observed::Reachable(Box::new(Reachable {
        client,
        server,
        desired,
        known,
        team_id,
        drift: converged(status, team.metadata.generation),
        had_finalizer,
        adopt,
        record: record_it,
    }))))
}

/// What the guard reads about `team` for the team `id` it reached: the operator's `record` of
/// it as it was before this pass wrote anything, whether the object is older than the records
/// (and then ADR 0007's evidence: the finalizer before the pass, `lost_id`), and the adopt
/// annotation.
pub async fn evidence(
    ctx: &Ctx,
    team: &TerdutTeam,
    memory: &TeamMemory,
    reached: Reached,
    id: Id,
    lost_id: bool,
    record: Record,
) -> Result<Evidence, ReconcileError> {
    let created = team.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let legacy = if record == Record::None && ctx.records.older_than_records(created).await? {
        Some(Legacy {
            // A finalizer this actor added and released again when it declined the team says
            // nothing about who made it: a cached copy right after can still show it.
            had_finalizer: finalizer::has(team, FINALIZER) && memory.declined.is_none(),
            lost_id,
        })
    } else {
        None
    };
    Ok(Evidence {
        reached,
        team: id,
        record,
        legacy,
        opt_in: guard::opt_in(team.annotations().get(ADOPT_ANNOTATION).map(String::as_str)),
    })
}

/// Whether the TerdutServer `server` is in the informer cache.
pub fn server_cached(ctx: &Ctx, server: &ObjectKey) -> bool {
    ctx.stores
        .servers
        .get(&ObjectRef::new(&server.name).within(&server.namespace))
        .is_some()
}

/// What a live look finds of a TerdutServer the caches do not show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Uncached {
    /// There is no such TerdutServer.
    Absent,
    /// It is outside this instance's scope (`routing::scope`): why. Its namespace may not be
    /// watched at all, so it was not read: it may also not exist.
    NotMine(String),
    /// It exists and is this instance's: the cache has not caught up yet.
    NotYetSeen,
}

/// Looks at a TerdutServer the caches do not show: a metadata read, unless its namespace is
/// outside the scope (where this instance may have no right to read).
pub async fn uncached(ctx: &Ctx, server: &ObjectKey) -> Result<Uncached, ReconcileError> {
    let scope = ctx.config.scope();
    let namespace_labels = ctx
        .stores
        .namespaces
        .get(&ObjectRef::new(&server.namespace))
        .map(|n| n.metadata.labels.clone().unwrap_or_default());
    if let Some(why) = scope.namespace_excluded(&server.namespace, namespace_labels.as_ref()) {
        return Ok(Uncached::NotMine(why));
    }
    let api: kube::Api<terdut_crds::v1alpha1::TerdutServer> =
        kube::Api::namespaced(ctx.kube.clone(), &server.namespace);
    let meta = api.get_metadata_opt(&server.name).await.map_err(|e| {
        ReconcileError::kube(
            KubeCall::ReadTeamServer,
            format!("TerdutServer {server}"),
            e,
        )
    })?;
    Ok(match meta {
        None => Uncached::Absent,
        Some(m) => {
            let labels = m.metadata.labels.unwrap_or_default();
            match scope.excluded(&server.namespace, namespace_labels.as_ref(), &labels) {
                Some(why) => Uncached::NotMine(format!("it exists, but {why}")),
                None => Uncached::NotYetSeen,
            }
        }
    })
}

/// The Ready outcome of a team whose TerdutServer the caches do not show.
async fn uncached_outcome(ctx: &Ctx, server: &ObjectKey) -> Outcome {
    match uncached(ctx, server).await {
        Ok(Uncached::Absent) => Outcome::ServerRefNotFound,
        Ok(Uncached::NotMine(why)) => Outcome::ServerNotReconciled(why),
        Ok(Uncached::NotYetSeen) => Outcome::WaitingForServer(format!(
            "TerdutServer {server} exists but the operator has not seen it yet; retrying"
        )),
        Err(e) => Outcome::WaitingForServer(format!(
            "TerdutServer {server} could not be read: {e}; retrying"
        )),
    }
}

/// The client of `server` for a team in `team_namespace` with the server's consent for that
/// namespace, or why there is no client (a Ready reason): one question to the parent. A
/// refusal is an error only when `check_consent`: a deletion goes ahead without consent
/// (docs/design.md §4.6, last bullet) and reads it to decide what it may look up.
pub async fn access(
    pass: Pass<'_>,
    team_namespace: &str,
    server: &ObjectKey,
    check_consent: bool,
) -> Result<(Arc<TerdutClient>, Consent), Outcome> {
    let ctx = pass.ctx;
    if !server_cached(ctx, server) {
        return Err(uncached_outcome(ctx, server).await);
    }
    let access = pass.parent.access(ctx, server, team_namespace).await;
    if check_consent && let Consent::Refused(why) = access.consent {
        return Err(Outcome::RefNotPermitted(why));
    }
    match access.credentials {
        Credentials::Ready(client) => Ok((client, access.consent)),
        Credentials::NotReady(why) => Err(Outcome::WaitingForServer(why)),
    }
}

/// The team with id `team_id` as the server has it, with its ladder and switches; `None`
/// when there is no such team, or it is another one (another `external_id`).
pub async fn known_team(
    client: &TerdutClient,
    team_id: Id,
    external_id: &str,
) -> Result<Option<ServerState>, ApiError> {
    let team = match client.get_team(team_id).await {
        Ok(t) if t.id == team_id && t.external_id == external_id => t,
        Ok(_) | Err(ApiError::NotFound) => return Ok(None),
        Err(e) => return Err(e),
    };
    rest(client, team).await.map(Some)
}

/// The ladder and switches of `team`, e.g. one the POST found by its `external_id`.
pub async fn rest(client: &TerdutClient, team: Team) -> Result<ServerState, ApiError> {
    let (ladder, switches) = tokio::try_join!(
        client.get_escalation(team.id),
        client.list_switches(team.id)
    )?;
    Ok(ServerState {
        team,
        ladder,
        switches,
    })
}

/// A team the POST just created (201): nothing on it yet, so nothing to read.
pub fn fresh(team: Team) -> ServerState {
    ServerState {
        team,
        ladder: None,
        switches: vec![],
    }
}
