//! The writer: owns the routing [`Index`], takes what the informers saw, and sends the
//! index's commands to the actors (docs/design.md §5, ADR 0008). One task and one channel:
//! events and hosts' adoption requests are handled in order, so a host that (re)starts adopts
//! exactly the children the index places under it, and every later event reaches it.
//!
//! It is a supervised part (`supervisor/part.rs`, docs/adr/0017-liveness.md): the channel
//! outlives an incarnation that panics, and the next one rebuilds its index from the caches
//! (each object in them was also sent here, so nothing it lacks is news), tells every host
//! which children it places there (a move the lost message made is undone), and goes on
//! with the messages that waited.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt as _;
use kube::runtime::reflector::ObjectRef;
use ractor::ActorRef;
use terdut_crds::v1alpha1::TerdutServer;
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, info};

pub use super::messages::Registry;
use super::messages::{ChildrenMsg, ServerMsg};
use crate::context::Stores;
use crate::key::ObjectKey;
use crate::object_actor::{ObjectMsg, SourceSpec, TeamSpec};
pub use crate::routing::Seen;
use crate::routing::{ChildKind, Command, Host, Index, ScopeChange};
use crate::supervisor::actor_part::Current;
use crate::supervisor::part::{Incarnation, Part};
use crate::supervisor::{CallError, SupervisorMsg, SupervisorSnapshot};

/// A host the writer can deliver children to.
#[derive(Clone, Debug)]
pub enum HostRef {
    Server(ActorRef<ServerMsg>),
    Holding(ActorRef<ChildrenMsg>),
}

impl HostRef {
    /// The host actor's id (a restarted host has a new one).
    pub fn id(&self) -> ractor::ActorId {
        match self {
            Self::Server(actor) => actor.get_id(),
            Self::Holding(actor) => actor.get_id(),
        }
    }

    fn send(&self, msg: ChildrenMsg) {
        // A host that is gone adopts its children again when it restarts.
        match self {
            Self::Server(actor) => drop(actor.cast(ServerMsg::Children(msg))),
            Self::Holding(actor) => drop(actor.cast(msg)),
        }
    }

    /// Stops the actor of `key` there and forgets it.
    pub fn remove(&self, kind: ChildKind, key: ObjectKey) {
        self.send(match kind {
            ChildKind::Team => ChildrenMsg::Teams(SupervisorMsg::Remove(key)),
            ChildKind::Source => ChildrenMsg::Sources(SupervisorMsg::Remove(key)),
        });
    }

    /// Makes the actor of `key` there run a pass now (as its own timer would).
    pub fn resync(&self, kind: ChildKind, key: ObjectKey) {
        self.send(match kind {
            ChildKind::Team => ChildrenMsg::Teams(SupervisorMsg::Forward(key, ObjectMsg::Resync)),
            ChildKind::Source => {
                ChildrenMsg::Sources(SupervisorMsg::Forward(key, ObjectMsg::Resync))
            }
        });
    }

    /// The state of the host's table of `kind`.
    pub async fn snapshot(
        &self,
        kind: ChildKind,
        timeout: Duration,
    ) -> Result<SupervisorSnapshot, CallError> {
        let (tx, rx) = oneshot::channel();
        let msg = match kind {
            ChildKind::Team => ChildrenMsg::Teams(SupervisorMsg::Snapshot(tx.into())),
            ChildKind::Source => ChildrenMsg::Sources(SupervisorMsg::Snapshot(tx.into())),
        };
        self.send(msg);
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(snapshot)) => Ok(snapshot),
            Ok(Err(_)) => Err(CallError::Dropped),
            Err(_) => Err(CallError::Timeout(timeout)),
        }
    }
}

/// Where the writer sends the servers' own commands (the root supervisor; the wiring
/// implements it, so the writer does not depend on the server actor).
pub trait ServerRoot: Send + Sync + 'static {
    /// Ensure the actor of TerdutServer `key`, for an event at `at`.
    fn ensure(&self, key: ObjectKey, server: Arc<TerdutServer>, at: tokio::time::Instant);
    fn remove(&self, key: ObjectKey);
    /// Stop every server actor but those of `keep` (a restarted writer's index).
    fn retain(&self, keep: BTreeSet<ObjectKey>);
}

