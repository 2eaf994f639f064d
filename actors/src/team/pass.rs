//! One reconcile pass of a TerdutTeam that is not being deleted (DESIGN §4.2, §4.6, §5):
//!
//! ```text
//! spec ──desired()──▶ InvalidSpec? ─▶ server exists? consent? client? ─▶ finalizer
//!   ─▶ observe (GET team, ladder, switches) or create-or-find (POST)
//!   ─▶ plan() ─▶ execute in order ─▶ Outcome + teamID  (the actor writes status from them)
//! ```
//!
//! Consent is asked before anything else touches the server, so a revoked consent stops every
//! call, reads included, and leaves the team on the server as it is (DESIGN §4.6).

use kube::ResourceExt;
use terdut_crds::v1alpha1::TerdutTeam;
use tracing::{debug, info};

use super::access::{Access, access};
use super::apply::{self, Failure, classify, event_for, execute};
use super::events;
use super::finalizer;
use super::observe;
use super::plan::{Desired, Observed, create_or_find, desired, plan};
use super::status::{Outcome, converged};
use crate::api::{Id, TeamCreate, TerdutClient};
use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::key::ObjectKey;
use crate::server::observe::team_server_key;

/// How the pass ended and the team's id as it now knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassResult {
    pub outcome: Outcome,
    pub team_id: Option<Id>,
}

fn ended(outcome: Outcome, team_id: Option<Id>) -> PassResult {
    PassResult { outcome, team_id }
}

/// Runs the pass. `Err` only for a failed Kubernetes write (the finalizer); everything the
/// server answers is an [`Outcome`].
///
/// `remembered`: the team id the actor's previous pass ended with, used when the cached
/// object has none: a nudge queued while the pass that created the team ran can be handled
/// before the cache has that pass's status write, and would otherwise repeat the POST. An id
/// that names no team of ours is dropped like a stale `status.teamID`.
pub async fn converge(
    ctx: &Ctx,
    team: &TerdutTeam,
    remembered: Option<Id>,
) -> Result<PassResult, ReconcileError> {
    let key = ObjectKey::of(team);
    let server = team_server_key(team);
    let status = team.status.as_ref();
    let team_id = status.and_then(|s| s.team_id).or(remembered);

    let desired = match desired(&key, &team.spec) {
        Ok(d) => d,
        Err(e) => return Ok(ended(Outcome::InvalidSpec(e.0), team_id)),
    };
    let client = match access(ctx, &key.namespace, &server, true).await {
        Access::Granted(c) => c,
        Access::Denied(outcome) => return Ok(ended(outcome, team_id)),
    };
    finalizer::add(ctx, team).await?;
    // Anything that differs now while the last pass had converged on this very spec was
    // changed on the server behind the operator's back.
    let drift = converged(status, team.metadata.generation);

    let known = match team_id {
        Some(id) => match observe::known_team(&client, id, &desired.external_id).await {
            Ok(known) => known,
            Err(e) => {
                let why = format!("TerdutServer {server} could not be read: {e}; retrying");
                return Ok(ended(Outcome::WaitingForServer(why), team_id));
            }
        },
        None => None,
    };
    let observed = match known {
        Some(o) => o,
        // `team_id`, if any, names no team of ours any more: it was deleted on the server.
        None => match found_or_created(ctx, team, &client, &desired, &server, team_id, drift).await
        {
            Ok(o) => o,
            Err(outcome) => return Ok(ended(outcome, None)),
        },
    };
    let team_id = Some(observed.team.id);

    let calls = plan(&desired, Some(&observed));
    debug!(team = %key, ?calls, "planned");
    let (mut blocked, mut stopped) = (None, None);
    for call in calls {
        match execute(&client, &call).await {
            Ok(_) => {
                info!(team = %key, call = %apply::describe(&call), drift, "applied");
                if drift {
                    ctx.metrics.drift_corrected("team");
                }
                if let Some(ev) = event_for(&call, drift) {
                    events::normal(ctx, team, ev.reason, ev.action, ev.note).await;
                }
            }
            Err(e) => match classify(&call, &e, &server) {
                Failure::Blocks(outcome) => {
                    blocked.get_or_insert(outcome);
                }
                Failure::Stops(outcome) => {
                    stopped = Some(outcome);
                    break;
                }
            },
        }
    }
    // A refusal the user must act on says more than a hiccup that stopped the later calls.
    let outcome = blocked.or(stopped).unwrap_or(Outcome::Ready);
    Ok(ended(outcome, team_id))
}

/// The create-or-find step for a team the pass knows no (valid) id of. `lost`: the id status
/// had, whose team is gone: a 201 then means the team was recreated (a Warning Event).
async fn found_or_created(
    ctx: &Ctx,
    team: &TerdutTeam,
    client: &TerdutClient,
    desired: &Desired,
    server: &ObjectKey,
    lost: Option<Id>,
    drift: bool,
) -> Result<Observed, Outcome> {
    let call = create_or_find(desired);
    let created = match apply::create(client, desired).await {
        Ok(created) => created,
        Err(e) => return Err(classify(&call, &e, server).outcome().clone()),
    };
    match created {
        TeamCreate::Created(t) => {
            if drift {
                ctx.metrics.drift_corrected("team");
            }
            match lost {
                Some(old) => {
                    events::warning(
                        ctx,
                        team,
                        "TeamRecreated",
                        "Create",
                        format!(
                            "team {old} was deleted on TerdutServer {server} behind the \
                             operator's back; created it again as team {} and applying the \
                             spec to it (what the server kept with the old team, such as its \
                             incident history, is not restored)",
                            t.id
                        ),
                    )
                    .await
                }
                None => {
                    events::normal(
                        ctx,
                        team,
                        "TeamCreated",
                        "Create",
                        format!(
                            "created team {} ({:?}) on TerdutServer {server} with external_id {}",
                            t.id, t.name, t.external_id
                        ),
                    )
                    .await
                }
            }
            info!(team = %team.name_any(), id = t.id, "created the team on the server");
            Ok(observe::fresh(t))
        }
        TeamCreate::Found(t) => {
            // A lost status or a crash after the create: the same team, found by its identity.
            info!(team = %team.name_any(), id = t.id, "found the team on the server by its external_id");
            let id = t.id;
            observe::rest(client, t).await.map_err(|e| {
                Outcome::WaitingForServer(format!(
                    "TerdutServer {server} could not be read (team {id}): {e}; retrying"
                ))
            })
        }
    }
}
