//! The informer side (kube-runtime watchers + reflectors): every watched kind keeps a cache
//! of what the operator reads, within a bound no tenant can raise (`cached.rs`), and reports
//! what it sees to [`Routes`], which hands it to the routing index (`routing/index.rs`
//! decides who reconciles, docs/design.md §5):
//! - TerdutServer, TerdutTeam, TerdutAlertSource: applied, deleted, listed;
//! - Deployment / Service / PDB / operator-key Secret: their server, by the
//!   `terdut.ryuvia.com/server` label; only those of the operator's shape are cached (a label
//!   is anyone's to set), Secrets as metadata only;
//! - a webhook Secret: its alert source, by its owner reference;
//! - Namespace labels (consent, §4.6).
//!
//! Each watch is a supervised part (`supervisor/part.rs`, docs/adr/0017-liveness.md): an
//! incarnation that panics or ends is started again as a fresh watcher over the same cache,
//! which is a relist (`cache_writer.rs` applies it in place).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::Api;
use kube::core::NamespaceResourceScope;
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutServer, TerdutTeam};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::cache_writer::CacheWriter;
use crate::cached::{
    Bounded, bound_namespace_meta, operator_shaped, secret_object_name, server_object_name,
};
use crate::context::Stores;
use crate::key::ObjectKey;
use crate::routing::Listed;
use crate::server::names::{
    FIELD_MANAGER, LABEL_MANAGED_BY, LABEL_SERVER, MANAGED_SECRET_SELECTOR,
};
use crate::stores::NamespacedStores;
use crate::supervisor::part::{Incarnation, Part};
use crate::tenancy::attachments::Attachments;
use crate::watch_backoff::watch_backoff;

/// Where informer events go: the operator's wiring (`operator.rs`) turns each into what the
/// routing index takes. One method per thing the watches see, nothing decided here.
pub trait Routes: Send + Sync + 'static {
    /// A TerdutServer was applied (`Some`) or deleted.
    fn server(&self, key: ObjectKey, obj: Option<Arc<TerdutServer>>);
    /// A Deployment, Service, PDB or key Secret labelled with its server changed.
    fn server_owned(&self, server: ObjectKey);
    fn team(&self, key: ObjectKey, obj: Option<Arc<TerdutTeam>>);
    fn source(&self, key: ObjectKey, obj: Option<Arc<TerdutAlertSource>>);
    /// The webhook Secret `secret` of alert source `source` was written at
    /// `resource_version`, or deleted.
    fn webhook_secret(
        &self,
        secret: ObjectKey,
        resource_version: Option<String>,
        deleted: bool,
        source: ObjectKey,
    );
    /// A Namespace's labels (`None`: the namespace is gone).
    fn namespace(&self, name: String, labels: Option<BTreeMap<String, String>>);
    /// A list of `kind` in `scope` (`None`: every namespace) finished with `present` in it.
    /// Only that scope: another namespace's watch may be mid-list.
    fn listed(&self, kind: Listed, scope: Option<String>, present: BTreeSet<ObjectKey>);
    /// With `--watch-namespace-selector`: a namespace entered or left the selection, or the
    /// selection's list finished.
    fn scope(&self, change: ScopeChange);
}

/// What the watch of the selected namespaces saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScopeChange {
    In(String),
    Out(String),
    Listed(BTreeSet<String>),
}

/// The label selectors of one operator instance (docs/configuration.md "Sharding").
#[derive(Clone, Debug, Default)]
pub struct Selectors {
    /// On TerdutServers, TerdutTeams and TerdutAlertSources.
    pub objects: Option<String>,
    /// On Namespaces: the namespaces whose objects this instance reconciles.
    pub namespaces: Option<String>,
}

/// One watch: a part to supervise (`supervisor::part::supervise`).
pub type Task = Box<dyn Part>;

