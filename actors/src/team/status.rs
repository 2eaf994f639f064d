//! The TerdutTeam's status, decided without IO (docs/design.md §4.2, §7).
//!
//! [`desired_status`] turns a pass's [`Outcome`] into the `Ready` condition, `teamID` and
//! `observedGeneration`; [`status_patch`] makes a merge patch of it only when something a user
//! can see changed, so a steady-state pass writes nothing (`lastTransitionTime` moves only when
//! Ready flips, through `terdut_crds`' `set_condition`). `Reconciling` and `Stalled` follow
//! from the reason (`reasons::PROGRESS`, docs/design.md §7).
//!
//! Pausing is the driver's, the same for every kind (docs/design.md §5 "Pause",
//! `write/shared.rs`): this file never sees a paused pass.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::json;
use terdut_crds::v1alpha1::TerdutTeamStatus;
use terdut_crds::v1alpha1::conditions::{self, DesiredCondition, progress_of, set_ready};
use terdut_crds::v1alpha1::team::reasons;

use super::ADOPT_ANNOTATION;
use crate::key::ObjectKey;

pub use crate::pipeline::PAUSE_ANNOTATION;
pub use crate::write::shared::PAUSED;

/// How a pass ended, as far as `Ready` is concerned. Each non-Ready variant is a reason of
/// docs/design.md §4.2, documented in docs/runbook.md.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The server holds what the spec says.
    Ready,
    /// `spec.serverRef` names no TerdutServer.
    ServerRefNotFound,
    /// Cross-namespace consent refused (docs/design.md §4.6); the server actor's message.
    RefNotPermitted(String),
    /// The server (its actor, its key or its API) is not usable yet; why.
    WaitingForServer(String),
    /// `spec.displayName` belongs to another team on the server.
    TeamNameTaken,
    /// The ladder names a user the server does not know.
    UnknownUser { username: String },
    /// The spec cannot be applied as written; why.
    InvalidSpec(String),
    /// A team with this object's `external_id` already exists on the server, made for an
    /// earlier TerdutTeam of the same namespace and name (a namespace deleted and recreated):
    /// nothing is changed on it until someone opts in with [`ADOPT_ANNOTATION`] (ADR 0007).
    Adopted { team_id: i64 },
    /// `spec.management: ObserveOnly`: this many changes are planned, none made.
    ObserveOnly { changes: usize },
    /// The TerdutServer exists but this operator instance does not reconcile it; why (which
    /// selector or namespace scope leaves it out).
    ServerNotReconciled(String),
    /// Being deleted and waiting; what for.
    DeletionBlocked(String),
    /// The server owner's policy does not allow what the spec asks for; why (`tenancy/`).
    PolicyDenied(String),
    /// Older teams of the namespace fill the policy's `maxTeams`; why.
    TeamLimitReached(String),
}

impl Outcome {
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Ready => reasons::READY,
            Self::ServerRefNotFound => reasons::SERVER_REF_NOT_FOUND,
            Self::RefNotPermitted(_) => reasons::REF_NOT_PERMITTED,
            Self::WaitingForServer(_) => reasons::WAITING_FOR_SERVER,
            Self::TeamNameTaken => reasons::TEAM_NAME_TAKEN,
            Self::UnknownUser { .. } => reasons::UNKNOWN_USER,
            Self::InvalidSpec(_) => reasons::INVALID_SPEC,
            Self::Adopted { .. } => reasons::ADOPTED,
            Self::ObserveOnly { .. } => reasons::OBSERVE_ONLY,
            Self::ServerNotReconciled(_) => reasons::SERVER_NOT_RECONCILED,
            Self::DeletionBlocked(_) => reasons::DELETION_BLOCKED,
            Self::PolicyDenied(_) => reasons::POLICY_DENIED,
            Self::TeamLimitReached(_) => reasons::TEAM_LIMIT_REACHED,
        }
    }

    pub fn is_ready(&self) -> bool {
        matches!(self, Self::Ready)
    }
}

/// What the messages of [`desired_status`] name.
#[derive(Clone, Debug)]
pub struct StatusInputs<'a> {
    /// The TerdutServer `spec.serverRef` resolves to.
    pub server: &'a ObjectKey,
    pub display_name: &'a str,
    /// `metadata.generation` of the TerdutTeam this pass reconciled.
    pub generation: Option<i64>,
    /// The team's id on the server as far as this pass knows it.
    pub team_id: Option<i64>,
}

/// The status a team should have, without timestamps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredStatus {
    /// `None` keeps the current Ready condition.
    pub ready: Option<DesiredCondition>,
    pub observed_generation: Option<i64>,
    pub team_id: Option<i64>,
}

