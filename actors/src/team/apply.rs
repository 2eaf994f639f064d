//! The only place a TerdutTeam pass writes to its server: runs the planned calls in order
//! (docs/design.md §4.2: create-or-find, rename, OIDC groups, the ladder, the switches), says
//! what each failure means for the pass, and describes each applied call for its Event (§12).
//!
//! When no team is known the plan is the create-or-find POST alone; its answer (the team it
//! created, or found by `external_id`) is observed and planned again, so one pass converges.
//! Before that POST the operator records, durably and where no tenant can write, that it sends
//! a create call for this object (`records.rs`); a team the POST finds is this object's only if
//! the guard says so from that record (ADR 0013), and is otherwise taken over only with the
//! adopt annotation naming its id.

use kube::ResourceExt;
use terdut_crds::v1alpha1::TerdutTeam;
use tracing::{info, warn};

use super::guard::{self, Judgement, Reached, Record};
use super::observe::{self, Observed, Reachable};
use super::plan::{self, Call, Desired, describe};
use super::status::Outcome;
use super::{ADOPT_ANNOTATION, Applied, FINALIZER, TeamMemory};
use crate::api::{ApiError, Id, Team, TeamCreate, TerdutClient};
use crate::context::Ctx;
use crate::error::{KubeCall, ReconcileError};
use crate::key::ObjectKey;
use crate::kind::Kind;
use crate::pipeline::Pass;
use crate::write::{events, finalizer};

