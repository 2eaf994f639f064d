//! The TerdutTeam actor: one per TerdutTeam (DESIGN §4.2, §4.6, §5). It reaches its server
//! only through the server's actor (consent and credentials, see `access.rs`), and is never
//! called by it.
//!
//! Each message is one pass: paused? -> deletion (`delete.rs`) or convergence (`pass.rs`) ->
//! status, written only when it changed -> re-arm one timer:
//! - converged, or waiting for a change someone will make in Kubernetes (ServerRefNotFound,
//!   RefNotPermitted, InvalidSpec: the watches nudge the actor): the jittered resync (DESIGN
//!   §5, 5 minutes);
//! - waiting for a change outside the cluster (UnknownUser: a user signs up; TeamNameTaken:
//!   the other team is renamed): `config.blocked_retry` (30 s by default), since nothing would
//!   nudge the actor;
//! - the server not answering, a deletion refused, a failed Kubernetes write: backoff 1 s,
//!   2 s ... 60 s.

use std::sync::Arc;

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use terdut_crds::v1alpha1::TerdutTeam;
use terdut_crds::v1alpha1::conditions;
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use super::delete::finalize;
use super::events;
use super::pass::{PassResult, converge};
use super::status::{
    DesiredStatus, Outcome, StatusInputs, desired_status, is_paused, paused_status, status_patch,
};
use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::key::ObjectKey;
use crate::pacing::{jittered, retry_delay};
use crate::server::observe::team_server_key;
use crate::supervisor::{ChildContext, ChildFactory, ChildMsg};

/// Messages a team actor handles.
#[derive(Debug)]
pub enum TeamMsg {
    /// Reconcile now (the supervisor's coalesced nudge).
    Reconcile,
    /// The periodic resync or a retry timer fired (tests send it to force a pass).
    Resync,
}

/// The desired state the supervisor hands the actor. Equal when nothing changed that should
/// reset a crash-looping actor: uid, generation, annotations and the deletion mark (our own
/// status writes change none of them).
#[derive(Clone, Debug)]
pub struct TeamSpec(pub Arc<TerdutTeam>);

impl PartialEq for TeamSpec {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (&self.0.metadata, &other.0.metadata);
        a.uid == b.uid
            && a.generation == b.generation
            && a.annotations == b.annotations
            && a.deletion_timestamp == b.deletion_timestamp
    }
}

/// Builds team actors for the keyed supervisor.
#[derive(Clone, Debug)]
pub struct TeamFactory {
    pub ctx: Ctx,
}

impl ChildFactory for TeamFactory {
    type Child = TeamActor;
    type Spec = TeamSpec;

    fn kind(&self) -> &'static str {
        "team"
    }

    fn build(&self, child: ChildContext<TeamSpec>) -> (TeamActor, ChildContext<TeamSpec>) {
        (
            TeamActor {
                ctx: self.ctx.clone(),
            },
            child,
        )
    }

    fn nudge(&self) -> ChildMsg<Self> {
        TeamMsg::Reconcile
    }

    fn on_crash_loop(&self, key: &ObjectKey, last_error: &str) {
        let (ctx, key, err) = (self.ctx.clone(), key.clone(), last_error.to_owned());
        tokio::spawn(async move {
            crate::crash_loop::report::<TerdutTeam>(&ctx, "team", &key, &err).await
        });
    }
}

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
    fn after(outcome: &Outcome) -> Self {
        match outcome {
            Outcome::Ready
            | Outcome::ServerRefNotFound
            | Outcome::RefNotPermitted(_)
            | Outcome::InvalidSpec(_) => Self::Resync,
            Outcome::TeamNameTaken | Outcome::UnknownUser { .. } => Self::Blocked,
            Outcome::WaitingForServer(_) => Self::Backoff,
        }
    }
}

/// The actor's state for one incarnation.
pub struct TeamState {
    child: ChildContext<TeamSpec>,
    timer: Option<JoinHandle<Result<(), ractor::MessagingErr<TeamMsg>>>>,
    /// Consecutive passes that asked for backoff.
    failures: u32,
    /// The Warning reason already published in the current failure streak.
    warned: Option<String>,
    /// The team id the last pass ended with (see `pass::converge`).
    team_id: Option<i64>,
}

impl std::fmt::Debug for TeamState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TeamState")
            .field("key", self.child.key())
            .field("failures", &self.failures)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
pub struct TeamActor {
    ctx: Ctx,
}

impl Actor for TeamActor {
    type Msg = TeamMsg;
    type State = TeamState;
    type Arguments = ChildContext<TeamSpec>;

