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
pub mod finalize;
pub mod hooks;
pub mod names;
pub mod observe;
pub mod plan;
pub mod secret;
pub mod status;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutAlertSourceStatus};

use crate::api::Id;
use crate::error::ReconcileError;
use crate::kind::Kind;
use crate::pipeline::{Finalized, Pass, Pipeline, Verdict};

/// What the pipeline keeps for one TerdutAlertSource between passes.
#[derive(Clone, Debug, Default)]
pub struct SourceMemory {
    /// The integration the last Ready pass ended with: finding it gone means the server lost
    /// its data (see `observe`).
    pub integration_id: Option<Id>,
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
        _decision: Option<plan::Decision>,
        memory: &'a mut SourceMemory,
    ) -> Result<status::Outcome, ReconcileError> {
        // The decision is made again inside: a POST answered "exists" is planned anew.
        apply::apply(pass, source, observed, memory).await
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

    fn paused(_source: &TerdutAlertSource) -> Option<status::DesiredStatus> {
        None
    }

    fn patch(
        current: Option<&TerdutAlertSourceStatus>,
        desired: &status::DesiredStatus,
        now: Time,
    ) -> Option<serde_json::Value> {
        status::status_patch(current, desired, now)
    }

    async fn finalize<'a>(
        &'a self,
        pass: Pass<'a>,
        source: &'a TerdutAlertSource,
        memory: &'a mut SourceMemory,
    ) -> Result<Finalized<status::DesiredStatus>, ReconcileError> {
        finalize::finalize(pass, source, memory).await
    }
}