/// The caches and the watches that fill them. Supervise every one; `synced` turns true once
/// all initial lists are in.
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
/// watch per kind (the ClusterRole of docs/design.md §9). Otherwise one watch per kind and
/// namespace, which needs only namespaced Roles there (the per-namespace split of docs/design.md
/// §13); Namespaces themselves are cluster-scoped and stay one cluster-wide watch either way.
pub fn build(
    client: &Client,
    namespaces: &[String],
    selectors: &Selectors,
    routes: Arc<dyn Routes>,
) -> Informers {
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

    // The operator's own kinds, only those of this instance's shard when it has one.
    let mine = || match &selectors.objects {
        Some(selector) => config().labels(selector),
        None => config(),
    };
    // The table of watches: each kind, what it selects, what of it the cache keeps, and
    // what its events mean.
    let servers = watch.kind(
        mine(),
        every,
        &mut tasks,
        object(&routes, Listed::Server, |r, k, o| r.server(k, o)),
    );
    // The teams also fill the attachments a policy's `maxTeams` counts (`tenancy/`).
    let attachments = Arc::new(Attachments::new(scopes.len()));
    let teams = {
        let route = object(&routes, Listed::Team, |r, k, o| r.team(k, o));
        let counted = attachments.clone();
        watch.kind(
            mine(),
            every,
            &mut tasks,
            move |change: Change<TerdutTeam>| {
                match &change {
                    Change::Applied(t) => counted.seen(t),
                    Change::Deleted(t) => counted.gone(&ObjectKey::of(t.as_ref())),
                    Change::Synced(scope, present) => counted.listed(scope.as_deref(), present),
                }
                route(change)
            },
        )
    };
    let sources = watch.kind(
        mine(),
        every,
        &mut tasks,
        object(&routes, Listed::Source, |r, k, o| r.source(k, o)),
    );
    if let Some(selector) = &selectors.namespaces {
        tasks.push(scope_watch(
            client,
            selector,
            routes.clone(),
            synced_tx.clone(),
        ));
    }
    let deployments = watch.kind::<Deployment, _>(
        config().labels(&owned),
        server_shaped,
        &mut tasks,
        owned_by_server(&routes),
    );
    let services = watch.kind::<Service, _>(
        config().labels(&owned),
        server_shaped,
        &mut tasks,
        owned_by_server(&routes),
    );
    let pdbs = watch.kind::<PodDisruptionBudget, _>(
        config().labels(&owned),
        server_shaped,
        &mut tasks,
        owned_by_server(&routes),
    );
    // Metadata only (`Api<PartialObjectMeta<_>>` asks for metadata): the data of a labelled
    // Secret never reaches the operator through its watch (a key is read live where it is needed, `server/observe.rs`, `source/observe.rs`).
    let secrets = watch.kind::<PartialObjectMeta<Secret>, _>(
        config().labels(MANAGED_SECRET_SELECTOR),
        secret_shaped,
        &mut tasks,
        managed_secret(&routes),
    );

    // Namespaces: metadata only, labels drive consent. Cluster-scoped, so one watch in both
    // modes (the namespaced chart grants read on Namespaces through a small ClusterRole).
    let namespaces = {
        let (reader, writer) = reflector::store::<PartialObjectMeta<Namespace>>();
        tasks.push(Box::new(NamespaceWatch {
            client: client.clone(),
            writer,
            listed: reader.clone(),
            routes: routes.clone(),
            synced: synced_tx.clone(),
            first_list: true,
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
            attachments,
        },
        // Every task is one watch that counts its first complete list once.
        expected: tasks.len(),
        tasks,
        synced,
    }
}

/// The namespaces `--watch-namespace-selector` selects: the API server tells when one starts or
/// stops matching (a watch with a label selector sends a deletion when an object stops
/// matching), so a namespace gaining the label is picked up without a restart.
fn scope_watch(
    client: &Client,
    selector: &str,
    routes: Arc<dyn Routes>,
    synced: Arc<watch::Sender<usize>>,
) -> Task {
    let (reader, writer) = reflector::store::<PartialObjectMeta<Namespace>>();
    Box::new(ScopeWatch {
        client: client.clone(),
        selector: selector.to_owned(),
        writer,
        listed: reader,
        routes,
        synced,
        first_list: true,
    })
}

/// The watch of every Namespace's labels.
struct NamespaceWatch {
    client: Client,
    writer: reflector::store::Writer<PartialObjectMeta<Namespace>>,
    listed: Store<PartialObjectMeta<Namespace>>,
    routes: Arc<dyn Routes>,
    synced: Arc<watch::Sender<usize>>,
    /// Its first complete list is yet to come (counted once towards `synced`).
    first_list: bool,
}

impl Part for NamespaceWatch {
    fn name(&self) -> &str {
        "watch Namespace"
    }

    fn run(&mut self) -> Incarnation<'_> {
        Box::pin(async move {
            let stream = watcher::watcher(
                Api::<PartialObjectMeta<Namespace>>::all(self.client.clone()),
                config(),
            )
            .backoff(watch_backoff())
            .modify(|o| bound_namespace_meta(o.meta_mut()));
            let mut stream = std::pin::pin!(stream);
            let mut failing = Streak::default();
            let r = &self.routes;
            while let Some(ev) = stream.next().await {
                if let Ok(ev) = &ev {
                    // What `.reflect()` does, with the writer kept for the next incarnation.
                    self.writer.apply_watcher_event(ev);
                    failing.recovered("Namespace", None);
                }
                match ev {
                    Ok(Event::Apply(ns)) | Ok(Event::InitApply(ns)) => {
                        r.namespace(ns.name_any(), Some(ns.labels().clone()))
                    }
                    Ok(Event::Delete(ns)) => r.namespace(ns.name_any(), None),
                    Ok(Event::InitDone) => {
                        if std::mem::take(&mut self.first_list) {
                            self.synced.send_modify(|n| *n += 1);
                        }
                        // A team whose consent pass ran before this list was swapped in found
                        // no labels and was refused (docs/design.md §4.6): it must look again.
                        let present = self
                            .listed
                            .state()
                            .iter()
                            .map(|n| ObjectKey::new("", n.name_any()))
                            .collect();
                        r.listed(Listed::Namespace, None, present);
                    }
                    Ok(_) => {}
                    Err(e) => failing.failed("Namespace", None, &e),
                }
            }
            Ok(())
        })
    }
}

/// The watch of the namespaces `--watch-namespace-selector` selects.
struct ScopeWatch {
    client: Client,
    selector: String,
    writer: reflector::store::Writer<PartialObjectMeta<Namespace>>,
    listed: Store<PartialObjectMeta<Namespace>>,
    routes: Arc<dyn Routes>,
    synced: Arc<watch::Sender<usize>>,
    first_list: bool,
}

impl Part for ScopeWatch {
    fn name(&self) -> &str {
        "watch Namespace (selected)"
    }

    fn run(&mut self) -> Incarnation<'_> {
        Box::pin(async move {
            let stream = watcher::watcher(
                Api::<PartialObjectMeta<Namespace>>::all(self.client.clone()),
                config().labels(&self.selector),
            )
            .backoff(watch_backoff())
            .modify(|o| bound_namespace_meta(o.meta_mut()));
            let mut stream = std::pin::pin!(stream);
            let mut failing = Streak::default();
            let routes = &self.routes;
            while let Some(ev) = stream.next().await {
                if let Ok(ev) = &ev {
                    self.writer.apply_watcher_event(ev);
                    failing.recovered("Namespace (selected)", None);
                }
                match ev {
                    Ok(Event::Apply(ns)) => routes.scope(ScopeChange::In(ns.name_any())),
                    Ok(Event::Delete(ns)) => routes.scope(ScopeChange::Out(ns.name_any())),
                    Ok(Event::InitDone) => {
                        if std::mem::take(&mut self.first_list) {
                            self.synced.send_modify(|n| *n += 1);
                        }
                        let present = self.listed.state().iter().map(|n| n.name_any()).collect();
                        routes.scope(ScopeChange::Listed(present));
                    }
                    Ok(_) => {}
                    Err(e) => failing.failed("Namespace (selected)", None, &e),
                }
            }
            Ok(())
        })
    }
}

