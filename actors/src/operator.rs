//! Wiring: informers -> routing index (the writer) -> the supervision tree.
//!
//! ```text
//!  watchers/reflectors ──what they saw──▶ writer (routing index) ──commands──▶ the tree:
//!        │ caches (Stores)        Root ── ServerActor (per TerdutServer) ── its teams, sources
//!        │                             └─ HoldingActor ── teams and sources no server takes yet
//!        └──────────────────── read by every actor ◀──── Ctx (shared)
//! ```
//!
//! Everything is built before any watch starts, so no event can arrive before its route.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry as MetricsRegistry;
use ractor::{Actor, ActorRef};
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutServer, TerdutTeam};
use tokio::task::JoinHandle;
use tracing::info;

use crate::api::ApiMetrics;
use crate::clock::Clock;
use crate::context::{Ctx, Inner, OperatorConfig, OwnWrites};
use crate::informers::{self, Routes, ScopeChange, Selectors};
use crate::key::ObjectKey;
use crate::kind::{Kind, Written};
use crate::kube_clients::KubeClients;
use crate::object_actor::{SourceFactory, TeamFactory};
use crate::routing::facts::{server_facts, source_facts, team_facts};
use crate::routing::{ChildKind, Listed};
use crate::runtime::events::EventPublisher;
use crate::runtime::metrics::OperatorMetrics;
use crate::supervisor::{
    ChildSnapshot, KeyedSupervisor, RestartPolicy, SupervisorConfig, SupervisorMetrics,
    SupervisorMsg,
};
use crate::tree::ChildrenMsg;
use crate::tree::children::ChildSetup;
use crate::tree::holding::HoldingActor;
use crate::tree::server::{ServerFactory, ServerSpec};
use crate::tree::writer::{self, HostRef, Outlets, Registry, Seen, ServerRoot, Writer};

/// Knobs of [`start`] beyond [`OperatorConfig`].
#[derive(Clone, Debug)]
pub struct StartOptions {
    pub config: OperatorConfig,
    pub restart_policy: RestartPolicy,
    pub clock: Arc<dyn Clock>,
    /// `reportingInstance` of Events (the pod name in cluster).
    pub instance: String,
}

/// What reconciles TerdutTeams and TerdutAlertSources. TerdutServers are always reconciled by
/// their actors, which also answer the children's credentials and consent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ChildRuntime {
    /// One actor per object under its host (the operator).
    #[default]
    Actors,
    /// Something else drives the team and source pipelines (the bench's kube-runtime
    /// `Controller` baselines, through `pipeline::Driver`): the hosts are started but get no
    /// child.
    External,
}

/// A running operator. Dropping it does not stop it; call [`RunningOperator::stop`].
#[derive(Debug)]
pub struct RunningOperator {
    pub ctx: Ctx,
    pub tree: Tree,
    tasks: Vec<JoinHandle<()>>,
    supervisor_handles: Vec<JoinHandle<()>>,
    synced: tokio::sync::watch::Receiver<usize>,
    expected: usize,
}

/// A handle on the supervision tree, for tests, tools and the benchmark; cheap to clone.
#[derive(Clone, Debug)]
pub struct Tree {
    /// The root: one actor per TerdutServer.
    pub servers: ActorRef<SupervisorMsg<ServerFactory>>,
    /// The teams and alert sources no server takes yet.
    pub holding: ActorRef<ChildrenMsg>,
    /// The running server actors, for anything outside the tree (the benchmark's baselines).
    pub registry: Registry,
    writer: Writer,
}

impl Tree {
    /// Every host: the running server actors and the holding host.
    pub fn hosts(&self) -> Vec<HostRef> {
        let mut hosts: Vec<HostRef> = self
            .registry
            .iter()
            .map(|r| HostRef::Server(r.value().clone()))
            .collect();
        hosts.push(HostRef::Holding(self.holding.clone()));
        hosts
    }

