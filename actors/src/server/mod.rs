//! TerdutServer (docs/design.md §4.1, §6, §7, §8): one terdut-server install, through the one
//! pipeline (`crate::pipeline`):
//!
//! - [`observe`]: the owned objects (caches, and a live look at names the caches cannot show),
//!   the Secrets the spec names, the Zalando cluster;
//! - [`plan`]: PURE (server, observed) -> steps + status, built by the PURE builders
//!   ([`deployment`], [`env`], [`service`], [`pdb`], [`key`], [`database`], [`drift`],
//!   [`pod_security`], [`references`], [`names`], [`warning`]);
//! - [`apply`]: every Kubernetes write, then the client its children use ([`client`]);
//! - [`status`]: PURE status; [`finalize`]: nothing to do while it is deleted.
//!
//! Its passes run on a worker task of its actor (`tree::server`), which answers its
//! children's questions from what the last pass published.

pub mod apply;
pub mod client;
pub mod cnpg;
pub mod database;
pub mod deployment;
pub mod drift;
pub mod endpoint;
pub mod env;
pub mod finalize;
pub mod key;
pub mod names;
pub mod observe;
pub mod pdb;
pub mod plan;
pub mod planned;
pub mod pod_security;
pub mod references;
pub mod rotation;
pub mod service;
pub mod status;
pub mod summary;
pub mod warning;
pub mod wiring;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use terdut_crds::v1alpha1::{TerdutServer, TerdutServerStatus};

use crate::error::ReconcileError;
use crate::pipeline::{Observation, Pass, Pipeline, Verdict};

/// Annotation that makes the server's actor panic when the operator runs with test hooks on;
/// how tests prove per-object isolation. Ignored otherwise.
pub const TEST_FAULT_ANNOTATION: &str = "terdut.ryuvia.com/test-fault";

/// What a pass did.
#[derive(Debug)]
pub struct Applied {
    pub plan: plan::Plan,
    /// The step that failed, if one did (the later ones were not tried).
    pub failure: Option<ReconcileError>,
    /// The key Secret already existed after all (a lagging cache): look again in a moment.
    pub raced: bool,
    pub published: client::Published,
}

/// A cache that lags a create by a moment: the next look.
pub const RACE_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// What the pipeline keeps for one TerdutServer between passes.
#[derive(Clone, Debug, Default)]
pub struct ServerMemory {
    pub client: client::ServerClient,
    /// What the last pass published for the children.
    pub published: Option<client::Published>,
    /// Spec warnings are published once per generation.
    pub warned_generation: Option<i64>,
}

/// The TerdutServer pipeline. A failed pass leaves the status as it is (`Pipeline::failed`):
/// a pass fails before its status is known only when observing failed (a live read); a
/// failed write is in the status (ApplyFailed) through `verdict`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Server;

impl Pipeline for Server {
    type Object = TerdutServer;
    type Memory = ServerMemory;
    type Observed = observe::Observation;
    type Plan = Result<plan::Plan, String>;
    type Applied = Applied;
    type Desired = status::DesiredStatus;
    type Deletion = finalize::ServerDeletion;

    async fn observe<'a>(
        &'a self,
        pass: Pass<'a>,
        server: &'a TerdutServer,
        _memory: &'a mut ServerMemory,
    ) -> Result<Observation<observe::Observation, Applied>, ReconcileError> {
        // A server's pass always goes on: what it cannot do is in its plan and its status.
        observe::observe(pass.ctx, server)
            .await
            .map(Observation::Go)
    }

    fn plan(server: &TerdutServer, observed: &observe::Observation) -> Result<plan::Plan, String> {
        plan::plan(
            server,
            &observed.as_observed(),
            key::OperatorKeyValue::generate,
        )
        .map_err(|e| e.to_string())
    }

    async fn apply<'a>(
        &'a self,
        pass: Pass<'a>,
        server: &'a TerdutServer,
        observed: observe::Observation,
        plan: Result<plan::Plan, String>,
        memory: &'a mut ServerMemory,
    ) -> Result<Applied, ReconcileError> {
        let plan = plan.map_err(ReconcileError::Invalid)?;
        let applied = apply::apply(pass.ctx, server, observed, plan, memory).await?;
        memory.published = Some(applied.published.clone());
        Ok(applied)
    }

    fn status(server: &TerdutServer, applied: &Applied) -> Verdict<status::DesiredStatus> {
        status::verdict(server, applied)
    }

    async fn read_only<'a>(
        &'a self,
        pass: Pass<'a>,
        server: &'a TerdutServer,
        observed: Option<&'a observe::Observation>,
        memory: &'a mut ServerMemory,
    ) {
        // The children keep asking for the client while the server is paused or only observed:
        // building it reads the key Secret and asks the server, and writes nothing.
        let fresh;
        let observation = match observed {
            Some(o) => o,
            None => match observe::observe(pass.ctx, server).await {
                Ok(o) => {
                    fresh = o;
                    &fresh
                }
                Err(_) => return,
            },
        };
        memory.published = Some(memory.client.refresh(pass.ctx, server, observation).await);
    }

    fn changes(
        _server: &TerdutServer,
        _observed: &observe::Observation,
        plan: &Result<plan::Plan, String>,
    ) -> Option<Vec<String>> {
        plan.as_ref()
            .ok()
            .map(|p| p.steps.iter().map(plan::describe).collect())
    }

    fn planned(
        server: &TerdutServer,
        _observed: &observe::Observation,
        plan: &Result<plan::Plan, String>,
        changes: Option<&[String]>,
        memory: &ServerMemory,
    ) -> Verdict<status::DesiredStatus> {
        planned::planned(
            server,
            plan,
            changes.unwrap_or_default(),
            memory.published.as_ref(),
        )
    }

    fn completed(applied: &Applied) -> bool {
        applied.failure.is_none() && !applied.raced
    }

    fn patch(
        current: Option<&TerdutServerStatus>,
        desired: &status::DesiredStatus,
        now: Time,
    ) -> Option<serde_json::Value> {
        status::status_patch(current, desired, now)
    }
}

/// Whether the test-fault annotation asks this server's actor to panic (test hooks only):
/// `panic` on every pass (a crash loop), `panic-once` on the first pass of this object and
/// generation in this process (one crash, then a restart that must recover).
pub fn test_fault(test_hooks: bool, server: &TerdutServer) -> bool {
    static FIRED: std::sync::LazyLock<std::sync::Mutex<std::collections::HashSet<String>>> =
        std::sync::LazyLock::new(Default::default);
    if !test_hooks {
        return false;
    }
    match server
        .annotations()
        .get(TEST_FAULT_ANNOTATION)
        .map(String::as_str)
    {
        Some("panic") => true,
        Some("panic-once") => {
            let once = format!(
                "{}/{:?}",
                server.uid().unwrap_or_default(),
                server.metadata.generation
            );
            FIRED.lock().map(|mut f| f.insert(once)).unwrap_or(false)
        }
        _ => false,
    }
}
