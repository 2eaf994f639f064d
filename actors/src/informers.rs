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
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutServer, TerdutTeam};
use tokio::sync::watch;
use tracing::warn;

use crate::context::Stores;
use crate::key::ObjectKey;
use crate::server::names::{
    FIELD_MANAGER, LABEL_MANAGED_BY, LABEL_SERVER, MANAGED_SECRET_SELECTOR,
};

/// Where informer events go. Implemented by the operator's wiring (`operator.rs`), which
/// forwards each to the keyed supervisor of its kind.
pub trait Routes: Send + Sync + 'static {
    fn server_changed(&self, key: ObjectKey, obj: Option<Arc<TerdutServer>>);
    fn team_changed(&self, key: ObjectKey, obj: Option<Arc<TerdutTeam>>);
    fn source_changed(&self, key: ObjectKey, obj: Option<Arc<TerdutAlertSource>>);
    /// The initial list of `kind` finished: objects absent from it are gone.
    fn synced(&self, kind: &'static str);
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

/// Builds the informers; `routes` receives every event.
pub fn build(client: &Client, routes: Arc<dyn Routes>) -> Informers {
    let (synced_tx, synced) = watch::channel(0usize);
    let synced_tx = Arc::new(synced_tx);
    let mut tasks: Vec<Task> = vec![];
    let owned = format!("{LABEL_MANAGED_BY}={FIELD_MANAGER}");

    let servers = informer::<TerdutServer, _>(
        Api::all(client.clone()),
        config(),
        &mut tasks,
        synced_tx.clone(),
        {
            let r = routes.clone();
            move |ev| match ev {
                Change::Applied(o) => r.server_changed(ObjectKey::of(o.as_ref()), Some(o)),
                Change::Deleted(o) => r.server_changed(ObjectKey::of(o.as_ref()), None),
                Change::Synced => r.synced("server"),
            }
        },
    );
    let teams = informer::<TerdutTeam, _>(
        Api::all(client.clone()),
        config(),
        &mut tasks,
        synced_tx.clone(),
        {
            let r = routes.clone();
            move |ev| match ev {
                Change::Applied(o) => r.team_changed(ObjectKey::of(o.as_ref()), Some(o)),
                Change::Deleted(o) => r.team_changed(ObjectKey::of(o.as_ref()), None),
                Change::Synced => r.synced("team"),
            }
        },
    );
    let sources = informer::<TerdutAlertSource, _>(
        Api::all(client.clone()),
        config(),
        &mut tasks,
        synced_tx.clone(),
        {
            let r = routes.clone();
            move |ev| match ev {
                Change::Applied(o) => r.source_changed(ObjectKey::of(o.as_ref()), Some(o)),
                Change::Deleted(o) => r.source_changed(ObjectKey::of(o.as_ref()), None),
                Change::Synced => r.synced("source"),
            }
        },
    );

    // Owned objects nudge their server (looked up in the server cache, so the actor gets the
    // object itself, not a stale copy).
    let to_server = |servers: Store<TerdutServer>, routes: Arc<dyn Routes>| {
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
            informer::<$k, _>(
                Api::all(client.clone()),
                config().labels(&$selector),
                &mut tasks,
                synced_tx.clone(),
                move |ev| match ev {
                    Change::Applied(o) | Change::Deleted(o) => {
                        nudge(o.labels(), &o.namespace().unwrap_or_default())
                    }
                    Change::Synced => {}
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
        informer::<Secret, _>(
            Api::all(client.clone()),
            config().labels(MANAGED_SECRET_SELECTOR),
            &mut tasks,
            synced_tx.clone(),
            move |ev| match ev {
                Change::Applied(o) | Change::Deleted(o) => {
                    let ns = o.namespace().unwrap_or_default();
                    nudge(o.labels(), &ns);
                    // A webhook Secret nudges its alert source (DESIGN §5: lost Secret fails closed).
                    if let Some(owner) = o
                        .owner_references()
                        .iter()
                        .find(|r| r.kind == "TerdutAlertSource")
                    {
                        let obj = sources_store.get(&ObjectRef::new(&owner.name).within(&ns));
                        if obj.is_some() {
                            r.source_changed(ObjectKey::new(ns, owner.name.clone()), obj);
                        }
                    }
                }
                Change::Synced => {}
            },
        )
    };

    // Namespaces: metadata only, labels drive consent.
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
            o.managed_fields_mut().clear();
        })
        .reflect(writer);
        tasks.push(Box::pin(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(ev) = stream.next().await {
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
                    Ok(Event::InitDone) => tx.send_modify(|n| *n += 1),
                    Ok(_) => {}
                    Err(e) => warn!(kind = "Namespace", error = %e, "watch error (retrying)"),
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
        tasks,
        synced,
        expected: 8,
    }
}

/// A change as the routes see it.
#[derive(Debug)]
pub enum Change<K> {
    Applied(Arc<K>),
    Deleted(Arc<K>),
    Synced,
}

fn informer<K, F>(
    api: Api<K>,
    cfg: watcher::Config,
    tasks: &mut Vec<Task>,
    synced: Arc<watch::Sender<usize>>,
    on_change: F,
) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    F: Fn(Change<K>) + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store::<K>();
    let stream = watcher::watcher(api, cfg)
        .default_backoff()
        .modify(|o| {
            o.managed_fields_mut().clear();
        })
        .reflect(writer);
    let kind = K::kind(&()).into_owned();
    tasks.push(Box::pin(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(Event::Apply(o)) | Ok(Event::InitApply(o)) => {
                    on_change(Change::Applied(Arc::new(o)))
                }
                Ok(Event::Delete(o)) => on_change(Change::Deleted(Arc::new(o))),
                Ok(Event::InitDone) => {
                    synced.send_modify(|n| *n += 1);
                    on_change(Change::Synced);
                }
                Ok(Event::Init) => {}
                Err(e) => warn!(kind, error = %e, "watch error (retrying)"),
            }
        }
    }));
    reader
}