    /// The host the actor of team or alert source `key` lives under, if the object is known.
    pub async fn host_of(&self, kind: ChildKind, key: &ObjectKey) -> Option<HostRef> {
        self.writer.locate(kind, key.clone()).await
    }

    /// What the host of `key` knows of its actor (restarts, status), if it has one.
    pub async fn child(&self, kind: ChildKind, key: &ObjectKey) -> Option<ChildSnapshot> {
        let host = self.host_of(kind, key).await?;
        let snapshot = host.snapshot(kind, Duration::from_secs(5)).await.ok()?;
        snapshot.children.get(key).cloned()
    }

    /// Stops the actor of `key` and forgets it, as an operator restart would: the next event
    /// of the object starts a fresh one.
    pub async fn forget(&self, kind: ChildKind, key: &ObjectKey) {
        if let Some(host) = self.host_of(kind, key).await {
            host.remove(kind, key.clone());
        }
    }
}

impl RunningOperator {
    /// Waits until every informer has listed once.
    pub async fn wait_synced(&mut self) {
        let expected = self.expected;
        let _ = self.synced.wait_for(|n| *n >= expected).await;
    }

    /// Stops the watches, then the tree (children finish their current message).
    pub async fn stop(self) {
        for t in &self.tasks {
            t.abort();
        }
        self.tree.holding.stop(Some("operator stopping".into()));
        self.tree.servers.stop(Some("operator stopping".into()));
        for h in self.supervisor_handles {
            let _ = tokio::time::timeout(Duration::from_secs(30), h).await;
        }
    }
}

/// How long routing waits for the informers' first lists: a watch refused for good (a
/// namespace the RBAC does not cover) must not keep every other object from reconciling.
const SYNC_GATE: Duration = Duration::from_secs(60);

async fn sync_gate(mut synced: tokio::sync::watch::Receiver<usize>, expected: usize) {
    let listed = synced.wait_for(|n| *n >= expected);
    if tokio::time::timeout(SYNC_GATE, listed).await.is_err() {
        tracing::warn!(
            waited = ?SYNC_GATE,
            "not every informer has listed yet; reconciling from the caches as they are"
        );
    }
}

/// Aborts the task when dropped (the writer goes with the task that runs it).
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Turns what the informers saw into what the routing index takes: the few facts routing
/// reads of each object, and whether a version is the operator's own write.
struct Translate {
    writer: Writer,
    own_writes: Arc<OwnWrites>,
}

impl Translate {
    fn own(&self, kind: Written, key: &ObjectKey, resource_version: Option<&str>) -> bool {
        resource_version.is_some_and(|rv| self.own_writes.is_own(kind, key, rv))
    }
}

impl Routes for Translate {
    fn server(&self, key: ObjectKey, obj: Option<Arc<TerdutServer>>) {
        let facts = obj.as_deref().map(server_facts);
        self.writer.seen(Seen::Server { key, facts });
    }

    fn server_owned(&self, server: ObjectKey) {
        self.writer.seen(Seen::ServerOwned(server));
    }

    fn team(&self, key: ObjectKey, obj: Option<Arc<TerdutTeam>>) {
        let kind = Written::Object(Kind::Team);
        let facts = obj.as_deref().map(team_facts);
        let own_version = self.own(
            kind,
            &key,
            facts.as_ref().and_then(|f| f.resource_version.as_deref()),
        );
        if facts.is_none() {
            self.own_writes.forget(kind, &key);
        }
        self.writer.seen(Seen::Team {
            key,
            facts,
            own_version,
        });
    }

    fn source(&self, key: ObjectKey, obj: Option<Arc<TerdutAlertSource>>) {
        let kind = Written::Object(Kind::Source);
        let facts = obj.as_deref().map(source_facts);
        let own_version = self.own(
            kind,
            &key,
            facts.as_ref().and_then(|f| f.resource_version.as_deref()),
        );
        if facts.is_none() {
            self.own_writes.forget(kind, &key);
        }
        self.writer.seen(Seen::Source {
            key,
            facts,
            own_version,
        });
    }

