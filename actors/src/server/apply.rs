//! The only place a TerdutServer pass writes to Kubernetes (docs/design.md §6, §7): the key
//! Secret is created once (never applied, never overwritten), the owned objects are
//! server-side applied with the one field manager, a PDB no longer asked for is deleted.
//! Then the client its children use is refreshed (`client.rs`), failure or not: a refused
//! write must not withhold it from the teams.

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use terdut_crds::v1alpha1::TerdutServer;
use tracing::info;

use super::observe::Observation;
use super::plan::{Plan, Step};
use super::{Applied, ServerMemory};
use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::key::ObjectKey;
use crate::kind::Kind;
use crate::write::apply::{FIELD_MANAGER, apply as server_side_apply};
use crate::write::events;

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
            Ok(Done::KeySecretRaced) => {
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
    KeySecretRaced,
}

async fn execute(ctx: &Ctx, server: &TerdutServer, step: &Step) -> Result<Done, ReconcileError> {
    let ns = server.namespace().unwrap_or_default();
    match step {
        Step::CreateKeySecret(secret) => {
            let api: Api<Secret> = Api::namespaced(ctx.kube.clone(), &ns);
            ctx.metrics.kube_write(Kind::Server.label(), "create");
            let pp = PostParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            };
            match api.create(&pp, secret).await {
                Ok(_) => {
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
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(Done::KeySecretRaced),
                Err(e) => Err(ReconcileError::kube(
                    "create",
                    format!("Secret {ns}/{}", secret.name_any()),
                    e,
                )),
            }
        }
        Step::ApplyService(svc) => applied(ctx, server, &ns, svc.as_ref()).await,
        Step::ApplyDeployment(d) => applied(ctx, server, &ns, d.as_ref()).await,
        Step::ApplyPdb(p) => applied(ctx, server, &ns, p.as_ref()).await,
        Step::DeletePdb { name } => {
            let api: Api<PodDisruptionBudget> = Api::namespaced(ctx.kube.clone(), &ns);
            ctx.metrics.kube_write(Kind::Server.label(), "delete");
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => {
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
                Err(kube::Error::Api(e)) if e.code == 404 => Ok(Done::Applied),
                Err(e) => Err(ReconcileError::kube(
                    "delete",
                    format!("PodDisruptionBudget {ns}/{name}"),
                    e,
                )),
            }
        }
    }
}

/// Applies one owned object and announces it.
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
    server_side_apply(ctx, Kind::Server, ns, object).await?;
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
