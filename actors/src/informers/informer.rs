//! The one loop every watch runs: a kube-runtime watcher over one resource in one scope, its
//! objects cut (`cached.rs`) and kept or refused ([`Watched::keep`]) before they reach the
//! cache, and every change handed to the resource's [`Watched::seen`] and on to the sink.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::StreamExt as _;
use kube::api::Api;
use kube::core::NamespaceResourceScope;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::reflector::Store;
use kube::runtime::watcher::{self, Event};
use kube::{Client, Resource};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::watched::{Change, Watched};
use super::{Sink, Task};
use crate::cache_writer::CacheWriter;
use crate::cached::Bounded;
use crate::key::ObjectKey;
use crate::stores::NamespacedStores;
use crate::supervisor::part::{Incarnation, Part};
use crate::watch_backoff::watch_backoff;

/// Every watch's paging.
pub fn config() -> watcher::Config {
    // Smaller pages keep a relist's memory peak down (engineering-notes).
    watcher::Config::default().page_size(100)
}

/// What every watch of one `build` shares, and the watches built so far.
pub struct Watches {
    client: Client,
    /// The watched namespaces, sorted and without repeats; empty means all.
    scopes: Vec<String>,
    synced: Arc<watch::Sender<usize>>,
    synced_rx: watch::Receiver<usize>,
    sink: Sink,
    tasks: Vec<Task>,
}

impl Watches {
    pub fn new(client: &Client, namespaces: &[String], sink: Sink) -> Self {
        let (synced, synced_rx) = watch::channel(0usize);
        let scopes: BTreeSet<String> = namespaces.iter().cloned().collect();
        Self {
            client: client.clone(),
            scopes: scopes.into_iter().collect(),
            synced: Arc::new(synced),
            synced_rx,
            sink,
            tasks: vec![],
        }
    }

    /// How many namespaces are watched one by one (0: all at once).
    pub fn scopes(&self) -> usize {
        self.scopes.len()
    }

    /// Watches a namespaced resource in every scope, each watch with its own cache.
    pub fn namespaced<W>(&mut self, cfg: watcher::Config, watched: W) -> NamespacedStores<W::K>
    where
        W: Watched,
        W::K: Resource<Scope = NamespaceResourceScope>,
    {
        let watched = Arc::new(watched);
        if self.scopes.is_empty() {
            let api = Api::all(self.client.clone());
            return NamespacedStores::all(self.informer(api, cfg, None, watched));
        }
        let stores = (self.scopes.clone().into_iter())
            .map(|ns| {
                let api = Api::namespaced(self.client.clone(), &ns);
                let store = self.informer(api, cfg.clone(), Some(ns.clone()), watched.clone());
                (ns, store)
            })
            .collect();
        NamespacedStores::namespaced(stores)
    }

    /// Watches a cluster-scoped resource: one watch in both modes.
    pub fn cluster<W: Watched>(&mut self, cfg: watcher::Config, watched: W) -> Store<W::K> {
        let api = Api::all(self.client.clone());
        self.informer(api, cfg, None, Arc::new(watched))
    }

    /// The watches, and what counts their first lists.
    pub fn into_tasks(self) -> (Vec<Task>, watch::Receiver<usize>) {
        (self.tasks, self.synced_rx)
    }

    fn informer<W: Watched>(
        &mut self,
        api: Api<W::K>,
        cfg: watcher::Config,
        scope: Option<String>,
        watched: Arc<W>,
    ) -> Store<W::K> {
        // Not `.reflect(writer)`: that holds the cache twice during every relist
        // (cache_writer.rs).
        let (writer, reader) = CacheWriter::<W::K>::new();
        let kind = W::NAME.map_or_else(|| W::K::kind(&()).into_owned(), str::to_owned);
        self.tasks.push(Box::new(Informer {
            name: match &scope {
                Some(ns) => format!("watch {kind} in {ns}"),
                None => format!("watch {kind}"),
            },
            kind,
            api,
            cfg,
            scope,
            watched,
            writer,
            listed: reader.clone(),
            synced: self.synced.clone(),
            first_list: true,
            sink: self.sink.clone(),
        }));
        reader
    }
}

/// The watch of one resource in one scope; each incarnation a fresh watcher over the same
/// cache. Its first complete list counts once towards `synced` (relists do not, or a flapping
/// watch could stand in for one that never listed).
///
/// Every object is cut to what the cache keeps (`cached.rs`) before it is stored; one that
/// `keep` refuses is not stored at all: seen as applied it is removed (it may have been the
/// operator's until this change) and routed as deleted, seen in a list it is left out.
struct Informer<W: Watched> {
    name: String,
    kind: String,
    api: Api<W::K>,
    cfg: watcher::Config,
    scope: Option<String>,
    watched: Arc<W>,
    writer: CacheWriter<W::K>,
    listed: Store<W::K>,
    synced: Arc<watch::Sender<usize>>,
    first_list: bool,
    sink: Sink,
}

impl<W: Watched> Informer<W> {
    fn hand_on(&self, change: Change<W::K>) {
        for seen in self.watched.seen(change) {
            (self.sink)(seen);
        }
    }
}

impl<W: Watched> Part for Informer<W> {
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
            while let Some(ev) = stream.next().await {
                let ev = match ev {
                    Ok(Event::InitApply(o)) if !self.watched.keep(&o) => continue,
                    Ok(Event::Apply(o)) if !self.watched.keep(&o) => Ok(Event::Delete(o)),
                    other => other,
                };
                let ev = ev.map(|e| self.writer.apply(e));
                if ev.is_ok() {
                    failing.recovered(&self.kind, self.scope.as_deref());
                }
                match ev {
                    Ok(Event::Apply(o)) | Ok(Event::InitApply(o)) => {
                        self.hand_on(Change::Applied(Arc::new(o)))
                    }
                    Ok(Event::Delete(o)) => self.hand_on(Change::Deleted(Arc::new(o))),
                    Ok(Event::InitDone) => {
                        if std::mem::take(&mut self.first_list) {
                            self.synced.send_modify(|n| *n += 1);
                        }
                        // A team whose consent pass ran before the Namespace list was swapped
                        // in found no labels and was refused (docs/design.md §4.6): every
                        // list's end tells routing what is there, so it can look again.
                        let present = (self.listed.state().iter())
                            .map(|o| ObjectKey::of(o.as_ref()))
                            .collect();
                        self.hand_on(Change::Synced(self.scope.clone(), present));
                    }
                    Ok(Event::Init) => {}
                    Err(e) => failing.failed(&self.kind, self.scope.as_deref(), &e),
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