    async fn pre_start(
        &self,
        _myself: ActorRef<TeamMsg>,
        child: ChildContext<TeamSpec>,
    ) -> Result<TeamState, ActorProcessingErr> {
        Ok(TeamState {
            child,
            timer: None,
            failures: 0,
            warned: None,
            team_id: None,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<TeamMsg>,
        state: &mut TeamState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(t) = state.timer.take() {
            t.abort();
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<TeamMsg>,
        msg: TeamMsg,
        state: &mut TeamState,
    ) -> Result<(), ActorProcessingErr> {
        state.child.message_received();
        if let TeamMsg::Reconcile = msg {
            state.child.nudge_received();
        }
        self.reconcile(&myself, state).await;
        Ok(())
    }
}

impl TeamActor {
    /// The newest copy of the object: the cache, else what the supervisor last handed over.
    fn current(&self, child: &ChildContext<TeamSpec>) -> Arc<TerdutTeam> {
        let key = child.key();
        self.ctx
            .stores
            .teams
            .get(&ObjectRef::new(&key.name).within(&key.namespace))
            .unwrap_or_else(|| child.spec().0)
    }

    async fn reconcile(&self, myself: &ActorRef<TeamMsg>, state: &mut TeamState) {
        let team = self.current(&state.child);
        let started = self.ctx.clock.now();
        let result = if team.metadata.deletion_timestamp.is_some() {
            finalize(&self.ctx, &team, &mut state.warned, state.team_id).await
        } else {
            self.sync(&team, state).await
        };
        let took = self.ctx.clock.now() - started;
        let metrics = &self.ctx.metrics;
        let next = match result {
            Ok(Next::Resync) => {
                metrics.reconciled("team", "ok", took);
                state.failures = 0;
                jittered(self.ctx.config.resync)
            }
            Ok(Next::Blocked) => {
                metrics.reconciled("team", "blocked", took);
                state.failures = 0;
                self.ctx.config.blocked_retry
            }
            Ok(Next::Backoff) => {
                metrics.reconciled("team", "error", took);
                metrics.reconcile_error("team", "waiting");
                state.failures = state.failures.saturating_add(1);
                retry_delay(state.failures)
            }
            Err(e) => {
                metrics.reconciled("team", "error", took);
                metrics.reconcile_error("team", e.category());
                state.failures = state.failures.saturating_add(1);
                // One warn per failure streak, debug after: no error-per-retry floods.
                if state.failures == 1 {
                    warn!(team = %state.child.key(), error = %e, "reconcile failed");
                } else {
                    debug!(team = %state.child.key(), error = %e, attempt = state.failures, "reconcile failed again");
                }
                if e.is_retryable() {
                    retry_delay(state.failures)
                } else {
                    jittered(self.ctx.config.resync)
                }
            }
        };
        if let Some(t) = state.timer.take() {
            t.abort();
        }
        state.timer = Some(myself.send_after(next, || TeamMsg::Resync));
    }

    /// A pass of a team that is not being deleted: converge, then status.
    async fn sync(&self, team: &TerdutTeam, state: &mut TeamState) -> Result<Next, ReconcileError> {
        let current = team.status.as_ref();
        if is_paused(team.annotations()) {
            debug!(team = %state.child.key(), "paused");
            self.write_status(team, &paused_status(current)).await?;
            return Ok(Next::Resync);
        }
        let PassResult { outcome, team_id } = converge(&self.ctx, team, state.team_id).await?;
        state.team_id = team_id;
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
        self.announce(team, state, &outcome, &desired).await;
        self.write_status(team, &desired).await?;
        Ok(Next::after(&outcome))
    }

    /// Logs and publishes a Warning (Normal for WaitingForServer, expected while a server
    /// starts) when the Ready reason changes to a failure, or its message does for a failure a
    /// user has to act on; clears the streak when Ready.
    async fn announce(
        &self,
        team: &TerdutTeam,
        state: &mut TeamState,
        outcome: &Outcome,
        desired: &DesiredStatus,
    ) {
        let Some(want) = &desired.ready else { return };
        if outcome.is_ready() {
            state.warned = None;
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
        state.warned = Some(want.reason.clone());
        if waiting {
            debug!(team = %state.child.key(), message = %want.message, "waiting for the server");
            events::normal(
                &self.ctx,
                team,
                &want.reason,
                "Reconcile",
                want.message.clone(),
            )
            .await;
        } else {
            warn!(team = %state.child.key(), reason = %want.reason, message = %want.message, "not ready");
            events::warning(
                &self.ctx,
                team,
                &want.reason,
                "Reconcile",
                want.message.clone(),
            )
            .await;
        }
    }

    /// Writes the status when it changed. A team deleted meanwhile (404) is not an error.
    async fn write_status(
        &self,
        team: &TerdutTeam,
        desired: &DesiredStatus,
    ) -> Result<(), ReconcileError> {
        let Some(patch) = status_patch(team.status.as_ref(), desired, self.ctx.clock.k8s_now())
        else {
            return Ok(());
        };
        let key = ObjectKey::of(team);
        let api: Api<TerdutTeam> = Api::namespaced(self.ctx.kube.clone(), &key.namespace);
        self.ctx.metrics.kube_write("team", "status");
        match api
            .patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(ReconcileError::kube(
                "patch status of",
                format!("TerdutTeam {key}"),
                e,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn spec(v: serde_json::Value) -> TeamSpec {
        TeamSpec(Arc::new(serde_json::from_value(v).unwrap()))
    }

    #[test]
    fn spec_equality_ignores_status_but_not_annotations_or_deletion() {
        let base = serde_json::json!({
            "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutTeam",
            "metadata": {"name": "t", "namespace": "ns", "uid": "u1", "generation": 2},
            "spec": {"serverRef": {"name": "s"}, "displayName": "T"},
        });
        let mut with_status = base.clone();
        with_status["status"] = serde_json::json!({"teamID": 4});
        assert_eq!(spec(base.clone()), spec(with_status));
        let mut paused = base.clone();
        paused["metadata"]["annotations"] = serde_json::json!({"terdut.ryuvia.com/paused": "true"});
        assert_ne!(spec(base.clone()), spec(paused));
        let mut deleting = base.clone();
        deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z".into();
        assert_ne!(spec(base), spec(deleting));
    }
}