/// The route of one of the operator's own kinds: applied, deleted, listed.
fn object<K>(
    routes: &Arc<dyn Routes>,
    kind: Listed,
    route: fn(&dyn Routes, ObjectKey, Option<Arc<K>>),
) -> impl Fn(Change<K>) + Send + Sync + 'static
where
    K: Resource<DynamicType = ()> + Send + Sync + 'static,
{
    let r = routes.clone();
    move |ev| match ev {
        Change::Applied(o) => route(r.as_ref(), ObjectKey::of(o.as_ref()), Some(o)),
        Change::Deleted(o) => route(r.as_ref(), ObjectKey::of(o.as_ref()), None),
        Change::Synced(scope, present) => r.listed(kind, scope, present),
    }
}

/// The route of an object a TerdutServer owns: its server, named by its label.
fn owned_by_server<K>(routes: &Arc<dyn Routes>) -> impl Fn(Change<K>) + Send + Sync + 'static
where
    K: Resource<DynamicType = ()> + Send + Sync + 'static,
{
    let r = routes.clone();
    move |ev| match ev {
        Change::Applied(o) | Change::Deleted(o) => {
            if let Some(name) = o.labels().get(LABEL_SERVER) {
                r.server_owned(ObjectKey::new(
                    o.namespace().unwrap_or_default(),
                    name.clone(),
                ));
            }
        }
        Change::Synced(..) => {}
    }
}

