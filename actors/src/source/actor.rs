//! The TerdutAlertSource actor: one per TerdutAlertSource (DESIGN §4.5, §5). It resolves the
//! team and its server's credentials, keeps one integration on the server whose webhook URL
//! and key live only in the owned Secret, and deletes the integration before the object goes.
//!
//! Each pass: resolve -> observe -> `plan` (pure) -> execute -> status (only when it changed)
//! -> re-arm the timer. Expected failures (a 5xx, a conflict) are handled here and retried by
//! timer; only a panic (or the crash-window test hook) restarts the actor through its
//! supervisor.

use std::sync::Arc;

use kube::ResourceExt;
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use terdut_crds::v1alpha1::TerdutAlertSource;
use terdut_crds::v1alpha1::alert_source::reasons;
use terdut_crds::v1alpha1::conditions::{READY, find};
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use super::apply::{ensure_finalizer, event, patch_status};
use super::cleanup::{Cleanup, cleanup};
use super::execute::{self, Executed, Target};
use super::names::{ANNOTATION_ROTATE, ANNOTATION_ROTATED_FOR, secret_name, validate_source_name};
use super::observe::{self, Read};
use super::plan::{Blocker, Desired, Inputs, integration_kind, plan};
use super::resolve::{ServerAccess, TeamView, credentials, team};
use super::status::{Outcome, desired_status, status_patch};
use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::key::ObjectKey;
use crate::pacing::{jittered, retry_delay};
use crate::supervisor::{ChildContext, ChildFactory, ChildMsg};

const KIND: &str = "source";

/// Messages a source actor handles.
#[derive(Debug)]
pub enum SourceMsg {
    /// Reconcile now (the supervisor's coalesced nudge).
    Reconcile,
    /// The periodic resync or a retry timer fired.
    Resync,
}

/// The desired state the supervisor hands the actor. Equal when the object did not change in
/// a way that should restart a crash-looping actor: uid, generation, annotations and whether it
/// is being deleted (our own status writes change none of them).
#[derive(Clone, Debug)]
pub struct SourceSpec(pub Arc<TerdutAlertSource>);

impl PartialEq for SourceSpec {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (&self.0.metadata, &other.0.metadata);
        a.uid == b.uid
            && a.generation == b.generation
            && a.annotations == b.annotations
            && a.deletion_timestamp.is_some() == b.deletion_timestamp.is_some()
    }
}

/// Builds source actors for the keyed supervisor.
#[derive(Clone, Debug)]
pub struct SourceFactory {
    pub ctx: Ctx,
}

impl ChildFactory for SourceFactory {
    type Child = SourceActor;
    type Spec = SourceSpec;

    fn kind(&self) -> &'static str {
        KIND
    }

    fn build(&self, child: ChildContext<SourceSpec>) -> (SourceActor, ChildContext<SourceSpec>) {
        (
            SourceActor {
                ctx: self.ctx.clone(),
            },
            child,
        )
    }

    fn nudge(&self) -> ChildMsg<Self> {
        SourceMsg::Reconcile
    }

    fn on_crash_loop(&self, key: &ObjectKey, last_error: &str) {
        let (ctx, key, err) = (self.ctx.clone(), key.clone(), last_error.to_owned());
        tokio::spawn(async move {
            crate::crash_loop::report::<TerdutAlertSource>(&ctx, KIND, &key, &err).await
        });
    }
}

/// The actor's state for one incarnation.
pub struct SourceState {
    child: ChildContext<SourceSpec>,
    timer: Option<JoinHandle<Result<(), ractor::MessagingErr<SourceMsg>>>>,
    /// Consecutive failed passes, for the retry delay and one warn per streak.
    failures: u32,
    /// Consecutive passes waiting for the server's credentials: a server actor that is still
    /// starting does not nudge its sources when it gets its key, so they look again soon.
    waits: u32,
}

impl std::fmt::Debug for SourceState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceState")
            .field("key", self.child.key())
            .field("failures", &self.failures)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
pub struct SourceActor {
    ctx: Ctx,
}

impl Actor for SourceActor {
    type Msg = SourceMsg;
    type State = SourceState;
    type Arguments = ChildContext<SourceSpec>;

