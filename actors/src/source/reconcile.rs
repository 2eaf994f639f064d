//! One reconcile of a TerdutAlertSource, independent of what drives it (DESIGN §4.5, §5): the
//! [`SourceActor`](super::actor::SourceActor) calls it for each message, and any other runtime
//! (the bench's kube-runtime `Controller` baselines, issue 8) can call it the same way, keeping
//! per-object [`SourceMemory`] between calls.
//!
//! One call: resolve -> observe -> `plan` (pure) -> execute -> status (only when it changed)
//! -> when the next pass is due: the jittered resync (DESIGN §5), a growing wait while the
//! server has no credentials, or the retry delay after a failure.

use std::time::Duration;

use kube::ResourceExt;
use kube::runtime::events::EventType;
use terdut_crds::v1alpha1::alert_source::reasons;
use terdut_crds::v1alpha1::conditions::{READY, find};
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutAlertSourceStatus};
use tracing::{debug, warn};

use super::apply::{ensure_finalizer, event, patch_status};
use super::cleanup::{Cleanup, cleanup};
use super::execute::{self, Executed, Target};
use super::names::{ANNOTATION_ROTATE, ANNOTATION_ROTATED_FOR, secret_name, validate_source_name};
use super::observe::{self, Read};
use super::plan::{Blocker, Desired, Inputs, ServerView, integration_kind, plan};
use super::resolve::{Access, Granted, access};
use super::status::{Outcome, desired_status, status_patch};
use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::key::ObjectKey;
use crate::pacing::{jittered, retry_delay};
use crate::team::reconcile::stale_but_equal;

const KIND: &str = "source";

/// What a runtime keeps for one TerdutAlertSource between passes (the actor: for one
/// incarnation).
#[derive(Clone, Debug, Default)]
pub struct SourceMemory {
    /// Consecutive failed passes, for the retry delay and one warn per streak.
    pub failures: u32,
    /// Consecutive passes waiting for the server's credentials: a server actor that is still
    /// starting does not nudge its sources when it gets its key, so they look again soon.
    pub waits: u32,
    /// The status this runtime last wrote (see `team::reconcile::stale_but_equal`).
    pub written: Option<TerdutAlertSourceStatus>,
    /// The integration the last Ready pass ended with: finding it gone means the server lost
    /// its data (see `observe::server`).
    pub integration_id: Option<crate::api::Id>,
}

/// What a pass asks for next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// The periodic resync.
    Resync,
    /// Waiting for the server: look again after the growing wait delay.
    Wait,
}

/// Reconciles TerdutAlertSources; cheap to clone.
#[derive(Clone, Debug)]
pub struct SourceReconciler {
    pub ctx: Ctx,
}

impl SourceReconciler {
    pub fn new(ctx: Ctx) -> Self {
        Self { ctx }
    }

    /// One pass over `source` (the newest copy the caller has); returns when the next pass is
    /// due. Never fails: failures are in status, Events, metrics and the returned delay.
    pub async fn reconcile(
        &self,
        source: &TerdutAlertSource,
        memory: &mut SourceMemory,
    ) -> Duration {
        let key = ObjectKey::of(source);
        let started = self.ctx.clock.now();
        let result = self.pass(source, memory).await;
        let took = self.ctx.clock.now() - started;
        match result {
            Ok(next) => {
                self.ctx.metrics.reconciled(KIND, "ok", took);
                memory.failures = 0;
                match next {
                    Next::Resync => {
                        memory.waits = 0;
                        jittered(self.ctx.config.resync)
                    }
                    Next::Wait => {
                        memory.waits = memory.waits.saturating_add(1);
                        retry_delay(memory.waits)
                    }
                }
            }
            Err(e) => {
                self.ctx.metrics.reconciled(KIND, "error", took);
                self.ctx.metrics.reconcile_error(KIND, e.category());
                memory.failures = memory.failures.saturating_add(1);
                // One warn per failure streak, debug after.
                if memory.failures == 1 {
                    warn!(source = %key, error = %e, "reconcile failed");
                } else {
                    debug!(source = %key, error = %e, attempt = memory.failures, "reconcile failed again");
                }
                if e.is_retryable() {
                    retry_delay(memory.failures)
                } else {
                    jittered(self.ctx.config.resync)
                }
            }
        }
    }

    /// One pass: the outcome goes into status whether it succeeded or not.
    async fn pass(
        &self,
        source: &TerdutAlertSource,
        memory: &mut SourceMemory,
    ) -> Result<Next, ReconcileError> {
        if source.metadata.deletion_timestamp.is_some() {
            return self.delete_pass(source, memory).await;
        }
        let (outcome, result) = match self.converge(source, memory.integration_id).await {
            Ok(outcome) => {
                let next = match outcome {
                    Outcome::WaitingForServer { .. } | Outcome::TeamUnverified { .. } => Next::Wait,
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
        memory.integration_id = match &outcome {
            Outcome::Ready { id, .. } => Some(*id),
            _ => memory.integration_id,
        };
        self.announce_block(source, &outcome).await;
        self.write_status(source, &outcome, memory).await?;
        result
    }

    /// Everything but the status write.
    /// `remembered`: the integration the last Ready pass of this runtime ended with.
    async fn converge(
        &self,
        source: &TerdutAlertSource,
        remembered: Option<crate::api::Id>,
    ) -> Result<Outcome, ReconcileError> {
        let key = ObjectKey::of(source);
        if let Err(m) = validate_source_name(&key.name) {
            return Ok(Outcome::InvalidSpec(m));
        }
        let team_name = source.spec.team_ref.name.clone();
        let Granted {
            client,
            team_id,
            server,
        } = match access(&self.ctx, source).await? {
            Access::Granted(g) => g,
            Access::Denied(outcome) => return Ok(outcome),
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
        let mut server_view =
            observe::server(&self.ctx, source, &client, team_id, &secret.view, status_id).await?;
        // The integration this runtime itself last had Ready is gone: the server lost its data
        // (docs/design.md §5), so every team and source of it looks now.
        if let ServerView::Gone(id) = &server_view
            && remembered == Some(*id)
            && let Some(hooks) = self.ctx.on_server.get()
        {
            hooks.data_lost(&server);
        }
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
            server_view =
                observe::server(&self.ctx, source, &client, team_id, &secret.view, status_id)
                    .await?;
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

    async fn delete_pass(
        &self,
        source: &TerdutAlertSource,
        memory: &mut SourceMemory,
    ) -> Result<Next, ReconcileError> {
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
        self.write_status(source, &Outcome::DeletionBlocked(message), memory)
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
        memory: &mut SourceMemory,
    ) -> Result<(), ReconcileError> {
        let key = ObjectKey::of(source);
        let desired = desired_status(outcome, source.metadata.generation, &secret_name(&key.name));
        let now = self.ctx.clock.k8s_now();
        let current = source.status.as_ref();
        // The copy may predate this runtime's last write (see `stale_but_equal`).
        let patch = status_patch(current, &desired, now.clone()).or_else(|| {
            stale_but_equal(current, &mut memory.written)
                .and_then(|written| status_patch(Some(written), &desired, now))
        });
        if let Some(patch) = patch {
            memory.written = patch_status(&self.ctx, &key, &patch).await?;
        }
        Ok(())
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
