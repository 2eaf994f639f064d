//! The informer side (kube-runtime watchers + reflectors): every watched kind keeps a cache
//! (managedFields stripped) and turns its events into supervisor messages. Many events for one
//! object coalesce, because a running child gets at most one queued nudge.
//!
//! Routing (who reconciles when something changes):
//! - TerdutServer -> its server actor, and every TerdutTeam naming it (DESIGN §5: "A TerdutTeam
//!   re-reconciles when its TerdutServer changes").
//! - Deployment / Service / PDB / operator-key Secret -> the server named by their
//!   `terdut.ryuvia.com/server` label.
//! - Namespace labels -> the TerdutTeams in that namespace (consent, DESIGN §4.6).
//! - TerdutTeam / TerdutAlertSource -> their own actors, through [`Routes`].

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::Api;
use kube::core::NamespaceResourceScope;
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutServer, TerdutTeam};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::context::Stores;
use crate::key::ObjectKey;
use crate::server::names::{
    FIELD_MANAGER, LABEL_MANAGED_BY, LABEL_SERVER, MANAGED_SECRET_SELECTOR,
};
use crate::stores::NamespacedStores;

/// Where informer events go. Implemented by the operator's wiring (`operator.rs`), which
/// forwards each to the keyed supervisor of its kind.
pub trait Routes: Send + Sync + 'static {
    fn server_changed(&self, key: ObjectKey, obj: Option<Arc<TerdutServer>>);
    fn team_changed(&self, key: ObjectKey, obj: Option<Arc<TerdutTeam>>);
    fn source_changed(&self, key: ObjectKey, obj: Option<Arc<TerdutAlertSource>>);
    /// The webhook Secret `secret` of alert source `source` (`obj`: the source from the cache,
    /// if there) was written at `resource_version`, or deleted. By default the source is
    /// nudged (DESIGN §5: a lost Secret fails closed).
    fn webhook_secret_changed(
        &self,
        secret: ObjectKey,
        resource_version: Option<String>,
        deleted: bool,
        source: ObjectKey,
        obj: Option<Arc<TerdutAlertSource>>,
    ) {
        let _ = (secret, resource_version, deleted);
        if obj.is_some() {
            self.source_changed(source, obj);
        }
    }
    /// A list of `kind` in `namespace` (`None`: every namespace) finished: objects of that
    /// scope absent from it are gone. Only that scope: another namespace's watch may be
    /// mid-list, its new objects not yet in its store.
    fn synced(&self, kind: &'static str, namespace: Option<String>);
}

type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The caches and the tasks that fill them. Spawn every task; `synced` turns true once all
/// initial lists are in.
pub struct Informers {
    pub stores: Stores,
    pub tasks: Vec<Task>,
    pub synced: watch::Receiver<usize>,
    pub expected: usize,
}

impl Debug for Informers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Informers")
            .field("tasks", &self.tasks.len())
            .finish()
    }
}

fn config() -> watcher::Config {
    // Smaller pages keep a relist's memory peak down (engineering-notes).
    watcher::Config::default().page_size(100)
}

