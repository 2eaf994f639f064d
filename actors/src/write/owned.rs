//! The writes of owned objects that are not applies, with the one field manager: a create that
//! never writes over what is there (the operator key Secret, docs/design.md §6: created once,
//! never applied, never overwritten) and a delete a missing object satisfies (a
//! PodDisruptionBudget no longer asked for).

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use kube::core::NamespaceResourceScope;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::apply::FIELD_MANAGER;
use crate::context::Ctx;
use crate::error::{KubeCall, ReconcileError};
use crate::kind::Kind;

/// How a [`create_only`] ended, besides an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Created {
    Created,
    /// One by that name exists (made meanwhile): nothing was written over it.
    Exists,
}

/// How a [`delete`] ended, besides an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deleted {
    Deleted,
    /// There was none: nothing to do.
    Gone,
}

/// Creates `object` in `namespace` with a POST, never over one that exists. `kind` labels the
/// write metric.
pub async fn create_only<K>(
    ctx: &Ctx,
    kind: Kind,
    namespace: &str,
    object: &K,
) -> Result<Created, ReconcileError>
where
    K: kube::Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Serialize
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(ctx.kube.clone(), namespace);
    ctx.metrics.kube_write(kind.label(), "create");
    let pp = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    match api.create(&pp, object).await {
        Ok(_) => Ok(Created::Created),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(Created::Exists),
        Err(e) => Err(ReconcileError::kube(
            KubeCall::CreateOwned,
            format!("{} {namespace}/{}", K::kind(&()), object.name_any()),
            e,
        )),
    }
}

/// Deletes the object `name` in `namespace`; a 404 is [`Deleted::Gone`]. `kind` labels the
/// write metric.
pub async fn delete<K>(
    ctx: &Ctx,
    kind: Kind,
    namespace: &str,
    name: &str,
) -> Result<Deleted, ReconcileError>
where
    K: kube::Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(ctx.kube.clone(), namespace);
    ctx.metrics.kube_write(kind.label(), "delete");
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(Deleted::Deleted),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(Deleted::Gone),
        Err(e) => Err(ReconcileError::kube(
            KubeCall::DeleteOwned,
            format!("{} {namespace}/{name}", K::kind(&())),
            e,
        )),
    }
}
