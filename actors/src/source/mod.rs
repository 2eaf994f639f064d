//! TerdutAlertSource (docs/design.md §4.5, §5): one alert-ingest integration on a team, whose
//! webhook URL and key live only in an owned Secret, through the one pipeline
//! (`crate::pipeline`):
//!
//! - [`observe`]: the team, proven (Ready, consent, its id confirmed by the server), the
//!   webhook Secret and the integration as found;
//! - [`plan`]: PURE decision (create, rename, recreate, fail closed, noop);
//! - [`apply`]: carries the decision out, the POST's key straight into the Secret;
//! - [`status`]: PURE status; [`finalize`]: the source-cleanup finalizer.
//! - [`names`], [`secret`] (PURE builder and reader of the webhook Secret), [`hooks`] (the
//!   crash-window test hook).

pub mod apply;
pub mod cleanup;
pub mod finalize;
pub mod hooks;
pub mod names;
pub mod observe;
pub mod plan;
pub mod secret;
pub mod status;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutAlertSourceStatus};

use crate::api::Id;
use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::pipeline::{Observation, Pass, Pipeline, Verdict, paused_by_annotation};
use crate::write::shared::PausedBy;

/// What the pipeline keeps for one TerdutAlertSource between passes.
#[derive(Clone, Debug, Default)]
pub struct SourceMemory {
    /// The integration the last Ready pass ended with: finding it gone means the server lost
    /// its data (see `observe`).
    pub integration_id: Option<Id>,
    /// The webhook Secret's version (hashed) at which this runtime last read it holding the
    /// url and key: while the cached metadata shows that version the data is not read again
    /// (the cache holds no Secret data, `cached.rs`).
    pub secret_checked: Option<u64>,
}

/// The TerdutAlertSource pipeline.
#[derive(Clone, Copy, Debug, Default)]
pub struct Source;

impl Pipeline for Source {
    type Object = TerdutAlertSource;
    type Memory = SourceMemory;
    type Observed = observe::Reachable;
    type Plan = plan::Decision;
    type Applied = status::Outcome;
    type Desired = status::DesiredStatus;
    type Deletion = cleanup::SourceDeletion;

    async fn observe<'a>(
        &'a self,
        pass: Pass<'a>,
        source: &'a TerdutAlertSource,
        memory: &'a mut SourceMemory,
    ) -> Result<Observation<observe::Reachable, status::Outcome>, ReconcileError> {
        observe::observe(pass, source, memory).await
    }

    fn plan(source: &TerdutAlertSource, r: &observe::Reachable) -> plan::Decision {
        plan::plan(&plan::Inputs {
            desired: plan::desired(source),
            status_id: r.status_id,
            secret: &r.secret.view,
            server: &r.server,
        })
    }

    async fn apply<'a>(
        &'a self,
        pass: Pass<'a>,
        source: &'a TerdutAlertSource,
        observed: observe::Reachable,
        decision: plan::Decision,
        memory: &'a mut SourceMemory,
    ) -> Result<status::Outcome, ReconcileError> {
        apply::apply(pass, source, observed, decision, memory).await
    }

    fn status(
        source: &TerdutAlertSource,
        outcome: &status::Outcome,
    ) -> Verdict<status::DesiredStatus> {
        status::verdict(source, outcome)
    }

    fn failed(source: &TerdutAlertSource, error: &ReconcileError) -> Option<status::DesiredStatus> {
        Some(status::failed(source, error))
    }

    fn paused_by(ctx: &Ctx, source: &TerdutAlertSource) -> Option<PausedBy> {
        let team = &source.spec.team_ref.name;
        let namespace = source.namespace().unwrap_or_default();
        ctx.stores
            .teams
            .get(&ObjectRef::new(team).within(&namespace))
            .filter(|t| paused_by_annotation(t.as_ref()))
            .map(|_| PausedBy::Team(team.clone()))
    }

    fn changes(
        source: &TerdutAlertSource,
        _observed: &observe::Reachable,
        decision: &plan::Decision,
    ) -> Option<Vec<String>> {
        plan::describe(source, decision)
    }

    fn planned(
        source: &TerdutAlertSource,
        _observed: &observe::Reachable,
        decision: &plan::Decision,
        changes: Option<&[String]>,
        _memory: &Self::Memory,
    ) -> Verdict<status::DesiredStatus> {
        let outcome = match decision {
            plan::Decision::Blocked(plan::Blocker::WebhookSecretLost { id }) => {
                status::Outcome::SecretLost { id: *id }
            }
            plan::Decision::Blocked(plan::Blocker::SecretConflict) => {
                status::Outcome::SecretConflict
            }
            plan::Decision::Noop { id } => status::Outcome::Ready {
                id: *id,
                kind: plan::desired(source).kind,
                team: source.spec.team_ref.name.clone(),
            },
            _ => status::Outcome::ObserveOnly {
                changes: changes.map_or(0, <[String]>::len),
            },
        };
        status::verdict(source, &outcome)
    }

    fn completed(outcome: &status::Outcome) -> bool {
        matches!(outcome, status::Outcome::Ready { .. })
    }

    fn patch(
        current: Option<&TerdutAlertSourceStatus>,
        desired: &status::DesiredStatus,
        now: Time,
    ) -> Option<serde_json::Value> {
        status::status_patch(current, desired, now)
    }
}