/// Builds the informers; `routes` receives every event. `namespaces` empty: one cluster-wide
/// watch per kind (DESIGN §9's ClusterRole). Otherwise one watch per kind and namespace, which
/// needs only namespaced Roles there (the per-namespace split of DESIGN §13); Namespaces
/// themselves are cluster-scoped and stay one cluster-wide watch either way.
pub fn build(client: &Client, namespaces: &[String], routes: Arc<dyn Routes>) -> Informers {
    let (synced_tx, synced) = watch::channel(0usize);
    let synced_tx = Arc::new(synced_tx);
    let mut tasks: Vec<Task> = vec![];
    let owned = format!("{LABEL_MANAGED_BY}={FIELD_MANAGER}");
    let scopes: Vec<String> = namespaces
        .iter()
        .cloned()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let watch = Watch {
        client,
        scopes: &scopes,
        synced: &synced_tx,
    };

    let servers = watch.kind::<TerdutServer, _>(config(), &mut tasks, {
        let r = routes.clone();
        move |ev| match ev {
            Change::Applied(o) => r.server_changed(ObjectKey::of(o.as_ref()), Some(o)),
            Change::Deleted(o) => r.server_changed(ObjectKey::of(o.as_ref()), None),
            Change::Synced(ns) => r.synced("server", ns),
        }
    });
    let teams = watch.kind::<TerdutTeam, _>(config(), &mut tasks, {
        let r = routes.clone();
        move |ev| match ev {
            Change::Applied(o) => r.team_changed(ObjectKey::of(o.as_ref()), Some(o)),
            Change::Deleted(o) => r.team_changed(ObjectKey::of(o.as_ref()), None),
            Change::Synced(ns) => r.synced("team", ns),
        }
    });
    let sources = watch.kind::<TerdutAlertSource, _>(config(), &mut tasks, {
        let r = routes.clone();
        move |ev| match ev {
            Change::Applied(o) => r.source_changed(ObjectKey::of(o.as_ref()), Some(o)),
            Change::Deleted(o) => r.source_changed(ObjectKey::of(o.as_ref()), None),
            Change::Synced(ns) => r.synced("source", ns),
        }
    });

    // Owned objects nudge their server (looked up in the server cache, so the actor gets the
    // object itself, not a stale copy).
    let to_server = |servers: NamespacedStores<TerdutServer>, routes: Arc<dyn Routes>| {
        move |labels: &std::collections::BTreeMap<String, String>, ns: &str| {
            if let Some(name) = labels.get(LABEL_SERVER) {
                let obj = servers.get(&ObjectRef::new(name).within(ns));
                if obj.is_some() {
                    routes.server_changed(ObjectKey::new(ns, name.clone()), obj);
                }
            }
        }
    };
    macro_rules! owned {
        ($k:ty, $selector:expr) => {{
            let nudge = to_server(servers.clone(), routes.clone());
            watch.kind::<$k, _>(
                config().labels(&$selector),
                &mut tasks,
                move |ev| match ev {
                    Change::Applied(o) | Change::Deleted(o) => {
                        nudge(o.labels(), &o.namespace().unwrap_or_default())
                    }
                    Change::Synced(_) => {}
                },
            )
        }};
    }
    let deployments = owned!(Deployment, owned);
    let services = owned!(Service, owned);
    let pdbs = owned!(PodDisruptionBudget, owned);
    let secrets = {
        let nudge = to_server(servers.clone(), routes.clone());
        let r = routes.clone();
        let sources_store = sources.clone();
        watch.kind::<Secret, _>(
            config().labels(MANAGED_SECRET_SELECTOR),
            &mut tasks,
            move |ev| {
                let (o, deleted) = match ev {
                    Change::Applied(o) => (o, false),
                    Change::Deleted(o) => (o, true),
                    Change::Synced(_) => return,
                };
                let ns = o.namespace().unwrap_or_default();
                nudge(o.labels(), &ns);
                // A webhook Secret nudges its alert source (DESIGN §5: lost Secret fails closed),
                // unless the event is only the source's own write landing (see the route).
                if let Some(owner) = o
                    .owner_references()
                    .iter()
                    .find(|r| r.kind == "TerdutAlertSource")
                {
                    let obj = sources_store.get(&ObjectRef::new(&owner.name).within(&ns));
                    r.webhook_secret_changed(
                        ObjectKey::of(o.as_ref()),
                        o.resource_version(),
                        deleted,
                        ObjectKey::new(ns, owner.name.clone()),
                        obj,
                    );
                }
            },
        )
    };

    // Namespaces: metadata only, labels drive consent. Cluster-scoped, so one watch in both
    // modes (the namespaced chart grants read on Namespaces through a small ClusterRole).
    let namespaces = {
        let (reader, writer) = reflector::store::<PartialObjectMeta<Namespace>>();
        let teams_store = teams.clone();
        let r = routes.clone();
        let tx = synced_tx.clone();
        let stream = watcher::watcher(
            Api::<PartialObjectMeta<Namespace>>::all(client.clone()),
            config(),
        )
        .default_backoff()
        .modify(|o| {
            // None, not `clear()`: a cleared Vec keeps its buffer in every cached object.
            o.meta_mut().managed_fields = None;
        })
        .reflect(writer);
        tasks.push(Box::pin(async move {
            let mut stream = std::pin::pin!(stream);
            let mut first_list = true;
            let mut failing = Streak::default();
            while let Some(ev) = stream.next().await {
                if ev.is_ok() {
                    failing.recovered("Namespace", None);
                }
                match ev {
                    Ok(Event::Apply(ns)) | Ok(Event::Delete(ns)) => {
                        let name = ns.name_any();
                        for t in teams_store
                            .state()
                            .into_iter()
                            .filter(|t| t.namespace().as_deref() == Some(&name))
                        {
                            r.team_changed(ObjectKey::of(t.as_ref()), Some(t));
                        }
                    }
                    Ok(Event::InitDone) => {
                        if std::mem::take(&mut first_list) {
                            tx.send_modify(|n| *n += 1);
                        }
                        // A team whose consent pass ran before this list was swapped in found
                        // no labels and was refused (DESIGN §4.6): it must look again.
                        r.synced("namespace", None);
                    }
                    Ok(_) => {}
                    Err(e) => failing.failed("Namespace", None, &e),
                }
            }
        }));
        reader
    };

    Informers {
        stores: Stores {
            servers,
            teams,
            sources,
            deployments,
            services,
            pdbs,
            secrets,
            namespaces,
        },
        // Every task is one watch that counts its first complete list once.
        expected: tasks.len(),
        tasks,
        synced,
    }
}