enum WriterMsg {
    /// What an informer saw, and when.
    Seen(Seen, tokio::time::Instant),
    /// A host (re)started: deliver it its children.
    Adopt(Host, HostRef),
    Locate {
        kind: ChildKind,
        key: ObjectKey,
        reply: oneshot::Sender<Option<HostRef>>,
    },
    /// The root supervisor (re)started: ensure every server actor the index knows.
    AdoptServers,
    /// The stall watchdog's question (`runtime/watchdog.rs`).
    Ping(oneshot::Sender<()>),
}

/// The informers' and hosts' handle on the writer; cheap to clone.
#[derive(Clone, Debug)]
pub struct Writer {
    tx: mpsc::UnboundedSender<WriterMsg>,
}

impl std::fmt::Debug for WriterMsg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Seen(s, _) => write!(f, "Seen({s:?})"),
            Self::Adopt(h, _) => write!(f, "Adopt({h:?})"),
            Self::Locate { kind, key, .. } => write!(f, "Locate({kind:?}, {key})"),
            Self::AdoptServers => f.write_str("AdoptServers"),
            Self::Ping(_) => f.write_str("Ping"),
        }
    }
}

/// The writer's end of the channel, until [`spawn`] takes it.
#[derive(Debug)]
pub struct Inbox(mpsc::UnboundedReceiver<WriterMsg>);

impl Writer {
    pub fn channel() -> (Self, Inbox) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self { tx }, Inbox(rx))
    }

    pub fn seen(&self, seen: Seen) {
        // Gone only when the operator stops.
        let _ = self
            .tx
            .send(WriterMsg::Seen(seen, tokio::time::Instant::now()));
    }

    /// A host (re)started and wants the children the index places under it.
    pub fn adopt(&self, host: Host, actor: HostRef) {
        let _ = self.tx.send(WriterMsg::Adopt(host, actor));
    }

    /// The host the actor of `kind` `key` lives under, if the index knows the object.
    pub async fn locate(&self, kind: ChildKind, key: ObjectKey) -> Option<HostRef> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(WriterMsg::Locate { kind, key, reply }).ok()?;
        rx.await.ok().flatten()
    }

    /// The root supervisor (re)started and wants every server actor.
    pub fn adopt_servers(&self) {
        let _ = self.tx.send(WriterMsg::AdoptServers);
    }

    /// A question answered once the writer took every message sent before it.
    pub fn ping(&self) -> Option<oneshot::Receiver<()>> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(WriterMsg::Ping(reply)).ok()?;
        Some(rx)
    }
}

/// What the writer task needs.
pub struct Outlets {
    pub root: Box<dyn ServerRoot>,
    /// The holding host's running incarnation.
    pub holding: Current<Option<ActorRef<ChildrenMsg>>>,
    pub registry: Registry,
    pub stores: Stores,
    /// `false`: something else reconciles teams and sources (the benchmark's baselines); the
    /// writer sends only the servers' commands.
    pub children: bool,
    /// `true`: only the namespaces `--watch-namespace-selector` selects are reconciled (none
    /// until its first list).
    pub scoped: bool,
}

impl std::fmt::Debug for Outlets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outlets")
            .field("children", &self.children)
            .finish_non_exhaustive()
    }
}

/// The writer as a supervised part: runs until every [`Writer`] is dropped.
pub struct WriterPart {
    rx: mpsc::UnboundedReceiver<WriterMsg>,
    outlets: Outlets,
    scope: Scope,
    /// An incarnation ran before: the next one rebuilds its index.
    restarted: bool,
}

impl std::fmt::Debug for WriterPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterPart").finish_non_exhaustive()
    }
}

impl WriterPart {
    pub fn new(inbox: Inbox, outlets: Outlets) -> Self {
        let Inbox(rx) = inbox;
        let scope = Scope(outlets.scoped.then(BTreeSet::new));
        Self {
            rx,
            outlets,
            scope,
            restarted: false,
        }
    }