    fn webhook_secret(
        &self,
        secret: ObjectKey,
        resource_version: Option<String>,
        deleted: bool,
        source: ObjectKey,
    ) {
        let own_version =
            !deleted && self.own(Written::WebhookSecret, &secret, resource_version.as_deref());
        if deleted {
            self.own_writes.forget(Written::WebhookSecret, &secret);
        }
        self.writer.seen(Seen::WebhookSecret {
            secret,
            source,
            resource_version,
            deleted,
            own_version,
        });
    }

    fn namespace(&self, name: String, labels: Option<BTreeMap<String, String>>) {
        self.writer.seen(Seen::Namespace { name, labels });
    }

    fn listed(&self, kind: Listed, scope: Option<String>, present: BTreeSet<ObjectKey>) {
        self.writer.seen(Seen::Listed {
            kind,
            scope,
            present,
        });
    }

    fn scope(&self, change: ScopeChange) {
        self.writer.seen(Seen::Scope(change));
    }
}

/// The root supervisor, as the writer sends to it.
struct Root(ActorRef<SupervisorMsg<ServerFactory>>);

impl ServerRoot for Root {
    fn ensure(&self, key: ObjectKey, server: Arc<TerdutServer>, at: tokio::time::Instant) {
        let _ = self
            .0
            .cast(SupervisorMsg::EnsureAt(key, ServerSpec(server), at));
    }

    fn remove(&self, key: ObjectKey) {
        let _ = self.0.cast(SupervisorMsg::Remove(key));
    }
}

/// Every metric family of the operator, registered before the HTTP server shares the
/// registry (a standby replica serves the same families, at zero).
#[derive(Clone, Debug)]
pub struct Metrics {
    pub operator: OperatorMetrics,
    pub api: ApiMetrics,
    pub supervisor: SupervisorMetrics,
}

impl Metrics {
    pub fn register(registry: &mut MetricsRegistry) -> Self {
        Self {
            operator: OperatorMetrics::register(registry),
            api: ApiMetrics::register(registry),
            supervisor: SupervisorMetrics::register(registry),
        }
    }
}

/// A selector the API server refuses would make every watch retry forever: ask it once, with
/// a one-item list, and refuse to start with its answer.
async fn refuse_bad_selectors(
    client: &kube::Client,
    namespaces: &[String],
    selectors: &Selectors,
) -> anyhow::Result<()> {
    use kube::api::{Api, ListParams};
    if let Some(s) = &selectors.objects {
        // Where the operator may list: one of its namespaces when it watches a list of them.
        let teams: Api<TerdutTeam> = match namespaces.first() {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        teams
            .list_metadata(&ListParams::default().labels(s).limit(1))
            .await
            .map_err(|e| anyhow::anyhow!("--selector {s:?} is refused by the API server: {e}"))?;
    }
    if let Some(s) = &selectors.namespaces {
        Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
            .list_metadata(&ListParams::default().labels(s).limit(1))
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "--watch-namespace-selector {s:?} is refused by the API server: {e}"
                )
            })?;
    }
    Ok(())
}

/// Starts the operator: informers, writer, tree.
pub async fn start(
    clients: KubeClients,
    metrics: Metrics,
    opts: StartOptions,
) -> anyhow::Result<RunningOperator> {
    start_with(clients, metrics, opts, ChildRuntime::Actors).await
}

