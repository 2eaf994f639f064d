//! TerdutTeam (docs/design.md §4.2, §4.6, §5): a team, its escalation ladder and its dead man's
//! switches on a terdut-server, through the one pipeline (`crate::pipeline`):
//!
//! - [`observe`]: may the server be called (it exists, it accepts the namespace, its actor has
//!   a client), and the team as the server has it (three GETs);
//! - [`plan`]: PURE (spec, observed) -> ordered calls;
//! - [`apply`]: runs the calls, create-or-find first when no team is known, adoption;
//! - [`guard`]: PURE whether this object made the team it reached (ADR 0013), from
//!   [`records`]: the operator's record of what it sent a create call for;
//! - [`status`]: PURE outcome -> Ready, teamID, observedGeneration; patch or `None`;
//! - [`finalize`]: the team-cleanup finalizer: delete on the server, then release.

pub mod apply;
pub mod cleanup;
pub mod finalize;
pub mod guard;
pub mod observe;
pub mod plan;
pub mod records;
pub mod status;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use terdut_crds::v1alpha1::{TerdutTeam, TerdutTeamStatus};

use crate::api::Id;
use crate::error::ReconcileError;
use crate::pipeline::{Observation, Pass, Pipeline, Verdict};

/// The finalizer of every TerdutTeam the operator created a team for: added before the first
/// call that can create it, released once it is deleted there (or provably cannot exist).
pub const FINALIZER: &str = "terdut.ryuvia.com/team-cleanup";

/// Taking over a team that exists on the server with this object's `external_id` but that
/// this object never made needs this annotation naming its id (ADR 0007, ADR 0013).
pub const ADOPT_ANNOTATION: &str = "terdut.ryuvia.com/adopt";

/// How a pass ended and the team's id as it now knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    pub outcome: status::Outcome,
    pub team_id: Option<Id>,
}

/// What the pipeline keeps for one TerdutTeam between passes.
#[derive(Clone, Debug, Default)]
pub struct TeamMemory {
    /// The team id the last pass ended with: a nudge queued while the pass that created the
    /// team ran can be handled before the cache has that pass's status write, and would
    /// otherwise repeat the POST. Also how a pass knows the server lost its data.
    pub team_id: Option<Id>,
    /// The deletion Warning already published in the current streak.
    pub warned: Option<String>,
    /// The team found by this object's `external_id` that a pass declined (`Adopted`),
    /// releasing the finalizer it had just added: the next passes look at it by GET (no
    /// write), and until a pass takes over or creates a team, a cached copy showing that
    /// finalizer does not mean this object made one.
    pub declined: Option<Id>,
}

/// The TerdutTeam pipeline. A failed pass leaves the status as it is (`Pipeline::failed`):
/// only Kubernetes writes fail a team's pass (the finalizer, the records); the server's
/// answers are outcomes. The pass is retried.
#[derive(Clone, Copy, Debug, Default)]
pub struct Team;

impl Pipeline for Team {
    type Object = TerdutTeam;
    type Memory = TeamMemory;
    type Observed = observe::Observed;
    type Plan = Vec<plan::Call>;
    type Applied = Applied;
    type Desired = status::DesiredStatus;
    type Deletion = cleanup::TeamDeletion;

    async fn observe<'a>(
        &'a self,
        pass: Pass<'a>,
        team: &'a TerdutTeam,
        memory: &'a mut TeamMemory,
    ) -> Result<Observation<observe::Observed, Applied>, ReconcileError> {
        observe::observe(pass, team, memory).await
    }

    fn plan(_team: &TerdutTeam, observed: &observe::Observed) -> Vec<plan::Call> {
        match observed {
            observe::Observed::Declined(_) => vec![],
            observe::Observed::Reachable(r) => plan::plan(&r.desired, r.known.as_ref()),
        }
    }

    async fn apply<'a>(
        &'a self,
        pass: Pass<'a>,
        team: &'a TerdutTeam,
        observed: observe::Observed,
        calls: Vec<plan::Call>,
        memory: &'a mut TeamMemory,
    ) -> Result<Applied, ReconcileError> {
        apply::apply(pass, team, observed, calls, memory).await
    }

    fn status(team: &TerdutTeam, applied: &Applied) -> Verdict<status::DesiredStatus> {
        status::verdict(team, applied)
    }

    /// A reachable server may get the create-or-find POST; a declined team none.
    fn holds(observed: &observe::Observed) -> bool {
        matches!(observed, observe::Observed::Reachable(_))
    }

    fn changes(
        _team: &TerdutTeam,
        observed: &observe::Observed,
        calls: &Vec<plan::Call>,
    ) -> Option<Vec<String>> {
        match observed {
            observe::Observed::Declined(_) => None,
            observe::Observed::Reachable(r) => Some(plan::describe_all(calls, r.known.is_none())),
        }
    }

    fn planned(
        team: &TerdutTeam,
        observed: &observe::Observed,
        _calls: &Vec<plan::Call>,
        changes: Option<&[String]>,
        _memory: &Self::Memory,
    ) -> Verdict<status::DesiredStatus> {
        let applied = match observed {
            observe::Observed::Declined(d) => Applied {
                outcome: status::Outcome::Adopted { team_id: d.team.id },
                team_id: None,
            },
            observe::Observed::Reachable(r) => Applied {
                outcome: match changes {
                    Some(c) if !c.is_empty() => status::Outcome::ObserveOnly { changes: c.len() },
                    _ => status::Outcome::Ready,
                },
                // Only an id the server confirmed: a status is the tenant's to write.
                team_id: r.known.as_ref().map(|k| k.team.id),
            },
        };
        status::verdict(team, &applied)
    }

    fn completed(applied: &Applied) -> bool {
        applied.outcome.is_ready()
    }

    fn patch(
        current: Option<&TerdutTeamStatus>,
        desired: &status::DesiredStatus,
        now: Time,
    ) -> Option<serde_json::Value> {
        status::status_patch(current, desired, now)
    }
}
