//! One reconcile of a TerdutTeam, independent of what drives it (DESIGN §4.2, §4.6, §5): the
//! [`TeamActor`](super::actor::TeamActor) calls it for each message, and any other runtime (the
//! bench's kube-runtime `Controller` baselines, issue 8) can call it the same way, keeping
//! per-object [`TeamMemory`] between calls.
//!
//! One call: paused? -> deletion (`delete.rs`) or convergence (`pass.rs`) -> status, written
//! only when it changed -> when the next pass is due:
//! - converged, or waiting for a change someone will make in Kubernetes (ServerRefNotFound,
//!   RefNotPermitted, InvalidSpec: the watches nudge the object): the jittered resync (DESIGN
//!   §5, 5 minutes);
//! - waiting for a change outside the cluster (UnknownUser: a user signs up; TeamNameTaken:
//!   the other team is renamed): `config.blocked_retry` (30 s by default), since nothing would
//!   nudge the object;
//! - the server not answering, a deletion refused, a failed Kubernetes write: backoff 1 s,
//!   2 s ... 60 s.

use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use terdut_crds::v1alpha1::conditions;
use terdut_crds::v1alpha1::{TerdutTeam, TerdutTeamStatus};
use tracing::{debug, warn};

use super::delete::finalize;
use super::pass::{PassResult, converge};
use super::status::{
    DesiredStatus, Outcome, StatusInputs, desired_status, is_paused, paused_status, status_patch,
};
use crate::api::Id;
use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::key::ObjectKey;
use crate::pacing::{jittered, retry_delay};
use crate::server::observe::team_server_key;

/// When the next pass runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// The periodic resync.
    Resync,
    /// `config.blocked_retry`: waiting for a change outside the cluster.
    Blocked,
    /// Backoff after consecutive failures.
    Backoff,
}

impl Next {
    pub(crate) fn after(outcome: &Outcome) -> Self {
        match outcome {
            Outcome::Ready
            | Outcome::ServerRefNotFound
            | Outcome::RefNotPermitted(_)
            | Outcome::InvalidSpec(_)
            // Waits for an annotation (a watch event); a team deleted on the server is seen at
            // the resync.
            | Outcome::Adopted { .. } => Self::Resync,
            Outcome::TeamNameTaken | Outcome::UnknownUser { .. } => Self::Blocked,
            Outcome::WaitingForServer(_) => Self::Backoff,
        }
    }
}

/// What a runtime keeps for one TerdutTeam between passes (the actor: for one incarnation).
#[derive(Clone, Debug, Default)]
pub struct TeamMemory {
    /// Consecutive passes that asked for backoff.
    pub failures: u32,
    /// The Warning reason already published in the current failure streak.
    pub warned: Option<String>,
    /// The team id the last pass ended with (see `pass::converge`).
    pub team_id: Option<Id>,
    /// The status this runtime last wrote (see [`stale_but_equal`]).
    pub written: Option<TerdutTeamStatus>,
}

/// Reconciles TerdutTeams; cheap to clone.
#[derive(Clone, Debug)]
pub struct TeamReconciler {
    pub ctx: Ctx,
}

impl TeamReconciler {
    pub fn new(ctx: Ctx) -> Self {
        Self { ctx }
    }

    /// One pass over `team` (the newest copy the caller has); returns when the next pass is
    /// due. Never fails: failures are in status, Events, metrics and the returned delay.
    pub async fn reconcile(&self, team: &TerdutTeam, memory: &mut TeamMemory) -> Duration {
        let started = self.ctx.clock.now();
        let result = if team.metadata.deletion_timestamp.is_some() {
            finalize(&self.ctx, team, &mut memory.warned, memory.team_id).await
        } else {
            self.sync(team, memory).await
        };
        let took = self.ctx.clock.now() - started;
        let metrics = &self.ctx.metrics;
        match result {
            Ok(Next::Resync) => {
                metrics.reconciled("team", "ok", took);
                memory.failures = 0;
                jittered(self.ctx.config.resync)
            }
            Ok(Next::Blocked) => {
                metrics.reconciled("team", "blocked", took);
                memory.failures = 0;
                self.ctx.config.blocked_retry
            }
            Ok(Next::Backoff) => {
                metrics.reconciled("team", "error", took);
                metrics.reconcile_error("team", "waiting");
                memory.failures = memory.failures.saturating_add(1);
                retry_delay(memory.failures)
            }
            Err(e) => {
                metrics.reconciled("team", "error", took);
                metrics.reconcile_error("team", e.category());
                memory.failures = memory.failures.saturating_add(1);
                let key = ObjectKey::of(team);
                // One warn per failure streak, debug after: no error-per-retry floods.
                if memory.failures == 1 {
                    warn!(team = %key, error = %e, "reconcile failed");
                } else {
                    debug!(team = %key, error = %e, attempt = memory.failures, "reconcile failed again");
                }
                if e.is_retryable() {
                    retry_delay(memory.failures)
                } else {
                    jittered(self.ctx.config.resync)
                }
            }
        }
    }

    /// A pass of a team that is not being deleted: converge, then status.
    async fn sync(
        &self,
        team: &TerdutTeam,
        memory: &mut TeamMemory,
    ) -> Result<Next, ReconcileError> {
        let current = team.status.as_ref();
        if is_paused(team.annotations()) {
            debug!(team = %ObjectKey::of(team), "paused");
            self.write_status(team, &paused_status(current), memory)
                .await?;
            return Ok(Next::Resync);
        }
        let PassResult { outcome, team_id } = converge(&self.ctx, team, memory.team_id).await?;
        memory.team_id = team_id;
        let server = team_server_key(team);
        let desired = desired_status(
            &outcome,
            &StatusInputs {
                server: &server,
                display_name: &team.spec.display_name,
                generation: team.metadata.generation,
                team_id,
            },
        );
        self.announce(team, memory, &outcome, &desired).await;
        self.write_status(team, &desired, memory).await?;
        Ok(Next::after(&outcome))
    }

