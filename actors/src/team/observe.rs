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

use std::sync::Arc;

use kube::runtime::reflector::ObjectRef;
use terdut_crds::v1alpha1::TerdutTeam;

use super::plan::{Desired, Observed as ServerState, desired};
use super::status::{Outcome, converged};
use super::{FINALIZER, TeamMemory};
use crate::api::{ApiError, Id, Team, TerdutClient};
use crate::consent::Consent;
use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::key::ObjectKey;
use crate::pipeline::Pass;
use crate::server::observe::team_server_key;
use crate::tenancy::{self, decide::Admission};
use crate::tree::Credentials;
use crate::write::finalizer;

/// What observing found.
#[derive(Debug)]
pub enum Observed {
    /// The pass ends here: no call to the server was possible or allowed.
    Stopped {
        outcome: Outcome,
        team_id: Option<Id>,
    },
    /// The server may be called.
    Reachable(Box<Reachable>),
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
    /// The object carried the finalizer before this pass (ADR 0007).
    pub had_finalizer: bool,
}

pub async fn observe(
    pass: Pass<'_>,
    team: &TerdutTeam,
    memory: &TeamMemory,
) -> Result<Observed, ReconcileError> {
    let key = ObjectKey::of(team);
    let server = team_server_key(team);
    let status = team.status.as_ref();
    let team_id = status.and_then(|s| s.team_id).or(memory.team_id);
    let stopped = |outcome| Ok(Observed::Stopped { outcome, team_id });

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
    let known = match team_id {
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
    Ok(Observed::Reachable(Box::new(Reachable {
        client,
        server,
        desired,
        known,
        team_id,
        drift: converged(status, team.metadata.generation),
        had_finalizer: finalizer::has(team, FINALIZER),
    })))
}

/// Whether the TerdutServer `server` is in the informer cache.
pub fn server_cached(ctx: &Ctx, server: &ObjectKey) -> bool {
    ctx.stores
        .servers
        .get(&ObjectRef::new(&server.name).within(&server.namespace))
        .is_some()
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
        return Err(Outcome::ServerRefNotFound);
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