/// A change as the routes see it.
#[derive(Debug)]
pub enum Change<K> {
    Applied(Arc<K>),
    Deleted(Arc<K>),
    /// The watch of this namespace (`None`: of every namespace) finished a list.
    Synced(Option<String>),
}

/// What every watch of one [`build`] shares.
struct Watch<'a> {
    client: &'a Client,
    /// The watched namespaces; empty means all.
    scopes: &'a [String],
    synced: &'a Arc<watch::Sender<usize>>,
}

impl Watch<'_> {
    /// Watches kind `K` in every scope, each watch with its own reflector store.
    fn kind<K, F>(
        &self,
        cfg: watcher::Config,
        tasks: &mut Vec<Task>,
        on_change: F,
    ) -> NamespacedStores<K>
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + Debug
            + DeserializeOwned
            + Send
            + Sync
            + 'static,
        F: Fn(Change<K>) + Send + Sync + 'static,
    {
        let on_change = Arc::new(on_change);
        if self.scopes.is_empty() {
            let api = Api::all(self.client.clone());
            return NamespacedStores::all(informer(api, None, cfg, tasks, self.synced, on_change));
        }
        NamespacedStores::namespaced(
            self.scopes
                .iter()
                .map(|ns| {
                    let api = Api::namespaced(self.client.clone(), ns);
                    let store = informer(
                        api,
                        Some(ns.clone()),
                        cfg.clone(),
                        tasks,
                        self.synced,
                        on_change.clone(),
                    );
                    (ns.clone(), store)
                })
                .collect(),
        )
    }
}

/// One watch and its reflector store. Its first complete list counts once towards `synced`
/// (relists do not, or a flapping watch could stand in for one that never listed).
fn informer<K>(
    api: Api<K>,
    scope: Option<String>,
    cfg: watcher::Config,
    tasks: &mut Vec<Task>,
    synced: &Arc<watch::Sender<usize>>,
    on_change: Arc<dyn Fn(Change<K>) + Send + Sync>,
) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store::<K>();
    let stream = watcher::watcher(api, cfg)
        .default_backoff()
        .modify(|o| {
            // None, not `clear()`: a cleared Vec keeps its buffer in every cached object.
            o.meta_mut().managed_fields = None;
        })
        .reflect(writer);
    let kind = K::kind(&()).into_owned();
    let synced = synced.clone();
    tasks.push(Box::pin(async move {
        let mut stream = std::pin::pin!(stream);
        let mut first_list = true;
        let mut failing = Streak::default();
        while let Some(ev) = stream.next().await {
            if ev.is_ok() {
                failing.recovered(&kind, scope.as_deref());
            }
            match ev {
                Ok(Event::Apply(o)) | Ok(Event::InitApply(o)) => {
                    on_change(Change::Applied(Arc::new(o)))
                }
                Ok(Event::Delete(o)) => on_change(Change::Deleted(Arc::new(o))),
                Ok(Event::InitDone) => {
                    if std::mem::take(&mut first_list) {
                        synced.send_modify(|n| *n += 1);
                    }
                    on_change(Change::Synced(scope.clone()));
                }
                Ok(Event::Init) => {}
                Err(e) => failing.failed(&kind, scope.as_deref(), &e),
            }
        }
    }));
    reader
}

/// A watch's consecutive errors, logged proportionately: one warning when a streak starts
/// (the watcher retries with backoff on its own), debug for the rest, and one line when it
/// recovers with how many errors it took. A kube-apiserver restart used to log a warning per
/// retry per kind (docs/reliability.md).
#[derive(Debug, Default)]
struct Streak(u32);

impl Streak {
    fn failed(&mut self, kind: &str, scope: Option<&str>, e: &dyn std::fmt::Display) {
        self.0 += 1;
        let namespace = scope.unwrap_or("*");
        if self.0 == 1 {
            warn!(kind, namespace, error = %e, "watch error (retrying with backoff)");
        } else {
            debug!(kind, namespace, error = %e, attempt = self.0, "watch error again");
        }
    }

    fn recovered(&mut self, kind: &str, scope: Option<&str>) {
        if self.0 > 0 {
            info!(
                kind,
                namespace = scope.unwrap_or("*"),
                errors = self.0,
                "watch recovered"
            );
            self.0 = 0;
        }
    }
}
