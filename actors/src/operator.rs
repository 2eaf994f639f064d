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
//!
//! Every long-lived part (the root, the holding host, the writer, each watch, the census) is
//! supervised (`supervisor/part.rs`): restarted with backoff when it panics or ends, dead for
//! good past its restart limit ([`RunningOperator::failed`]); the stall watchdog asks the
//! root, the holding host and the writer a question every few seconds. `/healthz` reports
//! both (docs/adr/0017-liveness.md).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry as MetricsRegistry;
use ractor::ActorRef;
use terdut_crds::v1alpha1::{TerdutServer, TerdutTeam};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::api::ApiMetrics;
use crate::clock::Clock;
use crate::context::{Ctx, Inner, OperatorConfig, OwnWrites};
use crate::informers::{self, Selectors};
use crate::key::ObjectKey;
use crate::kube_clients::KubeClients;
use crate::object_actor::{SourceFactory, TeamFactory};
use crate::routing::ChildKind;
use crate::runtime::events::EventPublisher;
use crate::runtime::faults::{FaultPoint, Faults};
use crate::runtime::health::Health;
use crate::runtime::metrics::OperatorMetrics;
use crate::runtime::watchdog::{self, Probe};
use crate::supervisor::actor_part::{ActorPart, ActorSpec, Current};
use crate::supervisor::part::{PartEnv, TaskPart, supervise};
use crate::supervisor::{
    ChildSnapshot, KeyedSupervisor, RestartPolicy, SupervisorConfig, SupervisorMetrics,
    SupervisorMsg,
};
use crate::tree::ChildrenMsg;
use crate::tree::children::ChildSetup;
use crate::tree::holding::HoldingActor;
use crate::tree::server::{ServerFactory, ServerSpec};
use crate::tree::writer::{HostRef, Outlets, Registry, ServerRoot, Writer, WriterPart};

/// Knobs of [`start`] beyond [`OperatorConfig`].
#[derive(Clone, Debug)]
pub struct StartOptions {
    pub config: OperatorConfig,
    pub restart_policy: RestartPolicy,
    pub clock: Arc<dyn Clock>,
    /// `reportingInstance` of Events (the pod name in cluster).
    pub instance: String,
    /// What `/healthz` reports; shared with the HTTP server, which a standby serves too.
    pub health: Health,
    /// The test hooks (inert unless the operator runs with `--test-hooks`).
    pub faults: Faults,
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
    health: Health,
    faults: Faults,
    /// Cancelled by [`RunningOperator::stop`]: every part stops, none restarts.
    stop: CancellationToken,
    /// The parts' supervisors and the watchdog.
    parts: Vec<JoinHandle<()>>,
    synced: tokio::sync::watch::Receiver<usize>,
    expected: usize,
}

/// The root supervisor's running incarnation.
type RootRef = ActorRef<SupervisorMsg<ServerFactory>>;

/// A handle on the supervision tree, for tests, tools and the benchmark; cheap to clone.
#[derive(Clone, Debug)]
pub struct Tree {
    servers: Current<Option<RootRef>>,
    holding: Current<Option<ActorRef<ChildrenMsg>>>,
    /// The running server actors, for anything outside the tree (the benchmark's baselines).
    pub registry: Registry,
    writer: Writer,
}

impl Tree {
    /// The root: one actor per TerdutServer (its running incarnation; the operator restarts it
    /// if it fails).
    ///
    /// # Panics
    /// Never once [`start`] returned: it waits for the first incarnation.
    pub fn servers(&self) -> RootRef {
        self.servers
            .get()
            .expect("the root started before start() returned")
    }

    /// The host of the teams and alert sources no server takes yet (its running incarnation).
    ///
    /// # Panics
    /// Never once [`start`] returned: it waits for the first incarnation.
    pub fn holding(&self) -> ActorRef<ChildrenMsg> {
        self.holding
            .get()
            .expect("the holding host started before start() returned")
    }