    /// Logs and publishes a Warning (Normal for WaitingForServer, expected while a server
    /// starts) when the Ready reason changes to a failure, or its message does for a failure a
    /// user has to act on; clears the streak when Ready.
    async fn announce(
        &self,
        team: &TerdutTeam,
        memory: &mut TeamMemory,
        outcome: &Outcome,
        desired: &DesiredStatus,
    ) {
        let Some(want) = &desired.ready else { return };
        if outcome.is_ready() {
            memory.warned = None;
            return;
        }
        let have = team
            .status
            .as_ref()
            .and_then(|s| conditions::find(&s.conditions, conditions::READY));
        let waiting = matches!(outcome, Outcome::WaitingForServer(_));
        let same =
            have.is_some_and(|c| c.reason == want.reason && (waiting || c.message == want.message));
        if same {
            return;
        }
        memory.warned = Some(want.reason.clone());
        let key = ObjectKey::of(team);
        // Waiting for the server is expected on the way up (DESIGN §5), so it is Normal; every
        // other not-ready reason is a Warning.
        let type_ = if waiting {
            debug!(team = %key, message = %want.message, "waiting for the server");
            EventType::Normal
        } else {
            warn!(team = %key, reason = %want.reason, message = %want.message, "not ready");
            EventType::Warning
        };
        self.ctx
            .events
            .publish(
                &team.object_ref(&()),
                type_,
                &want.reason,
                "Reconcile",
                want.message.clone(),
            )
            .await;
    }

    /// Writes the status when it changed. A team deleted meanwhile (404) is not an error.
    async fn write_status(
        &self,
        team: &TerdutTeam,
        desired: &DesiredStatus,
        memory: &mut TeamMemory,
    ) -> Result<(), ReconcileError> {
        let now = self.ctx.clock.k8s_now();
        let current = team.status.as_ref();
        let patch = status_patch(current, desired, now.clone()).or_else(|| {
            stale_but_equal(current, &mut memory.written)
                .and_then(|written| status_patch(Some(written), desired, now))
        });
        let Some(patch) = patch else {
            return Ok(());
        };
        let key = ObjectKey::of(team);
        let api: Api<TerdutTeam> = Api::namespaced(self.ctx.kube.clone(), &key.namespace);
        self.ctx.metrics.kube_write("team", "status");
        match api
            .patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(written) => {
                let rv = written.resource_version();
                self.ctx.own_writes.record("team", &key, rv);
                memory.written = written.status;
                Ok(())
            }
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(ReconcileError::kube(
                "patch status of",
                format!("TerdutTeam {key}"),
                e,
            )),
        }
    }
}

/// `written` when the cached copy's status `current` differs from it: the copy may predate
/// that write. The watch event of the operator's own write triggers no pass (issue 8,
/// `OwnWrites`), so a pass that starts right after a write can read the copy from before it;
/// a status equal to that stale copy would then never be written (found by `just chaos`: a
/// team wrote WaitingForServer, the next pass found it Ready and compared against the older
/// Ready copy). Costs at most one redundant write while the event is in flight; none in
/// steady state, where the copy, the last write and the desired status agree.
///
/// Once the copy shows the last write, `written` says nothing the copy does not and is
/// dropped: a later write sets it again, so the copy cannot be behind a write while it is
/// `None`. In steady state no team or source keeps a second copy of its status (ADR 0005).
pub(crate) fn stale_but_equal<'a, S: PartialEq>(
    current: Option<&S>,
    written: &'a mut Option<S>,
) -> Option<&'a S> {
    if written.as_ref() == current {
        *written = None;
    }
    written.as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_older_than_the_last_write_is_not_trusted() {
        // The copy still shows what the last write replaced: compare against the write, and
        // keep remembering it.
        let mut written = Some("waiting");
        assert_eq!(
            stale_but_equal(Some(&"ready"), &mut written),
            Some(&"waiting")
        );
        assert_eq!(written, Some("waiting"));
        assert_eq!(stale_but_equal(None, &mut written), Some(&"waiting"));
        // The copy has caught up: the copy alone decides, and the write is forgotten.
        assert_eq!(stale_but_equal(Some(&"waiting"), &mut written), None);
        assert_eq!(written, None, "nothing kept once the copy shows it");
        // Nothing written yet.
        assert_eq!(stale_but_equal(Some(&"ready"), &mut None::<&str>), None);
    }

    #[test]
    fn each_outcome_schedules_its_next_pass() {
        assert_eq!(Next::after(&Outcome::Ready), Next::Resync);
        assert_eq!(Next::after(&Outcome::ServerRefNotFound), Next::Resync);
        assert_eq!(
            Next::after(&Outcome::RefNotPermitted(String::new())),
            Next::Resync
        );
        assert_eq!(
            Next::after(&Outcome::InvalidSpec(String::new())),
            Next::Resync
        );
        assert_eq!(Next::after(&Outcome::TeamNameTaken), Next::Blocked);
        assert_eq!(
            Next::after(&Outcome::UnknownUser {
                username: "a".into()
            }),
            Next::Blocked
        );
        assert_eq!(
            Next::after(&Outcome::WaitingForServer(String::new())),
            Next::Backoff
        );
    }
}
