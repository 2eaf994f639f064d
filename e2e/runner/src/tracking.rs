//! Argo CD's label tracking reads `app.kubernetes.io/instance` only on objects without owner
//! references (docs/gitops.md "Argo CD's label tracking"): every object the operator made,
//! which carries that label with its TerdutServer's name, must have a controller owner
//! reference, or an Application named like the server would prune it.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ListParams;
use kube::{Api, Resource};

use crate::checks::log;
use crate::run::Run;

/// The label on everything the operator applies (actors/src/server/names.rs).
const MANAGED_BY: &str = "app.kubernetes.io/managed-by=terdut-operator";

async fn unowned<K>(run: &Run, found: &mut usize, bad: &mut Vec<String>) -> anyhow::Result<()>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let list = Api::<K>::all(run.client.clone())
        .list(&ListParams::default().labels(MANAGED_BY))
        .await?;
    for o in list.items {
        let m: &ObjectMeta = o.meta();
        *found += 1;
        let controlled = m
            .owner_references
            .iter()
            .flatten()
            .any(|r| r.controller == Some(true));
        if !controlled {
            bad.push(format!(
                "{} {}/{}",
                K::kind(&K::DynamicType::default()),
                m.namespace.clone().unwrap_or_default(),
                m.name.clone().unwrap_or_default()
            ));
        }
    }
    Ok(())
}

pub async fn check(run: &Run) -> anyhow::Result<()> {
    log("every object the operator labelled has a controller owner reference (Argo CD tracking)");
    let (mut found, mut bad) = (0, vec![]);
    unowned::<Deployment>(run, &mut found, &mut bad).await?;
    unowned::<ReplicaSet>(run, &mut found, &mut bad).await?;
    unowned::<Pod>(run, &mut found, &mut bad).await?;
    unowned::<Service>(run, &mut found, &mut bad).await?;
    unowned::<Secret>(run, &mut found, &mut bad).await?;
    unowned::<PodDisruptionBudget>(run, &mut found, &mut bad).await?;
    run.checks.check(
        "every object labelled app.kubernetes.io/managed-by=terdut-operator has a controller owner reference",
        found > 0 && bad.is_empty(),
        format!("{found} objects, without one: {bad:?}"),
    );
    Ok(())
}
