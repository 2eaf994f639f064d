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
use terdut_crds::v1alpha1::{Management, TerdutAlertSource, TerdutAlertSourceStatus};

use crate::api::Id;
use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::kind::Kind;
use crate::pipeline::{Pass, Pipeline, Verdict, paused_by_annotation};
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
    type Observed = observe::Observed;
    type Plan = Option<plan::Decision>;
    type Applied = status::Outcome;
    type Desired = status::DesiredStatus;
    type Deletion = cleanup::SourceDeletion;

    const KIND: Kind = Kind::Source;

    async fn observe<'a>(
        &'a self,
        pass: Pass<'a>,
        source: &'a TerdutAlertSource,
        memory: &'a mut SourceMemory,
    ) -> Result<observe::Observed, ReconcileError> {
        observe::observe(pass, source, memory).await
    }

    fn plan(source: &TerdutAlertSource, observed: &observe::Observed) -> Option<plan::Decision> {
        match observed {
            observe::Observed::Stopped(_) => None,
            observe::Observed::Reachable(r) => Some(plan::plan(&plan::Inputs {
                desired: observe::desired(source),
                status_id: r.status_id,
                secret: &r.secret.view,
                server: &r.server,
            })),
        }
    }

    async fn apply<'a>(
        &'a self,
        pass: Pass<'a>,
        source: &'a TerdutAlertSource,
        observed: observe::Observed,
        decision: Option<plan::Decision>,
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

    /// A reachable team may get an integration POST.
    fn holds(observed: &observe::Observed) -> bool {
        matches!(observed, observe::Observed::Reachable(_))
    }

    fn management(source: &TerdutAlertSource) -> Management {
        source.spec.management
    }

    fn changes(
        source: &TerdutAlertSource,
        observed: &observe::Observed,
        decision: &Option<plan::Decision>,
    ) -> Option<Vec<String>> {
        match (observed, decision) {
            (observe::Observed::Reachable(_), Some(d)) => plan::describe(source, d),
            _ => None,
        }
    }

    fn planned(
        source: &TerdutAlertSource,
        observed: &observe::Observed,
        decision: &Option<plan::Decision>,
        changes: Option<&[String]>,
        _memory: &Self::Memory,
    ) -> Verdict<status::DesiredStatus> {
        let outcome = match (observed, decision) {
            (observe::Observed::Stopped(outcome), _) => outcome.clone(),
            (_, Some(plan::Decision::Blocked(plan::Blocker::WebhookSecretLost { id }))) => {
                status::Outcome::SecretLost { id: *id }
            }
            (_, Some(plan::Decision::Blocked(plan::Blocker::SecretConflict))) => {
                status::Outcome::SecretConflict
            }
            (_, Some(plan::Decision::Noop { id })) => status::Outcome::Ready {
                id: *id,
                kind: observe::desired(source).kind,
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