    fn handle(&mut self, index: &mut Index, msg: WriterMsg) {
        let outlets = &self.outlets;
        match msg {
            WriterMsg::Seen(Seen::Scope(change), at) => {
                for seen in self.scope.change(change, &outlets.stores) {
                    for command in seen.apply(index) {
                        outlets.deliver(command, at);
                    }
                }
            }
            WriterMsg::Seen(seen, at) => {
                let Some(seen) = self.scope.filter(seen) else {
                    return;
                };
                for command in seen.apply(index) {
                    outlets.deliver(command, at);
                }
            }
            WriterMsg::Adopt(host, actor) => {
                self.adopt(index, &host, &actor, tokio::time::Instant::now());
            }
            WriterMsg::Locate { kind, key, reply } => {
                let host = index
                    .host_of(kind, &key)
                    .and_then(|host| outlets.host(host));
                let _ = reply.send(host);
            }
            WriterMsg::AdoptServers => {
                let at = tokio::time::Instant::now();
                let servers: Vec<ObjectKey> = index.servers().cloned().collect();
                debug!(servers = servers.len(), "the root adopts its server actors");
                for key in servers {
                    outlets.deliver(Command::EnsureServer(key), at);
                }
            }
            WriterMsg::Ping(reply) => {
                let _ = reply.send(());
            }
        }
    }

    /// The first incarnation's backlog: the informers' first lists, which waited in the inbox
    /// for the sync gate (`operator.rs`), in whatever order the informers delivered them. A
    /// source listed before its team, or a team before its namespace's labels, would be placed
    /// under the holding host for a moment, and its pass there would write a `Ready=False` that
    /// the next message takes back: on every start of a leader, for objects that are fine
    /// (docs/design.md §5, ADR 0018). So the whole backlog goes into the index first and only
    /// the placement it settles on is delivered: every server actor ensured, and every running
    /// host given the children the index places under it (a server actor adopts its own as it
    /// starts). What arrives after the backlog is handled as it comes.
    fn settle(&mut self, index: &mut Index) {
        let mut rest = vec![];
        let mut settled = 0usize;
        while let Ok(msg) = self.rx.try_recv() {
            match msg {
                WriterMsg::Seen(Seen::Scope(change), _) => {
                    for seen in self.scope.change(change, &self.outlets.stores) {
                        drop(seen.apply(index));
                    }
                }
                WriterMsg::Seen(seen, _) => {
                    if let Some(seen) = self.scope.filter(seen) {
                        drop(seen.apply(index));
                    }
                }
                other => rest.push(other),
            }
            settled += 1;
        }
        let at = tokio::time::Instant::now();
        let adopts_servers = rest.iter().any(|m| matches!(m, WriterMsg::AdoptServers));
        if !adopts_servers {
            let servers: Vec<ObjectKey> = index.servers().cloned().collect();
            for key in servers {
                self.outlets.deliver(Command::EnsureServer(key), at);
            }
        }
        let adopted: BTreeSet<Host> = rest
            .iter()
            .filter_map(|m| match m {
                WriterMsg::Adopt(host, _) => Some(host.clone()),
                _ => None,
            })
            .collect();
        for msg in rest {
            self.handle(index, msg);
        }
        let mut hosts = vec![Host::Holding];
        hosts.extend(
            self.outlets
                .registry
                .iter()
                .map(|r| Host::Server(r.key().clone())),
        );
        for host in hosts.into_iter().filter(|h| !adopted.contains(h)) {
            if let Some(actor) = self.outlets.host(&host) {
                self.adopt(index, &host, &actor, at);
            }
        }
        debug!(
            messages = settled,
            "the informers' first lists settled in the index"
        );
    }

    /// Ensures under `actor` every child the index places under `host`.
    fn adopt(&self, index: &Index, host: &Host, actor: &HostRef, at: tokio::time::Instant) {
        let (teams, sources) = index.children_of(host);
        debug!(
            ?host,
            teams = teams.len(),
            sources = sources.len(),
            "adopting"
        );
        for key in teams {
            self.outlets.ensure_child(ChildKind::Team, key, actor, at);
        }
        for key in sources {
            self.outlets.ensure_child(ChildKind::Source, key, actor, at);
        }
    }

