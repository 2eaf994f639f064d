//! The conflicting-writer storm: a task merge-patches an annotation onto every TerdutTeam,
//! TerdutAlertSource and webhook Secret over and over, straight to the apiserver (a few ms a
//! write), while new pairs (finalizer added, Secret created), deletions (finalizer removed) and
//! kind changes (Secret replaced) land. Every write bumps the resourceVersion the operator's
//! guarded writes (finalizer patches, the Secret's replace) were computed from.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutTeam};

use crate::chaos::Chaos;
use crate::cluster::Kube;
use crate::report::log;
use crate::workload::{Kind, Manifest, NS};
use crate::world::WEBHOOK_SECRET_SUFFIX;

/// An object the writer patches.
#[derive(Debug, Clone)]
enum Target {
    Team(String),
    Source(String),
    Secret(String),
}

/// The objects of one kind the writer may patch.
trait Patchable:
    kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
    + Clone
    + serde::de::DeserializeOwned
    + std::fmt::Debug
{
}
impl Patchable for TerdutTeam {}
impl Patchable for TerdutAlertSource {}
impl Patchable for Secret {}

/// Names of every object of kind `K` in the run's namespace; none when it cannot be listed
/// just now (that kind sits this turn out).
async fn names<K: Patchable>(kube: &Kube) -> Vec<String> {
    Api::<K>::namespaced(kube.client.clone(), NS)
        .list_metadata(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter_map(|o| o.metadata.name)
                .collect()
        })
        .unwrap_or_default()
}

/// Everything the writer can patch: every TerdutTeam, TerdutAlertSource and webhook Secret.
async fn everything(kube: &Kube) -> Vec<Target> {
    let mut out: Vec<Target> = names::<TerdutTeam>(kube)
        .await
        .into_iter()
        .map(Target::Team)
        .collect();
    out.extend(
        names::<TerdutAlertSource>(kube)
            .await
            .into_iter()
            .map(Target::Source),
    );
    out.extend(
        names::<Secret>(kube)
            .await
            .into_iter()
            .filter(|n| n.ends_with(WEBHOOK_SECRET_SUFFIX))
            .map(Target::Secret),
    );
    out
}

async fn merge<K: Patchable>(kube: &Kube, name: &str, patch: &serde_json::Value) -> bool {
    Api::<K>::namespaced(kube.client.clone(), NS)
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .is_ok()
}

/// One annotation write; whether the apiserver took it.
async fn poke(kube: &Kube, target: &Target, turn: u64) -> bool {
    let patch = serde_json::json!({
        "metadata": {"annotations": {"chaos.example/poke": turn.to_string()}}
    });
    match target {
        Target::Team(n) => merge::<TerdutTeam>(kube, n, &patch).await,
        Target::Source(n) => merge::<TerdutAlertSource>(kube, n, &patch).await,
        Target::Secret(n) => merge::<Secret>(kube, n, &patch).await,
    }
}

/// The writer: the objects of the current wave (`hot`) on every turn, everything on every
/// fifth.
#[derive(Debug, Default)]
struct Writer {
    hot: Mutex<Vec<Target>>,
    stop: AtomicBool,
}

impl Writer {
    async fn run(self: Arc<Self>, kube: Kube) -> (u64, u64) {
        let (mut writes, mut turns) = (0u64, 0u64);
        let mut all = vec![];
        while !self.stop.load(Ordering::Relaxed) {
            let full = turns % 5 == 0;
            if full {
                all = everything(&kube).await;
            }
            let mut targets = self.hot.lock().map(|h| h.clone()).unwrap_or_default();
            if full {
                targets.extend(all.iter().cloned());
            }
            turns += 1;
            for t in &targets {
                writes += u64::from(poke(&kube, t, turns).await);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        (writes, turns)
    }
}

/// The objects a wave touches, for the writer to patch without pause.
fn hot(manifests: &[Manifest], deletions: &[(Kind, String)]) -> Vec<Target> {
    let mut out: Vec<Target> = manifests
        .iter()
        .map(|m| match m {
            Manifest::Team(_) => Target::Team(m.name().to_owned()),
            Manifest::Source(_) => Target::Source(m.name().to_owned()),
        })
        .collect();
    out.extend(manifests.iter().filter_map(|m| match m {
        Manifest::Source(_) => Some(Target::Secret(format!(
            "{}{WEBHOOK_SECRET_SUFFIX}",
            m.name()
        ))),
        Manifest::Team(_) => None,
    }));
    out.extend(deletions.iter().map(|(k, n)| match k {
        Kind::Team => Target::Team(n.clone()),
        Kind::Source => Target::Source(n.clone()),
    }));
    out
}

/// Returns the sources whose kind changed and how many annotation writes the apiserver took.
pub async fn storm(c: &mut Chaos) -> anyhow::Result<(BTreeSet<String>, u64)> {
    let writer = Arc::new(Writer::default());
    let task = tokio::spawn(writer.clone().run(c.kube.clone()));
    let result = waves(c, &writer).await;
    writer.stop.store(true, Ordering::Relaxed);
    let (writes, turns) = task.await?;
    log(&format!(
        "conflicting writer: {writes} annotation writes in {turns} turns"
    ));
    Ok((result?, writes))
}

async fn waves(c: &mut Chaos, writer: &Writer) -> anyhow::Result<BTreeSet<String>> {
    let mut kind_changed = BTreeSet::new();
    for _ in 0..c.plan.conflict_waves {
        let changes = c.model.wave(|teams| (teams / 20).max(2));
        kind_changed.extend(changes.kind_changed.iter().cloned());
        let hot = hot(&changes.apply, &changes.delete);
        let n = hot.len();
        if let Ok(mut h) = writer.hot.lock() {
            *h = hot;
        }
        c.kube.send(&changes).await?;
        log(&format!(
            "conflicting writer on: {}; {n} objects patched without pause",
            changes.summary()
        ));
        tokio::time::sleep(Duration::from_secs_f64(c.model.rng().uniform(4.0, 6.0))).await;
    }
    Ok(kind_changed)
}
