//! The only place a TerdutServer pass writes to Kubernetes (docs/design.md §6, §7): the key
//! Secret is created once (never applied, never overwritten), the owned objects are
//! server-side applied with the one field manager, a PDB no longer asked for is deleted; every
//! one of those writes through `write/` (`write::owned`, `write::apply`).
//! Then the client its children use is refreshed (`client.rs`), failure or not: a refused
//! write must not withhold it from the teams (the refresh checks the Service and Deployment
//! itself before it sends the key).
//!
//! Each apply first reads its object's name live (the caches show only labelled objects) and
//! writes only on what it found: nothing (a create, refused if one appeared since) or an object
//! this TerdutServer controls (an apply on that very object, refused if it was replaced since);
//! anything else is never written and the pass looks again (`write::apply`, docs/design.md §7
//! "No adoption").

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt;
use terdut_crds::v1alpha1::TerdutServer;
use tracing::info;

use super::endpoint::controlled_by;
use super::names::Parent;
use super::observe::{Observation, live_metadata};
use super::plan::{Plan, Step};
use super::{Applied, ServerMemory};
use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::key::ObjectKey;
use crate::kind::Kind;
use crate::write::apply::{ApplyError, Target, apply as server_side_apply};
use crate::write::events;
use crate::write::owned::{Created, Deleted, create_only, delete};

/// With test hooks on: the milliseconds a pass waits between the live read of an object's name
/// and its apply (how a test makes a foreign object appear in between). Ignored otherwise.
pub const TEST_PAUSE_ANNOTATION: &str = "terdut.ryuvia.com/test-pause-before-apply";

/// Carries out `plan`.
pub async fn apply(
    ctx: &Ctx,
    server: &TerdutServer,
    observation: Observation,
    plan: Plan,
    memory: &mut ServerMemory,
) -> Result<Applied, ReconcileError> {
    let key = ObjectKey::of(server);
    // Spec warnings once per generation, not once per pass.
    if server.metadata.generation != memory.warned_generation {
        for w in &plan.warnings {
            events::warning(ctx, server, w.reason(), "Validate", w.to_string()).await;
        }
        memory.warned_generation = server.metadata.generation;
    }
    let (mut failure, mut raced) = (None, false);
    for step in &plan.steps {
        match execute(ctx, server, step).await {
            Ok(Done::Applied) => {}
            Ok(Done::Raced) => {
                raced = true;
                break;
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    if !plan.steps.is_empty() && failure.is_none() {
        info!(server = %key, steps = ?plan.steps, "applied");
    }
    let published = memory.client.refresh(ctx, server, &observation).await;
    Ok(Applied {
        plan,
        failure,
        raced,
        published,
    })
}

enum Done {
    Applied,
    /// What the pass saw is not what is there now (a cache behind a create, a foreign object
    /// that appeared or replaced ours): nothing was written; look again in a moment.
    Raced,
}

async fn execute(ctx: &Ctx, server: &TerdutServer, step: &Step) -> Result<Done, ReconcileError> {
    let ns = server.namespace().unwrap_or_default();
    match step {
        Step::CreateKeySecret(secret) => {
            match create_only(ctx, Kind::Server, &ns, secret.as_ref()).await? {
                Created::Created => {
                    events::normal(
                        ctx,
                        server,
                        "OperatorKeyCreated",
                        "CreateKeySecret",
                        format!(
                            "created operator key Secret {} (the server re-keys its operator \
                             account from it at start)",
                            secret.name_any()
                        ),
                    )
                    .await;
                    Ok(Done::Applied)
                }
                Created::Exists => Ok(Done::Raced),
            }
        }
        Step::ApplyService(svc) => applied(ctx, server, &ns, svc.as_ref()).await,
        Step::ApplyDeployment(d) => applied(ctx, server, &ns, d.as_ref()).await,
        Step::ApplyPdb(p) => applied(ctx, server, &ns, p.as_ref()).await,
        Step::DeletePdb { name } => {
            match delete::<PodDisruptionBudget>(ctx, Kind::Server, &ns, name).await? {
                Deleted::Deleted => {
                    events::normal(
                        ctx,
                        server,
                        "PodDisruptionBudgetDeleted",
                        "DeletePdb",
                        format!(
                            "deleted PodDisruptionBudget {name}: spec.pod.disruptionBudget was \
                             cleared"
                        ),
                    )
                    .await;
                    Ok(Done::Applied)
                }
                Deleted::Gone => Ok(Done::Applied),
            }
        }
    }
}

/// Applies one owned object, on what a live read of its name found (see the module doc), and
/// announces it.
async fn applied<K>(
    ctx: &Ctx,
    server: &TerdutServer,
    ns: &str,
    object: &K,
) -> Result<Done, ReconcileError>
where
    K: kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let parent = Parent::of(server).map_err(|e| ReconcileError::Invalid(e.to_string()))?;
    let name = object.name_any();
    let live = live_metadata::<K>(ctx, ns, &name).await?;
    let target = match &live {
        None => Target::Create,
        Some(meta) if controlled_by(meta, &parent) => Target::Existing(meta),
        // Someone else's since the observation: never written (the next pass reports it).
        Some(_) => {
            info!(server = %ObjectKey::of(server), object = %name, "not ours any more; looking again");
            return Ok(Done::Raced);
        }
    };
    test_pause(ctx, server).await;
    match server_side_apply(ctx, Kind::Server, ns, object, target).await {
        Ok(()) => {}
        Err(ApplyError::Precondition) => {
            info!(server = %ObjectKey::of(server), object = %name, "changed since it was read; looking again");
            return Ok(Done::Raced);
        }
        Err(ApplyError::Failed(e)) => return Err(e),
    }
    let kind = K::kind(&());
    events::normal(
        ctx,
        server,
        &format!("{kind}Applied"),
        "Apply",
        format!("applied {kind} {}", object.name_any()),
    )
    .await;
    Ok(Done::Applied)
}

/// See [`TEST_PAUSE_ANNOTATION`].
async fn test_pause(ctx: &Ctx, server: &TerdutServer) {
    if !ctx.config.test_hooks {
        return;
    }
    let ms = server
        .annotations()
        .get(TEST_PAUSE_ANNOTATION)
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(ms) = ms {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
}