/// The route of a Secret the operator manages: a server's key (its server), or an alert
/// source's webhook Secret (its source, docs/design.md §5: a lost Secret fails closed).
fn managed_secret(
    routes: &Arc<dyn Routes>,
) -> impl Fn(Change<PartialObjectMeta<Secret>>) + Send + Sync + 'static {
    let server = owned_by_server::<PartialObjectMeta<Secret>>(routes);
    let r = routes.clone();
    move |ev| {
        let (o, deleted) = match &ev {
            Change::Applied(o) => (o.clone(), false),
            Change::Deleted(o) => (o.clone(), true),
            Change::Synced(..) => return,
        };
        server(ev);
        let ns = o.namespace().unwrap_or_default();
        if let Some(owner) = o
            .owner_references()
            .iter()
            .find(|r| r.kind == "TerdutAlertSource")
        {
            r.webhook_secret(
                ObjectKey::of(o.as_ref()),
                o.resource_version(),
                deleted,
                ObjectKey::new(ns, owner.name.clone()),
            );
        }
    }
}

/// A change as the routes see it.
#[derive(Debug)]
pub enum Change<K> {
    Applied(Arc<K>),
    Deleted(Arc<K>),
    /// The watch of this namespace (`None`: of every namespace) finished a list, with these
    /// objects in it.
    Synced(Option<String>, BTreeSet<ObjectKey>),
}

/// What every watch of one [`build`] shares.
struct Watch<'a> {
    client: &'a Client,
    /// The watched namespaces; empty means all.
    scopes: &'a [String],
    synced: &'a Arc<watch::Sender<usize>>,
}

/// Every object of a watch is cached (the operator's own kinds, selected by the API server).
fn every<K>(_: &K) -> bool {
    true
}

/// A Deployment, Service or PDB named after the TerdutServer that controls it.
fn server_shaped<K: Resource>(o: &K) -> bool {
    operator_shaped(o.meta(), server_object_name)
}

/// A server's key Secret or an alert source's webhook Secret, controlled by it.
fn secret_shaped<K: Resource>(o: &K) -> bool {
    operator_shaped(o.meta(), secret_object_name)
}