/// [`start`], with TerdutTeams and TerdutAlertSources reconciled by `children`.
pub async fn start_with(
    clients: KubeClients,
    metrics: Metrics,
    opts: StartOptions,
    children: ChildRuntime,
) -> anyhow::Result<RunningOperator> {
    // Refused before anything starts: a bad URL template would send keys to the wrong host.
    opts.config.validate()?;
    let Metrics {
        operator: metrics,
        api: api_metrics,
        supervisor: sup_metrics,
    } = metrics;
    let KubeClients {
        watch,
        reconcile: client,
    } = clients;
    let events = EventPublisher::new(client.clone(), "terdut-operator", &opts.instance)
        .with_failure_counter(metrics.event_failures());

    let (writer, inbox) = Writer::channel();
    let own_writes = Arc::new(OwnWrites::default());
    let routes = Arc::new(Translate {
        writer: writer.clone(),
        own_writes: own_writes.clone(),
    });
    let selectors = Selectors {
        objects: opts.config.selector.clone(),
        namespaces: opts.config.watch_namespace_selector.clone(),
    };
    refuse_bad_selectors(&watch, &opts.config.watch_namespaces, &selectors).await?;
    let informers = informers::build(&watch, &opts.config.watch_namespaces, &selectors, routes);
    let ctx = Ctx::new(Inner {
        kube: client,
        stores: informers.stores.clone(),
        events,
        metrics,
        api_metrics,
        clock: opts.clock.clone(),
        config: opts.config.clone(),
        own_writes,
    });

    let config = SupervisorConfig {
        policy: opts.restart_policy.clone(),
        clock: opts.clock.clone(),
        metrics: sup_metrics.clone(),
        jitter_seed: None,
        shutdown_timeout: Duration::from_secs(20),
        wake_budget: opts.config.wake_budget,
        ..SupervisorConfig::default()
    };
    let setup = ChildSetup {
        ctx: ctx.clone(),
        team_passes: TeamFactory::pass_limit(&ctx),
        source_passes: SourceFactory::pass_limit(&ctx),
        config: config.clone(),
    };
    let registry = Registry::default();
    let (servers, server_handle) = Actor::spawn(
        None,
        KeyedSupervisor::new(
            ServerFactory {
                setup: setup.clone(),
                writer: writer.clone(),
                registry: registry.clone(),
            },
            // Server actors never passivate, so none would give a place in the wake budget
            // back before its backstop: their table has none (ADR 0011).
            SupervisorConfig {
                wake_budget: usize::MAX,
                ..config
            },
        ),
        (),
    )
    .await?;
    let (holding, holding_handle) = Actor::spawn(
        None,
        HoldingActor {
            setup,
            writer: writer.clone(),
        },
        (),
    )
    .await?;
    let outlets = Outlets {
        root: Box::new(Root(servers.clone())),
        holding: holding.clone(),
        registry: registry.clone(),
        stores: informers.stores.clone(),
        children: children == ChildRuntime::Actors,
        scoped: selectors.namespaces.is_some(),
    };
    // Routing starts once every informer has listed, as controller-runtime starts its
    // workers after WaitForCacheSync; events wait in the writer's inbox meanwhile. A pass
    // before that judges from partial caches (a source's team not listed yet, a namespace's
    // labels unknown) and writes a Ready=False that a moment later is taken back: on every
    // start of a leader, for every object (docs/upgrade.md).
    let gate = sync_gate(informers.synced.clone(), informers.expected);
    let writer_task = tokio::spawn(async move {
        gate.await;
        let mut writer = AbortOnDrop(writer::spawn(inbox, outlets));
        let _ = (&mut writer.0).await;
    });

    let mut tasks: Vec<JoinHandle<()>> = informers.tasks.into_iter().map(tokio::spawn).collect();
    tasks.push(writer_task);
    // The objects gauge, from the caches this leader fills (docs/observability.md).
    tasks.push(tokio::spawn(crate::census::run(ctx.clone())));
    info!("operator started");
    Ok(RunningOperator {
        ctx,
        tree: Tree {
            servers,
            holding,
            registry,
            writer,
        },
        tasks,
        supervisor_handles: vec![server_handle, holding_handle],
        synced: informers.synced,
        expected: informers.expected,
    })
}