/// Carries out `calls` (the plan of `observed`). `Err` only for a failed Kubernetes write
/// (the finalizer, the records); everything the server answers is an [`Outcome`].
pub async fn apply(
    pass: Pass<'_>,
    team: &TerdutTeam,
    observed: Observed,
    calls: Vec<Call>,
    memory: &mut TeamMemory,
) -> Result<Applied, ReconcileError> {
    let ctx = pass.ctx;
    let r = match observed {
        Observed::Declined(d) => {
            return decline(ctx, team, &d.server, &d.team, d.keep, false, memory).await;
        }
        Observed::Reachable(r) => r,
    };
    // The driver added the finalizer before this first call that can create the team
    // (`Team::holds`).
    let Reachable {
        client,
        server,
        desired,
        known,
        team_id,
        drift,
        had_finalizer,
        adopt,
        record,
    } = *r;
    let key = ObjectKey::of(team);
    let (calls, team_id) = match known {
        Some(state) => {
            if adopt {
                adopted(ctx, team, &server, &state.team).await?;
            } else if record {
                ctx.records
                    .made(&team.uid().unwrap_or_default(), &key)
                    .await?;
            }
            memory.declined = None;
            (calls, Some(state.team.id))
        }
        // `team_id`, if any, names no team of ours any more: it was deleted on the server.
        None => {
            let uid = team.uid().unwrap_or_default();
            // Whether an earlier pass sent a create call for this object: then a team found
            // by external_id is the one that call made (its answer lost to a crash or timeout).
            let created = team.metadata.creation_timestamp.as_ref().map(|t| t.0);
            let before = ctx
                .records
                .get_before_create(&uid, had_finalizer, created)
                .await?;
            ctx.records.made(&uid, &key).await?;
            let found =
                match found_or_created(ctx, team, &client, &desired, &server, team_id, drift).await
                {
                    Ok(found) => found,
                    Err(outcome) => {
                        memory.team_id = None;
                        return Ok(Applied {
                            outcome,
                            team_id: None,
                        });
                    }
                };
            let state = match found {
                Found::Created(state) => state,
                Found::Existing(t) => {
                    let e = observe::evidence(
                        ctx,
                        team,
                        memory,
                        Reached::Found,
                        t.id,
                        team_id.is_some(),
                        before,
                    )
                    .await?;
                    match guard::judge(&e) {
                        Judgement::Ours => {
                            // A lost status or a crash after the create: the same team, found
                            // by its identity.
                            info!(team = %team.name_any(), id = t.id, "found the team on the server by its external_id");
                        }
                        Judgement::Adopt => adopted(ctx, team, &server, &t).await?,
                        Judgement::Decline => {
                            // The record this pass wrote is taken back (one older than the
                            // records keeps its judgement).
                            let keep = guard::kept_after_decline(before, e.legacy.is_some());
                            // The driver added the finalizer to this pass, which `team`,
                            // read before, does not show.
                            return decline(ctx, team, &server, &t, keep, true, memory).await;
                        }
                    }
                    let id = t.id;
                    match observe::rest(&client, t).await {
                        Ok(state) => state,
                        Err(e) => {
                            memory.team_id = None;
                            return Ok(Applied {
                                outcome: Outcome::WaitingForServer(format!(
                                    "TerdutServer {server} could not be read (team {id}): {e}; \
                                     retrying"
                                )),
                                team_id: None,
                            });
                        }
                    }
                }
            };
            memory.declined = None;
            let id = state.team.id;
            (plan::plan(&desired, Some(&state)), Some(id))
        }
    };
    memory.team_id = team_id;
    let (mut blocked, mut stopped) = (None, None);
    for call in calls {
        match execute(&client, &call).await {
            Ok(()) => {
                info!(team = %key, call = %describe(&call), drift, "applied");
                if drift {
                    ctx.metrics.drift_corrected(Kind::Team.label());
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
    Ok(Applied { outcome, team_id })
}

/// What the create-or-find POST answered.
enum Found {
    /// 201: a new team, nothing on it yet.
    Created(plan::Observed),
    /// 200: the team this `external_id` already names, to be judged.
    Existing(Team),
}

/// The create-or-find step for a team the pass knows no (valid) id of. `lost`: the id status
/// (or the actor) had, whose team is gone: a 201 then means the team was recreated (a Warning
/// Event).
async fn found_or_created(
    ctx: &Ctx,
    team: &TerdutTeam,
    client: &TerdutClient,
    desired: &Desired,
    server: &ObjectKey,
    lost: Option<Id>,
    drift: bool,
) -> Result<Found, Outcome> {
    let call = plan::create_or_find(desired);
    let created = match create(client, desired).await {
        Ok(created) => created,
        Err(e) => return Err(classify(&call, &e, server).outcome().clone()),
    };
    match created {
        TeamCreate::Created(t) => {
            if drift {
                ctx.metrics.drift_corrected(Kind::Team.label());
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
            Ok(Found::Created(observe::fresh(t)))
        }
        TeamCreate::Found(t) => Ok(Found::Existing(t)),
    }
}

/// Takes over a team this object did not make, as [`ADOPT_ANNOTATION`] naming its id asks
/// (ADR 0013): recorded as this object's from now on, with a Warning.
async fn adopted(
    ctx: &Ctx,
    team: &TerdutTeam,
    server: &ObjectKey,
    t: &Team,
) -> Result<(), ReconcileError> {
    ctx.records
        .made(&team.uid().unwrap_or_default(), &ObjectKey::of(team))
        .await?;
    info!(team = %team.name_any(), id = t.id, "adopting the existing team (annotation)");
    events::warning(
        ctx,
        team,
        "Adopted",
        "Adopt",
        format!(
            "took over team {} ({:?}) on TerdutServer {server}, which this TerdutTeam did not \
             make although it has its external_id {}, as {ADOPT_ANNOTATION} asks; what the \
             server kept with it, such as its incident history, stays with it",
            t.id, t.name, t.external_id
        ),
    )
    .await;
    Ok(())
}

/// A team with this object's `external_id` that this object did not make (ADR 0013): a
/// namespace deleted and recreated, a new TerdutTeam reusing an old one's name, or a tenant's
/// forged status or finalizer. Nothing is changed on it; the finalizer is released (the object
/// holds nothing on the server, so deleting it must not delete that team), `record` says what
/// the records keep of the object, and the pass ends `Adopted`.
async fn decline(
    ctx: &Ctx,
    team: &TerdutTeam,
    server: &ObjectKey,
    t: &Team,
    record: Record,
    added_finalizer: bool,
    memory: &mut TeamMemory,
) -> Result<Applied, ReconcileError> {
    let uid = team.uid().unwrap_or_default();
    let key = ObjectKey::of(team);
    memory.declined = Some(t.id);
    memory.team_id = None;
    warn!(team = %key, id = t.id, "a team with this external_id exists that this object did not make; not adopted without the annotation");
    match record {
        Record::Declined => ctx.records.declined(&uid, &key).await?,
        _ => ctx.records.forget(&uid).await?,
    }
    // Released before the status says `Adopted`, so no reader sees a declined team holding a
    // finalizer.
    if (added_finalizer || finalizer::has(team, FINALIZER))
        && let Err(e) = release_live(ctx, team).await
    {
        return Ok(Applied {
            outcome: Outcome::WaitingForServer(format!(
                "team {} exists on TerdutServer {server} and is not adopted, but the finalizer \
                 could not be released yet: {e}; retrying",
                t.id
            )),
            team_id: None,
        });
    }
    Ok(Applied {
        outcome: Outcome::Adopted { team_id: t.id },
        team_id: None,
    })
}

/// Removes the finalizer from the object as it is now (read live): the pass added it moments
/// ago, so its copy's resourceVersion is stale.
async fn release_live(ctx: &Ctx, team: &TerdutTeam) -> Result<(), ReconcileError> {
    let key = ObjectKey::of(team);
    let api: kube::Api<TerdutTeam> = kube::Api::namespaced(ctx.kube.clone(), &key.namespace);
    let live = api.get_opt(&key.name).await.map_err(|e| {
        ReconcileError::kube(KubeCall::ReadTeamLive, format!("TerdutTeam {key}"), e)
    })?;
    match live {
        Some(live) => finalizer::release(ctx, &live, FINALIZER).await,
        None => Ok(()),
    }
}

/// Sends one call. `CreateTeam`'s answer is needed by the pass: it runs through [`create`].
async fn execute(client: &TerdutClient, call: &Call) -> Result<(), ApiError> {
    match call {
        Call::CreateTeam { name, external_id } => {
            client.create_team(name, external_id).await.map(done)
        }
        Call::RenameTeam { team, to, .. } => client.rename_team(*team, to).await.map(done),
        Call::SetOidcGroups { team, groups } => {
            client.set_oidc_groups(*team, groups).await.map(done)
        }
        Call::PutEscalation { team, ladder } => {
            client.put_escalation(*team, ladder).await.map(done)
        }
        Call::DeleteEscalation { team } => client.delete_escalation(*team).await,
        Call::CreateSwitch { team, spec } => client.create_switch(*team, spec).await.map(done),
        Call::UpdateSwitch { team, switch, spec } => {
            client.update_switch(*team, *switch, spec).await.map(done)
        }
        // A switch already gone is what the call wanted (docs/design.md §5: 404 is success).
        Call::DeleteSwitch { team, switch, .. } => {
            client.delete_switch(*team, *switch).await.map(done)
        }
    }
}

fn done<T>(_: T) {}

/// The create-or-find call ([`plan::create_or_find`](super::plan::create_or_find)), answered
/// with the team it created (201) or found by `external_id` (200).
pub async fn create(client: &TerdutClient, desired: &Desired) -> Result<TeamCreate, ApiError> {
    client
        .create_team(&desired.name, &desired.external_id)
        .await
}

/// What a failed call means for the rest of the pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Only this call is refused until something outside the operator changes (a user signs
    /// up, another team gives up the name) or the spec does; the later calls are independent
    /// of it and still run. The first such outcome is the pass's Ready reason.
    Blocks(Outcome),
    /// The pass stops here: no team to work on, or the server is not answering as it should.
    /// Retried with backoff.
    Stops(Outcome),
}

impl Failure {
    pub fn outcome(&self) -> &Outcome {
        match self {
            Self::Blocks(o) | Self::Stops(o) => o,
        }
    }
}

/// Classifies the failure of `call` on `server`. No variant carries a secret: [`ApiError`]
/// never holds one.
pub fn classify(call: &Call, error: &ApiError, server: &ObjectKey) -> Failure {
    match error {
        ApiError::TeamNameTaken if call.is_create() => Failure::Stops(Outcome::TeamNameTaken),
        ApiError::TeamNameTaken => Failure::Blocks(Outcome::TeamNameTaken),
        ApiError::UnknownUser { username } => Failure::Blocks(Outcome::UnknownUser {
            username: username.clone(),
        }),
        ApiError::Invalid { message } if !call.is_create() => {
            Failure::Blocks(Outcome::InvalidSpec(format!(
                "TerdutServer {server} refused to {}: {message}",
                describe(call)
            )))
        }
        ApiError::Invalid { message } => Failure::Stops(Outcome::InvalidSpec(format!(
            "TerdutServer {server} refused to {}: {message}",
            describe(call)
        ))),
        other => Failure::Stops(Outcome::WaitingForServer(format!(
            "TerdutServer {server} could not {}: {other}; retrying",
            describe(call)
        ))),
    }
}

/// An Event about an applied call: reason, action and note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallEvent {
    pub reason: &'static str,
    pub action: &'static str,
    pub note: String,
}

/// The Event of an applied call other than `CreateTeam` (whose Event depends on whether it
/// created, found or recreated the team: the actor's to say). `drift`: the server had been
/// changed behind the operator's back, which the note says.
pub fn event_for(call: &Call, drift: bool) -> Option<CallEvent> {
    let (reason, action, note) = match call {
        Call::CreateTeam { .. } => return None,
        Call::RenameTeam { team, from, to } => (
            "TeamRenamed",
            "Rename",
            format!("renamed team {team} from {from:?} to {to:?}"),
        ),
        Call::SetOidcGroups { team, groups } => (
            "OidcGroupsApplied",
            "SetOidcGroups",
            format!(
                "set the OIDC groups of team {team}: members {}, owners {}",
                group(groups.member_group.as_deref()),
                group(groups.owner_group.as_deref())
            ),
        ),
        Call::PutEscalation { team, ladder } => (
            "EscalationApplied",
            "PutEscalation",
            format!(
                "applied the escalation ladder of team {team}: {} level(s), repeated {} time(s)",
                ladder.levels.len(),
                ladder.repeat_count
            ),
        ),
        Call::DeleteEscalation { team } => (
            "EscalationCleared",
            "DeleteEscalation",
            format!("cleared the escalation ladder of team {team}: spec.escalation is absent"),
        ),
        Call::CreateSwitch { team, spec } => (
            "SwitchCreated",
            "CreateSwitch",
            format!("created dead man's switch {:?} of team {team}", spec.name),
        ),
        Call::UpdateSwitch { team, spec, .. } => (
            "SwitchUpdated",
            "UpdateSwitch",
            format!("updated dead man's switch {:?} of team {team}", spec.name),
        ),
        Call::DeleteSwitch { team, name, .. } => (
            "SwitchDeleted",
            "DeleteSwitch",
            format!(
                "deleted dead man's switch {name:?} of team {team}: not in spec.deadmanSwitches"
            ),
        ),
    };
    let note = if drift {
        format!("{note} (it had been changed on the server; the TerdutTeam wins)")
    } else {
        note
    };
    Some(CallEvent {
        reason,
        action,
        note,
    })
}

fn group(g: Option<&str>) -> String {
    g.map_or_else(|| "none".to_owned(), |g| format!("{g:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Ladder, Level, OidcGroups, SwitchSpec, Target, TransientCause};

    fn server() -> ObjectKey {
        ObjectKey::new("oncall", "terdut")
    }

    fn create() -> Call {
        Call::CreateTeam {
            name: "Platform".into(),
            external_id: "ns/platform".into(),
        }
    }

    fn rename() -> Call {
        Call::RenameTeam {
            team: 4,
            from: "a".into(),
            to: "Platform".into(),
        }
    }

    fn put() -> Call {
        Call::PutEscalation {
            team: 4,
            ladder: Ladder {
                repeat_count: 1,
                fallback_topic: None,
                levels: vec![Level {
                    timeout_seconds: 60,
                    targets: vec![Target::Oncall],
                }],
            },
        }
    }

    #[test]
    fn name_conflicts_stop_a_create_but_only_block_a_rename() {
        assert_eq!(
            classify(&create(), &ApiError::TeamNameTaken, &server()),
            Failure::Stops(Outcome::TeamNameTaken)
        );
        assert_eq!(
            classify(&rename(), &ApiError::TeamNameTaken, &server()),
            Failure::Blocks(Outcome::TeamNameTaken)
        );
    }

    #[test]
    fn unknown_users_and_refused_bodies_block_the_call() {
        let e = ApiError::UnknownUser {
            username: "alice".into(),
        };
        assert_eq!(
            classify(&put(), &e, &server()),
            Failure::Blocks(Outcome::UnknownUser {
                username: "alice".into()
            })
        );
        let e = ApiError::Invalid {
            message: "levels[0] bad".into(),
        };
        let Failure::Blocks(Outcome::InvalidSpec(m)) = classify(&put(), &e, &server()) else {
            panic!("not InvalidSpec")
        };
        assert!(
            m.contains("oncall/terdut") && m.contains("levels[0] bad"),
            "{m}"
        );
    }

    #[test]
    fn everything_else_stops_the_pass_waiting_for_the_server() {
        for e in [
            ApiError::Transient {
                cause: TransientCause::Connect,
                detail: "refused".into(),
            },
            ApiError::Unauthorized,
            ApiError::NotFound,
            ApiError::SwitchNameTaken,
            ApiError::Unexpected {
                status: 418,
                code: None,
            },
        ] {
            let f = classify(&rename(), &e, &server());
            assert!(
                matches!(&f, Failure::Stops(Outcome::WaitingForServer(m)) if m.contains("rename team 4")),
                "{e:?} -> {f:?}"
            );
        }
    }

    #[test]
    fn every_applied_call_but_create_has_an_event() {
        let calls = [
            rename(),
            Call::SetOidcGroups {
                team: 4,
                groups: OidcGroups {
                    member_group: Some("m".into()),
                    owner_group: None,
                },
            },
            put(),
            Call::DeleteEscalation { team: 4 },
            Call::CreateSwitch {
                team: 4,
                spec: SwitchSpec {
                    name: "w".into(),
                    matcher: "a=b".into(),
                    timeout_seconds: 60,
                    severity: "info".into(),
                },
            },
            Call::UpdateSwitch {
                team: 4,
                switch: 9,
                spec: SwitchSpec {
                    name: "w".into(),
                    matcher: "a=b".into(),
                    timeout_seconds: 60,
                    severity: "info".into(),
                },
            },
            Call::DeleteSwitch {
                team: 4,
                switch: 9,
                name: "w".into(),
            },
        ];
        let reasons: Vec<_> = calls
            .iter()
            .map(|c| event_for(c, false).unwrap().reason)
            .collect();
        assert_eq!(
            reasons,
            [
                "TeamRenamed",
                "OidcGroupsApplied",
                "EscalationApplied",
                "EscalationCleared",
                "SwitchCreated",
                "SwitchUpdated",
                "SwitchDeleted"
            ]
        );
        assert_eq!(event_for(&create(), false), None);
        let e = event_for(&calls[1], true).unwrap();
        assert!(e.note.contains("members \"m\", owners none"), "{}", e.note);
        assert!(e.note.contains("changed on the server"), "{}", e.note);
    }
}