/// The status after a (not paused) pass that ended with `outcome`.
pub fn desired_status(outcome: &Outcome, i: &StatusInputs<'_>) -> DesiredStatus {
    let server = i.server;
    let message = match outcome {
        Outcome::Ready => match i.team_id {
            Some(id) => format!(
                "team {id} ({:?}) on TerdutServer {server} matches the spec",
                i.display_name
            ),
            None => format!("team on TerdutServer {server} matches the spec"),
        },
        Outcome::ServerRefNotFound => {
            format!("TerdutServer {server} does not exist; create it or correct spec.serverRef")
        }
        Outcome::RefNotPermitted(why) => format!(
            "{why}. Nothing is changed on the server until consent is given (an existing team \
             is left as it is)"
        ),
        Outcome::WaitingForServer(why) => why.clone(),
        Outcome::TeamNameTaken => format!(
            "the name {:?} belongs to another team on TerdutServer {server}; choose another \
             spec.displayName or rename that team (the operator never adopts it)",
            i.display_name
        ),
        Outcome::UnknownUser { username } => format!(
            "TerdutServer {server} knows no user {username:?} (named in spec.escalation); the \
             ladder is applied once that user exists"
        ),
        Outcome::InvalidSpec(why) => why.clone(),
        Outcome::Adopted { team_id } => format!(
            "team {team_id} with this object's external_id already exists on TerdutServer \
             {server}: it was made for an earlier TerdutTeam of this namespace and name (for \
             example before the namespace was deleted and recreated) and keeps what the server \
             holds for it, such as its incident history. Nothing is changed on it: to take it \
             over as it is, annotate this TerdutTeam {ADOPT_ANNOTATION}=\"{team_id}\"; to start \
             afresh, delete that team on the server"
        ),
        Outcome::ObserveOnly { changes } => {
            crate::write::shared::observe_only_message(*changes, "team")
        }
        Outcome::ServerNotReconciled(why) => format!(
            "TerdutServer {server} is not reconciled by this operator instance: {why}. Nothing \
             is called on it from here; an instance that reconciles that server reconciles this \
             TerdutTeam only if it selects it too (label the TerdutTeam as its TerdutServer is \
             labelled, or fix spec.serverRef)"
        ),
        Outcome::DeletionBlocked(why) => why.clone(),
        Outcome::PolicyDenied(why) | Outcome::TeamLimitReached(why) => why.clone(),
    };
    DesiredStatus {
        ready: Some(
            DesiredCondition::ready(outcome.is_ready(), outcome.reason(), message)
                .at_generation(i.generation),
        ),
        observed_generation: i.generation,
        team_id: i.team_id,
    }
}

/// Whether the last pass found the server converged on this `generation` (Ready True at it).
/// Differences found now were made behind the operator's back: drift.
pub fn converged(current: Option<&TerdutTeamStatus>, generation: Option<i64>) -> bool {
    current
        .and_then(|s| conditions::find(&s.conditions, conditions::READY))
        .is_some_and(|c| c.status == "True" && c.observed_generation == generation)
}

/// The current Ready reason, if any.
pub fn ready_reason(current: Option<&TerdutTeamStatus>) -> Option<&str> {
    current
        .and_then(|s| conditions::find(&s.conditions, conditions::READY))
        .map(|c| c.reason.as_str())
}

/// A JSON merge patch for the status subresource, or `None` when nothing would change. Every
/// field is written (`teamID: null` removes it), so the result does not depend on what the
/// patch lands on.
pub fn status_patch(
    current: Option<&TerdutTeamStatus>,
    desired: &DesiredStatus,
    now: Time,
) -> Option<serde_json::Value> {
    let mut conditions: Vec<Condition> = current.map(|s| s.conditions.clone()).unwrap_or_default();
    if let Some(ready) = &desired.ready {
        let progress = progress_of(reasons::PROGRESS, &ready.reason);
        set_ready(&mut conditions, ready.clone(), progress, now.clone());
    }
    let next = TerdutTeamStatus {
        conditions,
        observed_generation: desired.observed_generation,
        team_id: desired.team_id,
        // The driver's, the same for every kind (`write/shared.rs`).
        plan: current.and_then(|s| s.plan.clone()),
        last_applied: current.and_then(|s| s.last_applied.clone()),
    };
    if current == Some(&next) {
        return None;
    }
    Some(json!({
        "status": {
            "conditions": next.conditions,
            "observedGeneration": next.observed_generation,
            "teamID": next.team_id,
        }
    }))
}