    /// A fresh index from the caches, and every host told what it places there.
    fn rebuild(&mut self, index: &mut Index) {
        let at = tokio::time::Instant::now();
        let everything = everything(&self.outlets.stores);
        let objects = everything.len();
        for seen in everything {
            let Some(seen) = self.scope.filter(seen) else {
                continue;
            };
            for command in seen.apply(index) {
                self.outlets.deliver(command, at);
            }
        }
        self.outlets.root.retain(index.servers().cloned().collect());
        let mut hosts = vec![Host::Holding];
        hosts.extend(
            self.outlets
                .registry
                .iter()
                .map(|r| Host::Server(r.key().clone())),
        );
        for host in hosts {
            let Some(actor) = self.outlets.host(&host) else {
                continue;
            };
            if !self.outlets.children {
                continue;
            }
            let (teams, sources) = index.children_of(&host);
            actor.send(ChildrenMsg::Teams(SupervisorMsg::Retain(
                teams.into_iter().collect(),
            )));
            actor.send(ChildrenMsg::Sources(SupervisorMsg::Retain(
                sources.into_iter().collect(),
            )));
        }
        info!(
            objects,
            "the routing writer restarted: its index rebuilt from the caches"
        );
    }
}

impl Part for WriterPart {
    fn name(&self) -> &str {
        "writer"
    }

    fn run(&mut self) -> Incarnation<'_> {
        Box::pin(async move {
            let mut index = Index::default();
            if std::mem::replace(&mut self.restarted, true) {
                self.rebuild(&mut index);
            } else {
                self.settle(&mut index);
            }
            while let Some(msg) = self.rx.recv().await {
                self.handle(&mut index, msg);
            }
            Ok(())
        })
    }
}

/// Everything the caches hold, as the index takes it, dependencies first (a namespace's
/// labels before its teams, a team before its sources).
fn everything(stores: &Stores) -> Vec<Seen> {
    let mut out: Vec<Seen> = stores
        .namespaces
        .state()
        .iter()
        .map(|ns| Seen::Namespace {
            name: ns.name_any(),
            labels: Some(ns.labels().clone()),
        })
        .collect();
    out.extend(
        (stores.servers.state().iter()).map(|s| Seen::server(ObjectKey::of(s.as_ref()), Some(s))),
    );
    out.extend(
        (stores.teams.state().iter())
            .map(|t| Seen::team(ObjectKey::of(t.as_ref()), Some(t), false)),
    );
    out.extend(
        (stores.sources.state().iter())
            .map(|s| Seen::source(ObjectKey::of(s.as_ref()), Some(s), false)),
    );
    out
}

/// The namespaces this instance reconciles: every one (`None`), or those selected. An object
/// outside is, to the index, an object that does not exist; a namespace entering or leaving
/// the selection replays its objects from the caches as appearing or going.
struct Scope(Option<BTreeSet<String>>);

impl Scope {
    fn contains(&self, namespace: &str) -> bool {
        self.0.as_ref().is_none_or(|s| s.contains(namespace))
    }

    /// `seen` as the index may take it; `None`: nothing to tell it.
    fn filter(&self, seen: Seen) -> Option<Seen> {
        Some(match seen {
            Seen::Server { key, facts } => {
                let facts = facts.filter(|_| self.contains(&key.namespace));
                Seen::Server { key, facts }
            }
            Seen::Team {
                key,
                facts,
                own_version,
            } => Seen::Team {
                facts: facts.filter(|_| self.contains(&key.namespace)),
                key,
                own_version,
            },
            Seen::Source {
                key,
                facts,
                own_version,
            } => Seen::Source {
                facts: facts.filter(|_| self.contains(&key.namespace)),
                key,
                own_version,
            },
            Seen::ServerOwned(key) if !self.contains(&key.namespace) => return None,
            Seen::WebhookSecret { ref source, .. } if !self.contains(&source.namespace) => {
                return None;
            }
            Seen::Listed {
                kind,
                scope,
                mut present,
            } => {
                present.retain(|k| self.contains(&k.namespace));
                Seen::Listed {
                    kind,
                    scope,
                    present,
                }
            }
            other => other,
        })
    }

