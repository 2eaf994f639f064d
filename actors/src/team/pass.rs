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
use tracing::{debug, info, warn};

use super::access::{Access, access};
use super::apply::{self, Failure, classify, event_for, execute};
use super::events;
use super::finalizer;
use super::observe;
use super::plan::{Desired, Observed, create_or_find, desired, plan};
use super::status::{ADOPT_ANNOTATION, Outcome, converged};
use crate::api::{Id, Team, TeamCreate, TerdutClient};
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
    // Held before this pass: a team of this identity may have been created by an earlier pass
    // of this object (and found again now), not by an earlier object (ADR 0007).
    let had_finalizer = finalizer::has(team);
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
    // The team this actor itself last converged is gone: the server lost its data (a restored
    // backup, a reset database), so every team and source of it must look now, not at their
    // resyncs. Only an id the actor remembers counts: a status is the tenant's to write.
    if known.is_none()
        && team_id.is_some()
        && team_id == remembered
        && let Some(hooks) = ctx.on_server.get()
    {
        hooks.data_lost(&server);
    }
    let observed = match known {
        Some(o) => o,
        // `team_id`, if any, names no team of ours any more: it was deleted on the server.
        None => {
            let earlier = Earlier {
                lost: team_id,
                had_finalizer,
            };
            match found_or_created(ctx, team, &client, &desired, &server, earlier, drift).await {
                Ok(o) => o,
                Err(outcome) => return Ok(ended(outcome, None)),
            }
        }
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

/// What this object knew of a team before the create-or-find step.
#[derive(Clone, Copy, Debug)]
struct Earlier {
    /// The id status (or the actor) had, whose team is gone: a 201 then means the team was
    /// recreated (a Warning Event).
    lost: Option<Id>,
    /// The object carried the finalizer before this pass, so an earlier pass of it may have
    /// created the team (the finalizer goes on before the first create).
    had_finalizer: bool,
}

impl Earlier {
    /// Nothing ties this object to a team: one found by `external_id` was made for another.
    fn knows_nothing(&self) -> bool {
        self.lost.is_none() && !self.had_finalizer
    }
}

/// A team with this object's `external_id` that this object never made (ADR 0007): a namespace
/// deleted and recreated, or a new TerdutTeam reusing an old one's name. Taken over only with
/// [`ADOPT_ANNOTATION`] naming its id, with a Warning either way; otherwise the finalizer just
/// added is released again (the object holds nothing on the server, so deleting it must not
/// delete that team) and the pass ends `Adopted`.
async fn adopt(ctx: &Ctx, team: &TerdutTeam, server: &ObjectKey, t: &Team) -> Result<(), Outcome> {
    let opted_in = team.annotations().get(ADOPT_ANNOTATION).map(String::as_str)
        == Some(t.id.to_string().as_str());
    if opted_in {
        info!(team = %team.name_any(), id = t.id, "adopting the existing team (annotation)");
        events::warning(
            ctx,
            team,
            "Adopted",
            "Adopt",
            format!(
                "took over team {} ({:?}) on TerdutServer {server}, which existed before this \
                 TerdutTeam with its external_id {}, as {ADOPT_ANNOTATION} asks; what the server \
                 kept with it, such as its incident history, stays with it",
                t.id, t.name, t.external_id
            ),
        )
        .await;
        return Ok(());
    }
    warn!(team = %team.name_any(), id = t.id, "a team with this external_id exists; not adopted without the annotation");
    if let Err(e) = finalizer::release_live(ctx, team).await {
        return Err(Outcome::WaitingForServer(format!(
            "team {} exists on TerdutServer {server} and is not adopted, but the finalizer could \
             not be released yet: {e}; retrying",
            t.id
        )));
    }
    Err(Outcome::Adopted { team_id: t.id })
}

/// The create-or-find step for a team the pass knows no (valid) id of.
async fn found_or_created(
    ctx: &Ctx,
    team: &TerdutTeam,
    client: &TerdutClient,
    desired: &Desired,
    server: &ObjectKey,
    earlier: Earlier,
    drift: bool,
) -> Result<Observed, Outcome> {
    let lost = earlier.lost;
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
        TeamCreate::Found(t) if earlier.knows_nothing() => {
            adopt(ctx, team, server, &t).await?;
            let id = t.id;
            observe::rest(client, t).await.map_err(|e| {
                Outcome::WaitingForServer(format!(
                    "TerdutServer {server} could not be read (team {id}): {e}; retrying"
                ))
            })
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
