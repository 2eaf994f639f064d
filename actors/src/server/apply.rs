//! The only place a TerdutServer pass writes to Kubernetes: one field manager, server-side
//! apply for owned objects, create-only for the key Secret (DESIGN §6: never overwritten).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use terdut_crds::v1alpha1::TerdutServer;

use super::names::FIELD_MANAGER;
use super::plan::Step;
use crate::context::Ctx;
use crate::error::ReconcileError;

/// What a step did, for Events.
#[derive(Debug, PartialEq, Eq)]
pub enum Applied {
    Done,
    /// The key Secret already existed after all (stale cache): re-observe, never overwrite.
    KeySecretRaced,
}

pub async fn execute(
    ctx: &Ctx,
    server: &TerdutServer,
    step: &Step,
) -> Result<Applied, ReconcileError> {
    let ns = server.namespace().unwrap_or_default();
    let client = ctx.kube.clone();
    match step {
        Step::CreateKeySecret(secret) => {
            let api: Api<Secret> = Api::namespaced(client, &ns);
            ctx.metrics.kube_write("server", "create");
            match api
                .create(
                    &PostParams {
                        field_manager: Some(FIELD_MANAGER.into()),
                        ..Default::default()
                    },
                    secret,
                )
                .await
            {
                Ok(_) => {
                    event(ctx, server, EventType::Normal, "OperatorKeyCreated", "CreateKeySecret",
                        format!("created operator key Secret {} (the server re-keys its operator account from it at start)", secret.name_any())).await;
                    Ok(Applied::Done)
                }
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(Applied::KeySecretRaced),
                Err(e) => Err(ReconcileError::kube(
                    "create",
                    format!("Secret {ns}/{}", secret.name_any()),
                    e,
                )),
            }
        }
        Step::ApplyService(svc) => apply::<Service>(ctx, server, &ns, svc).await,
        Step::ApplyDeployment(d) => apply::<Deployment>(ctx, server, &ns, d).await,
        Step::ApplyPdb(p) => apply::<PodDisruptionBudget>(ctx, server, &ns, p).await,
        Step::DeletePdb { name } => {
            let api: Api<PodDisruptionBudget> = Api::namespaced(client, &ns);
            ctx.metrics.kube_write("server", "delete");
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => {
                    event(ctx, server, EventType::Normal, "PodDisruptionBudgetDeleted", "DeletePdb",
                        format!("deleted PodDisruptionBudget {name}: spec.pod.disruptionBudget was cleared")).await;
                    Ok(Applied::Done)
                }
                Err(kube::Error::Api(e)) if e.code == 404 => Ok(Applied::Done),
                Err(e) => Err(ReconcileError::kube(
                    "delete",
                    format!("PodDisruptionBudget {ns}/{name}"),
                    e,
                )),
            }
        }
    }
}

async fn apply<K>(
    ctx: &Ctx,
    server: &TerdutServer,
    ns: &str,
    obj: &K,
) -> Result<Applied, ReconcileError>
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + Serialize
        + DeserializeOwned
        + std::fmt::Debug,
{
    let name = obj.name_any();
    let kind = K::kind(&());
    let api: Api<K> = Api::namespaced(ctx.kube.clone(), ns);
    ctx.metrics.kube_write("server", "apply");
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(&name, &pp, &Patch::Apply(obj))
        .await
        .map_err(|e| ReconcileError::kube("apply", format!("{kind} {ns}/{name}"), e))?;
    event(
        ctx,
        server,
        EventType::Normal,
        &format!("{kind}Applied"),
        "Apply",
        format!("applied {kind} {name}"),
    )
    .await;
    Ok(Applied::Done)
}

pub async fn event(
    ctx: &Ctx,
    server: &TerdutServer,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
) {
    ctx.events
        .publish(&server.object_ref(&()), type_, reason, action, note)
        .await;
}