    /// Applies a change of the selection; returns what the index must hear of it.
    fn change(&mut self, change: ScopeChange, stores: &Stores) -> Vec<Seen> {
        let Some(selected) = self.0.as_mut() else {
            return vec![];
        };
        let (entered, left): (Vec<String>, Vec<String>) = match change {
            ScopeChange::In(ns) => match selected.insert(ns.clone()) {
                true => (vec![ns], vec![]),
                false => (vec![], vec![]),
            },
            ScopeChange::Out(ns) => match selected.remove(&ns) {
                true => (vec![], vec![ns]),
                false => (vec![], vec![]),
            },
            ScopeChange::Listed(now) => {
                let entered = now.difference(selected).cloned().collect();
                let left = selected.difference(&now).cloned().collect();
                *selected = now;
                (entered, left)
            }
        };
        let mut out = vec![];
        for (namespaces, present) in [(entered, true), (left, false)] {
            for ns in namespaces {
                debug!(namespace = %ns, selected = present, "namespace selection changed");
                out.extend(replay(stores, &ns, present));
            }
        }
        out
    }
}

/// Every object of `namespace` in the caches, as appearing (`present`) or going.
fn replay(stores: &Stores, namespace: &str, present: bool) -> Vec<Seen> {
    let here = |ns: Option<&String>| ns.map(String::as_str) == Some(namespace);
    let mut out = vec![];
    for s in stores.servers.state() {
        if here(s.metadata.namespace.as_ref()) {
            out.push(Seen::server(
                ObjectKey::of(s.as_ref()),
                present.then_some(&*s),
            ));
        }
    }
    for t in stores.teams.state() {
        if here(t.metadata.namespace.as_ref()) {
            out.push(Seen::team(
                ObjectKey::of(t.as_ref()),
                present.then_some(&*t),
                false,
            ));
        }
    }
    for s in stores.sources.state() {
        if here(s.metadata.namespace.as_ref()) {
            out.push(Seen::source(
                ObjectKey::of(s.as_ref()),
                present.then_some(&*s),
                false,
            ));
        }
    }
    out
}

impl Outlets {
    fn host(&self, host: &Host) -> Option<HostRef> {
        match host {
            Host::Server(key) => self
                .registry
                .get(key)
                .map(|actor| HostRef::Server(actor.clone())),
            Host::Holding => self.holding.get().map(HostRef::Holding),
        }
    }

    fn deliver(&self, command: Command, at: tokio::time::Instant) {
        match command {
            Command::EnsureServer(key) => {
                if let Some(server) = self.stores.servers.get(&object_ref(&key)) {
                    self.root.ensure(key, server, at);
                }
            }
            Command::RemoveServer(key) => self.root.remove(key),
            Command::Ensure { kind, key, host } => {
                // A server actor not running now (restarting, backing off) adopts the child
                // when it starts.
                if let Some(actor) = self.host(&host) {
                    self.ensure_child(kind, key, &actor, at);
                }
            }
            Command::Remove { kind, key, host } => {
                if self.children
                    && let Some(actor) = self.host(&host)
                {
                    actor.remove(kind, key);
                }
            }
        }
    }

    /// Ensures the child under `actor`, with its spec from the cache (an object the cache
    /// does not have is gone or not listed yet: its own event follows).
    fn ensure_child(
        &self,
        kind: ChildKind,
        key: ObjectKey,
        actor: &HostRef,
        at: tokio::time::Instant,
    ) {
        if !self.children {
            return;
        }
        let msg = match kind {
            ChildKind::Team => match self.stores.teams.get(&object_ref(&key)) {
                Some(team) => {
                    ChildrenMsg::Teams(SupervisorMsg::EnsureAt(key, TeamSpec::new(&team), at))
                }
                None => return,
            },
            ChildKind::Source => match self.stores.sources.get(&object_ref(&key)) {
                Some(source) => {
                    ChildrenMsg::Sources(SupervisorMsg::EnsureAt(key, SourceSpec::new(&source), at))
                }
                None => return,
            },
        };
        actor.send(msg);
    }
}

fn object_ref<K: kube::Resource<DynamicType = ()>>(key: &ObjectKey) -> ObjectRef<K> {
    ObjectRef::new(&key.name).within(&key.namespace)
}

#[cfg(test)]
#[path = "writer_tests.rs"]
mod tests;
