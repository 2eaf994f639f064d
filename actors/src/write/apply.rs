//! Server-side apply of the objects a TerdutServer owns, with the one field manager.

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::core::NamespaceResourceScope;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::kind::Kind;

/// The one field manager of every write the operator makes.
pub const FIELD_MANAGER: &str = "terdut-operator";

/// Applies `object` in `namespace`, taking the fields it sets (`force`: the operator owns
/// them; objects it does not control never get here, docs/design.md §1). `kind` labels the
/// write metric.
pub async fn apply<K>(
    ctx: &Ctx,
    kind: Kind,
    namespace: &str,
    object: &K,
) -> Result<(), ReconcileError>
where
    K: kube::Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Serialize
        + DeserializeOwned
        + std::fmt::Debug,
{
    let name = object.name_any();
    let api: Api<K> = Api::namespaced(ctx.kube.clone(), namespace);
    ctx.metrics.kube_write(kind.label(), "apply");
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(&name, &pp, &Patch::Apply(object))
        .await
        .map(|_| ())
        .map_err(|e| {
            ReconcileError::kube("apply", format!("{} {namespace}/{name}", K::kind(&())), e)
        })
}