impl Watch<'_> {
    /// Watches kind `K` in every scope, each watch with its own reflector store, keeping the
    /// objects `keep` accepts. A `PartialObjectMeta<_>` kind is watched as metadata only.
    fn kind<K, F>(
        &self,
        cfg: watcher::Config,
        keep: fn(&K) -> bool,
        tasks: &mut Vec<Task>,
        on_change: F,
    ) -> NamespacedStores<K>
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Bounded
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
            return NamespacedStores::all(informer(
                Api::all(self.client.clone()),
                cfg,
                None,
                keep,
                tasks,
                self.synced,
                on_change,
            ));
        }
        NamespacedStores::namespaced(
            self.scopes
                .iter()
                .map(|ns| {
                    let store = informer(
                        Api::namespaced(self.client.clone(), ns),
                        cfg.clone(),
                        Some(ns.clone()),
                        keep,
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
///
/// Every object is cut to what the cache keeps (`cached.rs`) before it is stored; one that
/// `keep` refuses is not stored at all: seen as applied it is removed (it may have been the
/// operator's until this change) and routed as deleted, seen in a list it is left out.
fn informer<K>(
    api: Api<K>,
    cfg: watcher::Config,
    scope: Option<String>,
    keep: fn(&K) -> bool,
    tasks: &mut Vec<Task>,
    synced: &Arc<watch::Sender<usize>>,
    on_change: Arc<dyn Fn(Change<K>) + Send + Sync>,
) -> Store<K>
where
    K: Resource<DynamicType = ()>
        + Bounded
        + Clone
        + Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    // Not `.reflect(writer)`: that holds the cache twice during every relist (cache_writer.rs).
    let (writer, reader) = CacheWriter::<K>::new();
    let kind = K::kind(&()).into_owned();
    tasks.push(Box::new(Informer {
        name: match &scope {
            Some(ns) => format!("watch {kind} in {ns}"),
            None => format!("watch {kind}"),
        },
        kind,
        api,
        cfg,
        scope,
        keep,
        writer,
        listed: reader.clone(),
        synced: synced.clone(),
        first_list: true,
        on_change,
    }));
    reader
}

/// The watch of one kind in one scope; each incarnation a fresh watcher over the same cache.
struct Informer<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    name: String,
    kind: String,
    api: Api<K>,
    cfg: watcher::Config,
    scope: Option<String>,
    /// Whether the cache holds an object at all (`every`, `server_shaped`, `secret_shaped`).
    keep: fn(&K) -> bool,
    writer: CacheWriter<K>,
    listed: Store<K>,
    synced: Arc<watch::Sender<usize>>,
    first_list: bool,
    on_change: Arc<dyn Fn(Change<K>) + Send + Sync>,
}

impl<K> Part for Informer<K>
where
    K: Resource<DynamicType = ()>
        + Bounded
        + Clone
        + Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn run(&mut self) -> Incarnation<'_> {
        Box::pin(async move {
            let stream = watcher::watcher(self.api.clone(), self.cfg.clone())
                .backoff(watch_backoff())
                .modify(Bounded::bound);
            let mut stream = std::pin::pin!(stream);
            let mut failing = Streak::default();
            let (kind, scope) = (&self.kind, self.scope.as_deref());
            let keep = self.keep;
            while let Some(ev) = stream.next().await {
                let ev = match ev {
                    Ok(Event::InitApply(o)) if !keep(&o) => continue,
                    Ok(Event::Apply(o)) if !keep(&o) => Ok(Event::Delete(o)),
                    other => other,
                };
                let ev = ev.map(|e| self.writer.apply(e));
                if ev.is_ok() {
                    failing.recovered(kind, scope);
                }
                match ev {
                    Ok(Event::Apply(o)) | Ok(Event::InitApply(o)) => {
                        (self.on_change)(Change::Applied(Arc::new(o)))
                    }
                    Ok(Event::Delete(o)) => (self.on_change)(Change::Deleted(Arc::new(o))),
                    Ok(Event::InitDone) => {
                        if std::mem::take(&mut self.first_list) {
                            self.synced.send_modify(|n| *n += 1);
                        }
                        let present = self
                            .listed
                            .state()
                            .iter()
                            .map(|o| ObjectKey::of(o.as_ref()))
                            .collect();
                        (self.on_change)(Change::Synced(self.scope.clone(), present));
                    }
                    Ok(Event::Init) => {}
                    Err(e) => failing.failed(kind, scope, &e),
                }
            }
            Ok(())
        })
    }
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
