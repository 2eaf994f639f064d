//! Removing a run's namespace between measurements. A stopped peer leaves its finalizers on the
//! objects it reconciled, so the namespace would never go and kube-controller-manager would keep
//! retrying it beside the next peer's run. The bench strips them (nothing measures this part)
//! and waits until the namespace is gone, so every peer starts on an apiserver that is not
//! deleting the previous one's objects.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::core::NamespaceResourceScope;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutServer, TerdutTeam};

/// How long the bench waits for a namespace to go before it goes on anyway (and says so).
const GONE_WITHIN: Duration = Duration::from_secs(600);

/// Strips the finalizers of the namespace's TerdutServers, TerdutTeams and TerdutAlertSources
/// (`in_flight` patches at once), deletes it and waits until it is gone.
pub async fn remove(client: &kube::Client, ns: &str, in_flight: usize) {
    strip::<TerdutServer>(client, ns, in_flight).await;
    strip::<TerdutTeam>(client, ns, in_flight).await;
    strip::<TerdutAlertSource>(client, ns, in_flight).await;
    let api: Api<Namespace> = Api::all(client.clone());
    let _ = api.delete(ns, &DeleteParams::default()).await;
    let t0 = Instant::now();
    loop {
        match api.get_opt(ns).await {
            Ok(None) => return,
            Ok(Some(_)) | Err(_) if t0.elapsed() < GONE_WITHIN => {
                tokio::time::sleep(Duration::from_secs(1)).await
            }
            _ => {
                crate::say(&format!(
                    "namespace {ns} still there after {GONE_WITHIN:?}; going on"
                ));
                return;
            }
        }
    }
}

async fn strip<K>(client: &kube::Client, ns: &str, in_flight: usize)
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let Ok(list) = api.list(&ListParams::default()).await else {
        return;
    };
    let names: Vec<String> = list
        .items
        .iter()
        .filter(|o| !o.finalizers().is_empty())
        .map(|o| o.name_any())
        .collect();
    let patch = json!({"metadata": {"finalizers": null}});
    futures::stream::iter(names)
        .for_each_concurrent(in_flight.max(1), |name| {
            let (api, patch) = (api.clone(), patch.clone());
            async move {
                let _ = api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
            }
        })
        .await;
}