/// The status after a pass that ended in `applied`, when to look again, and the Event of a
/// not-Ready reason: Normal while waiting for a server that is starting (expected on the way
/// up), a Warning for every reason a user acts on, again when its message changes (another
/// unknown user, another refusal).
pub fn verdict(
    team: &terdut_crds::v1alpha1::TerdutTeam,
    applied: &super::Applied,
) -> crate::pipeline::Verdict<DesiredStatus> {
    use crate::pipeline::{Announce, Next, Verdict};
    use crate::runtime::events::EventType;
    let server = crate::server::observe::team_server_key(team);
    let desired = desired_status(
        &applied.outcome,
        &StatusInputs {
            server: &server,
            display_name: &team.spec.display_name,
            generation: team.metadata.generation,
            team_id: applied.team_id,
        },
    );
    let next = match &applied.outcome {
        Outcome::Ready
        | Outcome::ServerRefNotFound
        | Outcome::RefNotPermitted(_)
        | Outcome::InvalidSpec(_)
        // Waits for an annotation (a watch event); a team deleted on the server is seen at
        // the resync.
        | Outcome::Adopted { .. }
        // A user's choice, looked at again at the resync or on a change.
        | Outcome::ObserveOnly { .. }
        // A relabel of the server or of this object is a watch event.
        | Outcome::ServerNotReconciled(_)
        // The fix is a change of this spec or of the server's (both watched).
        | Outcome::PolicyDenied(_) => Next::Resync,
        Outcome::DeletionBlocked(_) => Next::Wait,
        // TeamLimitReached is also fixed by another team's deletion, which no event of this
        // team announces.
        Outcome::TeamNameTaken | Outcome::UnknownUser { .. } | Outcome::TeamLimitReached(_) => {
            Next::Blocked
        }
        Outcome::WaitingForServer(_) => Next::Wait,
    };
    let announce = desired
        .ready
        .as_ref()
        .filter(|_| !applied.outcome.is_ready())
        .map(|c| {
            let waiting = matches!(
                applied.outcome,
                Outcome::WaitingForServer(_) | Outcome::ObserveOnly { .. }
            );
            Announce {
                type_: if waiting {
                    EventType::Normal
                } else {
                    EventType::Warning
                },
                reason: c.reason.clone(),
                message: c.message.clone(),
                on_message: !waiting,
            }
        });
    Verdict::new(desired, next).announce(announce)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn t(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    fn server() -> ObjectKey {
        ObjectKey::new("oncall", "terdut")
    }

    fn decide(outcome: &Outcome) -> DesiredStatus {
        desired_status(
            outcome,
            &StatusInputs {
                server: &server(),
                display_name: "Platform",
                generation: Some(3),
                team_id: Some(42),
            },
        )
    }

    fn written(patch: serde_json::Value) -> TerdutTeamStatus {
        serde_json::from_value(patch["status"].clone()).unwrap()
    }

    fn ready(s: &TerdutTeamStatus) -> &Condition {
        conditions::find(&s.conditions, conditions::READY).unwrap()
    }

    #[test]
    fn every_reason_of_the_design_is_reachable_with_an_actionable_message() {
        let cases = [
            (Outcome::Ready, "Ready", true, "team 42"),
            (
                Outcome::ServerRefNotFound,
                "ServerRefNotFound",
                false,
                "TerdutServer oncall/terdut does not exist",
            ),
            (
                Outcome::RefNotPermitted("not allowed from ns b".into()),
                "RefNotPermitted",
                false,
                "not allowed from ns b",
            ),
            (
                Outcome::WaitingForServer("no operator key yet".into()),
                "WaitingForServer",
                false,
                "no operator key yet",
            ),
            (
                Outcome::TeamNameTaken,
                "TeamNameTaken",
                false,
                "\"Platform\" belongs to another team",
            ),
            (
                Outcome::UnknownUser {
                    username: "alice".into(),
                },
                "UnknownUser",
                false,
                "no user \"alice\"",
            ),
            (
                Outcome::InvalidSpec("timeout too large".into()),
                "InvalidSpec",
                false,
                "timeout too large",
            ),
        ];
        for (outcome, reason, status, text) in cases {
            let d = decide(&outcome);
            let c = d.ready.unwrap();
            assert_eq!((c.reason.as_str(), c.status), (reason, status));
            assert!(c.message.contains(text), "{reason}: {}", c.message);
            assert_eq!(c.observed_generation, Some(3));
            assert_eq!(d.observed_generation, Some(3));
            assert_eq!(d.team_id, Some(42));
        }
    }

    fn kstatus(s: &TerdutTeamStatus) -> Vec<(&str, &str)> {
        s.conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.reason.as_str()))
            .collect()
    }

    #[test]
    fn every_outcome_sets_reconciling_or_stalled_as_its_reason_says() {
        use conditions::{RECONCILING, STALLED};
        let cases = [
            (Outcome::Ready, None),
            (Outcome::ServerRefNotFound, Some(RECONCILING)),
            (
                Outcome::WaitingForServer("starting".into()),
                Some(RECONCILING),
            ),
            (Outcome::RefNotPermitted("no".into()), Some(STALLED)),
            (Outcome::TeamNameTaken, Some(STALLED)),
            (
                Outcome::UnknownUser {
                    username: "alice".into(),
                },
                Some(STALLED),
            ),
            (Outcome::InvalidSpec("bad".into()), Some(STALLED)),
            (Outcome::Adopted { team_id: 7 }, Some(STALLED)),
            // Planned as the spec asks, nothing in flight: settled (docs/design.md §7).
            (Outcome::ObserveOnly { changes: 2 }, None),
        ];
        for (outcome, want) in cases {
            let st = written(status_patch(None, &decide(&outcome), t(10)).unwrap());
            let mut expected = vec![("Ready", outcome.reason())];
            expected.extend(want.map(|w| (w, outcome.reason())));
            assert_eq!(kstatus(&st), expected, "{outcome:?}");
            for c in &st.conditions {
                assert_eq!(c.observed_generation, Some(3), "{outcome:?} {}", c.type_);
                assert_eq!(c.message, ready(&st).message);
            }
        }
    }

    #[test]
    fn stalled_goes_when_the_team_converges_and_nothing_is_written_after() {
        let taken = written(status_patch(None, &decide(&Outcome::TeamNameTaken), t(10)).unwrap());
        let ok = written(status_patch(Some(&taken), &decide(&Outcome::Ready), t(20)).unwrap());
        assert_eq!(kstatus(&ok), [("Ready", "Ready")]);
        assert_eq!(
            status_patch(Some(&ok), &decide(&Outcome::Ready), t(30)),
            None
        );
    }

    #[test]
    fn patch_only_when_something_visible_changed() {
        let first = written(status_patch(None, &decide(&Outcome::Ready), t(10)).unwrap());
        assert_eq!(first.team_id, Some(42));
        assert_eq!(first.observed_generation, Some(3));
        assert_eq!(ready(&first).last_transition_time, t(10));
        assert_eq!(
            status_patch(Some(&first), &decide(&Outcome::Ready), t(99)),
            None,
            "a steady-state pass writes nothing"
        );
        let failed = written(
            status_patch(
                Some(&first),
                &decide(&Outcome::UnknownUser {
                    username: "bob".into(),
                }),
                t(20),
            )
            .unwrap(),
        );
        assert_eq!(ready(&failed).status, "False");
        assert_eq!(ready(&failed).last_transition_time, t(20));
        // Another failure reason keeps the transition time.
        let other =
            written(status_patch(Some(&failed), &decide(&Outcome::TeamNameTaken), t(30)).unwrap());
        assert_eq!(ready(&other).last_transition_time, t(20));
    }

    #[test]
    fn a_lost_team_id_is_written_back_and_a_gone_one_removed() {
        let first = written(status_patch(None, &decide(&Outcome::Ready), t(10)).unwrap());
        let mut lost = first.clone();
        lost.team_id = None;
        let p = status_patch(Some(&lost), &decide(&Outcome::Ready), t(11)).unwrap();
        assert_eq!(p["status"]["teamID"], 42);
        let mut gone = decide(&Outcome::TeamNameTaken);
        gone.team_id = None;
        let p = status_patch(Some(&first), &gone, t(12)).unwrap();
        assert!(p["status"].as_object().unwrap().contains_key("teamID"));
        assert!(p["status"]["teamID"].is_null());
    }

    #[test]
    fn converged_means_ready_at_this_generation() {
        assert!(!converged(None, Some(3)));
        let first = written(status_patch(None, &decide(&Outcome::Ready), t(10)).unwrap());
        assert!(converged(Some(&first), Some(3)));
        assert!(!converged(Some(&first), Some(4)), "a new spec is not drift");
        let failed =
            written(status_patch(Some(&first), &decide(&Outcome::TeamNameTaken), t(20)).unwrap());
        assert!(!converged(Some(&failed), Some(3)));
        assert_eq!(ready_reason(Some(&failed)), Some("TeamNameTaken"));
    }
}