    /// Every host: the running server actors and the holding host.
    pub fn hosts(&self) -> Vec<HostRef> {
        let mut hosts: Vec<HostRef> = self
            .registry
            .iter()
            .map(|r| HostRef::Server(r.value().clone()))
            .collect();
        hosts.push(HostRef::Holding(self.holding()));
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

    /// What `/healthz` reports for this operator's parts.
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// The test hooks (inert unless started with them).
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// Resolves, saying which, once a part failed for good (past its restart limit): the
    /// operator cannot reconcile any more and should stop, so that its pod restarts.
    pub async fn failed(&self) -> String {
        self.health.dead().await
    }

    /// Stops every part: the watches, the writer and the census at once, the tree with its
    /// children finishing their current message.
    pub async fn stop(self) {
        // Give up the claim first, so that an instance with an overlapping selector can take
        // over at once (ADR 0014), then stop every part.
        self.ctx
            .claims
            .release(&self.ctx.kube, &self.ctx.config.operator_namespace)
            .await;
        self.stop.cancel();
        for h in self.parts {
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

/// The root supervisor, as the writer sends to it: its running incarnation. One that is
/// restarting misses nothing: the next asks for every server (`Writer::adopt_servers`).
struct Root(Current<Option<RootRef>>);

impl Root {
    fn cast(&self, msg: SupervisorMsg<ServerFactory>) {
        if let Some(root) = self.0.get() {
            let _ = root.cast(msg);
        }
    }
}

impl ServerRoot for Root {
    fn ensure(&self, key: ObjectKey, server: Arc<TerdutServer>, at: tokio::time::Instant) {
        self.cast(SupervisorMsg::EnsureAt(key, ServerSpec(server), at));
    }

    fn remove(&self, key: ObjectKey) {
        self.cast(SupervisorMsg::Remove(key));
    }

    fn retain(&self, keep: BTreeSet<ObjectKey>) {
        self.cast(SupervisorMsg::Retain(keep));
    }
}

/// Each incarnation of the root supervisor.
struct RootSpec {
    factory: ServerFactory,
    config: SupervisorConfig,
    current: Current<Option<RootRef>>,
    fault: FaultPoint,
}

impl ActorSpec for RootSpec {
    type Actor = KeyedSupervisor<ServerFactory>;

    fn build(&mut self) -> Self::Actor {
        // A failed incarnation's server actors died with it, unannounced (ractor kills the
        // children of a failed actor, without their `post_stop`).
        self.factory.registry.clear();
        KeyedSupervisor::new(self.factory.clone(), self.config.clone())
            .with_fault_point(self.fault.clone())
    }

    fn started(&mut self, actor: &RootRef) {
        self.current.set(Some(actor.clone()));
        // After it is published: whatever the writer sends from here on reaches it.
        self.factory.writer.adopt_servers();
    }

    fn poke(&self, actor: &RootRef) {
        let _ = actor.cast(SupervisorMsg::Wake);
    }
}

/// Each incarnation of the holding host.
struct HoldingSpec {
    setup: ChildSetup,
    writer: Writer,
    current: Current<Option<ActorRef<ChildrenMsg>>>,
    fault: FaultPoint,
}

impl ActorSpec for HoldingSpec {
    type Actor = HoldingActor;

    fn build(&mut self) -> HoldingActor {
        HoldingActor {
            setup: self.setup.clone(),
            writer: self.writer.clone(),
            current: self.current.clone(),
            fault: self.fault.clone(),
        }
    }

    /// It publishes itself in `pre_start`, before it asks for its children.
    fn started(&mut self, _: &ActorRef<ChildrenMsg>) {}

    fn poke(&self, actor: &ActorRef<ChildrenMsg>) {
        let _ = actor.cast(ChildrenMsg::Teams(SupervisorMsg::Wake));
    }
}

/// The watchdog's question to a host actor, through its mailbox.
fn ping<M: ractor::Message>(
    current: &Current<Option<ActorRef<M>>>,
    wrap: fn(ractor::RpcReplyPort<()>) -> M,
) -> Option<oneshot::Receiver<()>> {
    let actor = current.get()?;
    let (tx, rx) = oneshot::channel();
    actor.cast(wrap(tx.into())).ok()?;
    Some(rx)
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
    let selectors = Selectors {
        objects: opts.config.selector.clone(),
        namespaces: opts.config.watch_namespace_selector.clone(),
    };
    refuse_bad_selectors(&watch, &opts.config.watch_namespaces, &selectors).await?;
    let sink: informers::Sink = {
        let writer = writer.clone();
        Arc::new(move |seen| writer.seen(seen))
    };
    let informers = informers::build(
        &watch,
        &opts.config.watch_namespaces,
        &selectors,
        &own_writes,
        sink,
    );
    let records = Arc::new(crate::team::records::TeamRecords::new(
        client.clone(),
        &opts.config.operator_namespace,
    ));
    // Overlapping shards (routing::claims): this instance's claim first, so no pass runs
    // before it knows the others'.
    let claims = Arc::new(crate::routing::claims::Claims::new(
        &opts.config.instance_name,
        opts.config.scope(),
    ));
    if let Err(e) = claims
        .refresh(&client, &opts.config.operator_namespace)
        .await
    {
        tracing::warn!(error = %e, "could not write the instance claim or read the others");
    }
    let ctx = Ctx::new(Inner {
        records,
        claims: claims.clone(),
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
    let stop = CancellationToken::new();
    let env = PartEnv {
        policy: opts.restart_policy.clone(),
        clock: opts.clock.clone(),
        health: opts.health.clone(),
        faults: opts.faults.clone(),
        stop: stop.clone(),
    };
    let (servers, holding) = (Current::new(None), Current::new(None));
    let root = RootSpec {
        factory: ServerFactory {
            setup: setup.clone(),
            writer: writer.clone(),
            registry: registry.clone(),
        },
        // Server actors never passivate, so none would give a place in the wake budget
        // back before its backstop: their table has none (ADR 0011).
        config: SupervisorConfig {
            wake_budget: usize::MAX,
            ..config.clone()
        },
        current: servers.clone(),
        fault: opts.faults.point("root"),
    };
    let hold = HoldingSpec {
        setup,
        writer: writer.clone(),
        current: holding.clone(),
        fault: opts.faults.point("holding"),
    };
    let shutdown = config.shutdown_timeout;
    let mut parts = vec![
        tokio::spawn(supervise(
            ActorPart::new("root", root, opts.faults.clone(), shutdown),
            env.clone(),
        )),
        tokio::spawn(supervise(
            ActorPart::new("holding", hold, opts.faults.clone(), shutdown),
            env.clone(),
        )),
    ];
    // The hosts first, so the writer's first commands reach them.
    tokio::select! {
        () = async {
            servers.wait_for(Option::is_some).await;
            holding.wait_for(Option::is_some).await;
        } => {}
        dead = opts.health.dead() => anyhow::bail!("the operator could not start: {dead}"),
    }
    let writer_part = WriterPart::new(
        inbox,
        Outlets {
            root: Box::new(Root(servers.clone())),
            holding: holding.clone(),
            registry: registry.clone(),
            stores: informers.stores.clone(),
            children: children == ChildRuntime::Actors,
            scoped: selectors.namespaces.is_some(),
        },
    );
    // Routing starts once every informer has listed, as controller-runtime starts its
    // workers after WaitForCacheSync; events wait in the writer's inbox meanwhile. A pass
    // before that judges from partial caches (a source's team not listed yet, a namespace's
    // labels unknown) and writes a Ready=False that a moment later is taken back: on every
    // start of a leader, for every object (docs/upgrade.md, ADR 0018). The watchdog starts
    // with the writer: before the gate opens, an unanswered ping is no stall.
    let gate = futures::FutureExt::shared(sync_gate(informers.synced.clone(), informers.expected));
    parts.push(tokio::spawn({
        let (gate, env, stop) = (gate.clone(), env.clone(), stop.clone());
        async move {
            tokio::select! {
                () = gate => supervise(writer_part, env).await,
                () = stop.cancelled() => {}
            }
        }
    }));
    // The objects gauge, from the caches this leader fills (docs/observability.md).
    let census_ctx = ctx.clone();
    parts.push(tokio::spawn(supervise(
        TaskPart {
            name: "census".into(),
            start: move || -> futures::future::BoxFuture<'static, ()> {
                Box::pin(crate::census::run(census_ctx.clone()))
            },
        },
        env.clone(),
    )));
    for watch in informers.tasks {
        parts.push(tokio::spawn(supervise(watch, env.clone())));
    }
    let probes = vec![
        Probe {
            part: "root".into(),
            ask: Box::new({
                let servers = servers.clone();
                move || ping(&servers, SupervisorMsg::Ping)
            }),
        },
        Probe {
            part: "holding".into(),
            ask: Box::new({
                let holding = holding.clone();
                move || {
                    ping(&holding, |reply| {
                        ChildrenMsg::Teams(SupervisorMsg::Ping(reply))
                    })
                }
            }),
        },
        Probe {
            part: "writer".into(),
            ask: Box::new({
                let writer = writer.clone();
                move || writer.ping()
            }),
        },
    ];
    parts.push(tokio::spawn({
        let (health, stall_after, stop) =
            (opts.health.clone(), opts.config.stall_after, stop.clone());
        async move {
            tokio::select! {
                () = gate => watchdog::run(probes, health, stall_after, stop).await,
                () = stop.cancelled() => {}
            }
        }
    }));
    let claims_kube = ctx.kube.clone();
    let claims_namespace = ctx.config.operator_namespace.clone();
    parts.push(tokio::spawn(supervise(
        TaskPart {
            name: "claims".into(),
            start: move || -> futures::future::BoxFuture<'static, ()> {
                Box::pin(crate::routing::claims::run(
                    claims.clone(),
                    claims_kube.clone(),
                    claims_namespace.clone(),
                ))
            },
        },
        env.clone(),
    )));
    info!("operator started");
    Ok(RunningOperator {
        ctx,
        tree: Tree {
            servers,
            holding,
            registry,
            writer,
        },
        health: opts.health,
        faults: opts.faults,
        stop,
        parts,
        synced: informers.synced,
        expected: informers.expected,
    })
}