    async fn pre_start(
        &self,
        _myself: ActorRef<SourceMsg>,
        child: ChildContext<SourceSpec>,
    ) -> Result<SourceState, ActorProcessingErr> {
        Ok(SourceState {
            child,
            timer: None,
            failures: 0,
            waits: 0,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<SourceMsg>,
        state: &mut SourceState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(t) = state.timer.take() {
            t.abort();
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<SourceMsg>,
        msg: SourceMsg,
        state: &mut SourceState,
    ) -> Result<(), ActorProcessingErr> {
        state.child.message_received();
        if let SourceMsg::Reconcile = msg {
            state.child.nudge_received();
        }
        self.reconcile(&myself, state).await;
        Ok(())
    }
}

/// What a pass asks for next.
enum Next {
    /// The periodic resync.
    Resync,
    /// Waiting for the server: look again after the growing wait delay.
    Wait,
}

impl SourceActor {
    /// The newest copy of the object from the cache; `None` once it is gone (the supervisor's
    /// Remove follows).
    fn current(&self, key: &ObjectKey) -> Option<Arc<TerdutAlertSource>> {
        self.ctx
            .stores
            .sources
            .get(&ObjectRef::new(&key.name).within(&key.namespace))
    }

    async fn reconcile(&self, myself: &ActorRef<SourceMsg>, state: &mut SourceState) {
        let key = state.child.key().clone();
        let Some(source) = self.current(&key) else {
            debug!(source = %key, "not in the cache (deleted); nothing to do");
            return;
        };
        let started = self.ctx.clock.now();
        let result = self.pass(&source).await;
        let took = self.ctx.clock.now() - started;
        let next = match result {
            Ok(next) => {
                self.ctx.metrics.reconciled(KIND, "ok", took);
                state.failures = 0;
                match next {
                    Next::Resync => {
                        state.waits = 0;
                        jittered(self.ctx.config.resync)
                    }
                    Next::Wait => {
                        state.waits = state.waits.saturating_add(1);
                        retry_delay(state.waits)
                    }
                }
            }
            Err(e) => {
                self.ctx.metrics.reconciled(KIND, "error", took);
                self.ctx.metrics.reconcile_error(KIND, e.category());
                state.failures = state.failures.saturating_add(1);
                // One warn per failure streak, debug after.
                if state.failures == 1 {
                    warn!(source = %key, error = %e, "reconcile failed");
                } else {
                    debug!(source = %key, error = %e, attempt = state.failures, "reconcile failed again");
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
        state.timer = Some(myself.send_after(next, || SourceMsg::Resync));
    }

    /// One pass: the outcome goes into status whether it succeeded or not.
    async fn pass(&self, source: &TerdutAlertSource) -> Result<Next, ReconcileError> {
        if source.metadata.deletion_timestamp.is_some() {
            return self.delete_pass(source).await;
        }
        let (outcome, result) = match self.converge(source).await {
            Ok(outcome) => {
                let next = match outcome {
                    Outcome::WaitingForServer { .. } => Next::Wait,
                    _ => Next::Resync,
                };
                (outcome, Ok(next))
            }
            Err(e) => (
                Outcome::Failed {
                    reason: failure_reason(&e),
                    message: e.to_string(),
                },
                Err(e),
            ),
        };
        self.announce_block(source, &outcome).await;
        self.write_status(source, &outcome).await?;
        result
    }

    /// Everything but the status write.
    async fn converge(&self, source: &TerdutAlertSource) -> Result<Outcome, ReconcileError> {
        let key = ObjectKey::of(source);
        if let Err(m) = validate_source_name(&key.name) {
            return Ok(Outcome::InvalidSpec(m));
        }
        let team_name = source.spec.team_ref.name.clone();
        let (team_id, server) = match team(&self.ctx, source) {
            TeamView::NotFound => return Ok(Outcome::TeamNotFound { team: team_name }),
            TeamView::NotReady { why, .. } => {
                return Ok(Outcome::WaitingForTeam {
                    team: team_name,
                    detail: why,
                });
            }
            TeamView::Ready {
                team_id, server, ..
            } => (team_id, server),
        };
        let client = match credentials(&self.ctx, &server).await? {
            ServerAccess::Ready(c) => c,
            ServerAccess::NotReady(detail) => return Ok(Outcome::WaitingForServer { detail }),
        };
        let annotations = source.annotations();
        let desired = Desired {
            kind: integration_kind(source.spec.kind),
            name: &source.spec.name,
            rotate: annotations.get(ANNOTATION_ROTATE).map(String::as_str),
            rotated_for: annotations.get(ANNOTATION_ROTATED_FOR).map(String::as_str),
        };
        let status_id = source.status.as_ref().and_then(|s| s.integration_id);
        let uid = source.uid().unwrap_or_default();
        let secret_name = secret_name(&key.name);
        let mut secret =
            observe::secret(&self.ctx, &key.namespace, &secret_name, &uid, Read::Cache).await?;
        let mut server_view = observe::server(&client, team_id, &secret.view, status_id).await?;
        let first = plan(&Inputs {
            desired,
            status_id,
            secret: &secret.view,
            server: &server_view,
        });
        if first.is_drastic() {
            // Never mint, destroy or fail closed on a cache's word: read the Secret itself.
            secret =
                observe::secret(&self.ctx, &key.namespace, &secret_name, &uid, Read::Live).await?;
            server_view = observe::server(&client, team_id, &secret.view, status_id).await?;
        }
        // Before any POST: no integration may exist that deleting the object would not remove.
        ensure_finalizer(&self.ctx, source).await?;
        let target = Target {
            client: &client,
            team_id,
            team_name: &team_name,
        };
        let executed = execute::converge(
            &self.ctx,
            source,
            &target,
            desired,
            status_id,
            &secret,
            server_view,
        )
        .await?;
        Ok(match executed {
            Executed::InSync { id } => Outcome::Ready {
                id,
                kind: desired.kind,
                team: team_name,
            },
            Executed::Blocked(Blocker::WebhookSecretLost { id }) => Outcome::SecretLost { id },
            Executed::Blocked(Blocker::SecretConflict) => Outcome::SecretConflict,
        })
    }

    async fn delete_pass(&self, source: &TerdutAlertSource) -> Result<Next, ReconcileError> {
        let outcome = match cleanup(&self.ctx, source).await {
            Ok(Cleanup::Released) => return Ok(Next::Resync),
            Ok(Cleanup::Blocked(why)) => Ok(why),
            Err(e) => Err(e),
        };
        let message = match &outcome {
            Ok(why) => why.clone(),
            Err(e) => format!("deleting the integration failed: {e}"),
        };
        // Every failed attempt is an Event (folded into one series by the recorder).
        event(
            &self.ctx,
            source,
            EventType::Warning,
            "DeleteFailed",
            "Delete",
            format!("{message}; the TerdutAlertSource stays until the integration is deleted"),
        )
        .await;
        self.write_status(source, &Outcome::DeletionBlocked(message))
            .await?;
        match outcome {
            Ok(_) => Ok(Next::Wait),
            Err(e) => Err(e),
        }
    }

    /// A Warning when the object starts failing closed or is blocked by a foreign Secret (once
    /// per streak: only when the Ready reason changes to it).
    async fn announce_block(&self, source: &TerdutAlertSource, outcome: &Outcome) {
        let reason = match outcome {
            Outcome::SecretLost { .. } => reasons::WEBHOOK_SECRET_LOST,
            Outcome::SecretConflict => reasons::WEBHOOK_SECRET_CONFLICT,
            _ => return,
        };
        let current = source
            .status
            .as_ref()
            .and_then(|s| find(&s.conditions, READY))
            .map(|c| c.reason.as_str());
        if current == Some(reason) {
            return;
        }
        let d = desired_status(
            outcome,
            source.metadata.generation,
            &secret_name(&source.name_any()),
        );
        event(
            &self.ctx,
            source,
            EventType::Warning,
            reason,
            "Reconcile",
            d.ready.message,
        )
        .await;
    }

    async fn write_status(
        &self,
        source: &TerdutAlertSource,
        outcome: &Outcome,
    ) -> Result<(), ReconcileError> {
        let key = ObjectKey::of(source);
        let desired = desired_status(outcome, source.metadata.generation, &secret_name(&key.name));
        match status_patch(source.status.as_ref(), &desired, self.ctx.clock.k8s_now()) {
            Some(patch) => patch_status(&self.ctx, &key, &patch).await,
            None => Ok(()),
        }
    }
}

/// The Ready reason of a failed pass.
fn failure_reason(e: &ReconcileError) -> &'static str {
    match e {
        ReconcileError::Api(_) => reasons::SERVER_ERROR,
        ReconcileError::Actor { .. } => reasons::WAITING_FOR_SERVER,
        ReconcileError::Kube { .. } | ReconcileError::Invalid(_) => reasons::APPLY_FAILED,
    }
}
