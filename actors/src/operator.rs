//! Wiring: informers -> routes -> keyed supervisors -> per-object actors.
//!
//! ```text
//!  watchers/reflectors ──events──▶ OperatorRoutes ──Ensure/Remove──▶ KeyedSupervisor<ServerFactory>
//!        │ caches (Stores)                                            └─ ServerActor (ns/name) ...
//!        └──────────────────────────── read by every actor ◀──────────── Ctx (shared)
//! ```
//!
//! Everything is built before any watch starts, so no event can arrive before its route.

use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use dashmap::DashMap;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use prometheus_client::registry::Registry;
use ractor::{Actor, ActorRef};
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutServer, TerdutTeam};
use tokio::task::JoinHandle;
use tracing::{debug, info};

use crate::api::ApiMetrics;
use crate::clock::Clock;
use crate::context::{Ctx, Inner, OperatorConfig, ServerEvents};
use crate::informers::{self, Routes};
use crate::key::ObjectKey;
use crate::kind::{Kind, Written};
use crate::kube_clients::KubeClients;
use crate::object_actor::{SourceFactory, SourceSpec, TeamFactory, TeamSpec};
use crate::runtime::events::EventPublisher;
use crate::runtime::metrics::OperatorMetrics;
use crate::server::observe::team_server_key;
use crate::stores::NamespacedStores;
use crate::supervisor::{
    ChildFactory, KeyedSupervisor, RestartPolicy, SupervisorConfig, SupervisorMetrics,
    SupervisorMsg, snapshot,
};
use crate::tree::server::{ServerFactory, ServerSpec};

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
    /// One actor per object under a keyed supervisor (the operator).
    #[default]
    Actors,
    /// Something else drives `team::reconcile::TeamReconciler` and
    /// `source::reconcile::SourceReconciler` (the bench's kube-runtime `Controller` baselines):
    /// the team and source supervisors are started but get no object.
    External,
}

/// A running operator. Dropping it does not stop it; call [`RunningOperator::stop`].
#[derive(Debug)]
pub struct RunningOperator {
    pub ctx: Ctx,
    pub servers: ActorRef<SupervisorMsg<ServerFactory>>,
    pub sources: ActorRef<SupervisorMsg<SourceFactory>>,
    pub teams: ActorRef<SupervisorMsg<TeamFactory>>,
    tasks: Vec<JoinHandle<()>>,
    supervisor_handles: Vec<JoinHandle<()>>,
    synced: tokio::sync::watch::Receiver<usize>,
    expected: usize,
}

impl RunningOperator {
    /// Waits until every informer has listed once.
    pub async fn wait_synced(&mut self) {
        let expected = self.expected;
        let _ = self.synced.wait_for(|n| *n >= expected).await;
    }

    /// Stops the watches, then the supervisors (children finish their current message).
    pub async fn stop(self) {
        for t in &self.tasks {
            t.abort();
        }
        self.servers.stop(Some("operator stopping".into()));
        self.sources.stop(Some("operator stopping".into()));
        self.teams.stop(Some("operator stopping".into()));
        for h in self.supervisor_handles {
            let _ = tokio::time::timeout(Duration::from_secs(30), h).await;
        }
    }
}

/// The parts of a TerdutTeam its server and its alert sources depend on, and the version they
/// were last seen at.
#[derive(Clone, Debug, PartialEq)]
struct TeamSeen {
    server: ObjectKey,
    ready: bool,
    team_id: Option<i64>,
    deleting: bool,
    resource_version: Option<String>,
}

impl TeamSeen {
    fn of(team: &TerdutTeam) -> Self {
        let status = team.status.as_ref();
        Self {
            server: team_server_key(team),
            ready: status
                .is_some_and(|s| terdut_crds::v1alpha1::conditions::is_ready(&s.conditions)),
            team_id: status.and_then(|s| s.team_id),
            deleting: team.metadata.deletion_timestamp.is_some(),
            resource_version: team.resource_version(),
        }
    }

    /// What an alert source gates on (DESIGN §5: it requires its team Ready, with an id).
    fn gate(&self) -> (bool, Option<i64>, bool) {
        (self.ready, self.team_id, self.deleting)
    }
}

struct OperatorRoutes {
    servers: OnceLock<ActorRef<SupervisorMsg<ServerFactory>>>,
    sources: OnceLock<ActorRef<SupervisorMsg<SourceFactory>>>,
    teams: OnceLock<ActorRef<SupervisorMsg<TeamFactory>>>,
    /// What the dependants of each team last saw of it (see `team_changed`); also how a
    /// deleted team, whose object the route does not get, still nudges its server.
    team_seen: DashMap<ObjectKey, TeamSeen>,
    /// What the teams of each TerdutServer last saw of it (see `server_changed`).
    server_seen: DashMap<ObjectKey, ServerSeen>,
    /// The resourceVersion each alert source was last seen at.
    source_seen: DashMap<ObjectKey, Option<String>>,
    /// The resourceVersion each webhook Secret was last seen at.
    secret_seen: DashMap<ObjectKey, Option<String>>,
    /// When each server's data-lost fan-out last ran (see `data_lost`).
    data_lost_at: DashMap<ObjectKey, tokio::time::Instant>,
    ctx: OnceLock<Ctx>,
}

/// The parts of a TerdutServer its teams read: it exists (with this uid), its spec (consent,
/// port: the generation), whether it is being deleted. Its credentials reach the teams through
/// `Ctx::on_credentials` instead.
#[derive(Clone, Debug, PartialEq)]
struct ServerSeen {
    uid: Option<String>,
    generation: Option<i64>,
    deleting: bool,
}

impl ServerSeen {
    fn of(server: &TerdutServer) -> Self {
        Self {
            uid: server.metadata.uid.clone(),
            generation: server.metadata.generation,
            deleting: server.metadata.deletion_timestamp.is_some(),
        }
    }
}

/// Whether a watch event of `kind` `key` at `now` is only the operator's own write landing: a
/// new version (not the one `before`, which a dependency's re-nudge carries again) that one of
/// its own status or finalizer writes produced. That pass already ran on everything else, so
/// the object needs no new pass for it; a write by anyone else still nudges (issue 8).
fn own_write(
    ctx: Option<&Ctx>,
    kind: Written,
    key: &ObjectKey,
    before: Option<&str>,
    now: Option<&str>,
) -> bool {
    match (ctx, now) {
        (Some(ctx), Some(now)) => before != Some(now) && ctx.own_writes.is_own(kind, key, now),
        _ => false,
    }
}

impl Routes for OperatorRoutes {
    fn server_changed(&self, key: ObjectKey, obj: Option<Arc<TerdutServer>>) {
        let (Some(servers), Some(ctx)) = (self.servers.get(), self.ctx.get()) else {
            return;
        };
        let now = obj.as_deref().map(ServerSeen::of);
        let msg = match obj {
            Some(o) => SupervisorMsg::Ensure(key.clone(), ServerSpec(o)),
            None => SupervisorMsg::Remove(key.clone()),
        };
        let _ = servers.cast(msg);
        // DESIGN §5: a TerdutTeam re-reconciles when its TerdutServer changes, in what a team
        // reads of it. Most server events are its own status writes and its Deployment's status
        // (kube-controller-manager); re-running every team on each of them multiplied the
        // passes (docs/performance.md).
        let before = match &now {
            Some(seen) => self.server_seen.insert(key.clone(), seen.clone()),
            None => self.server_seen.remove(&key).map(|(_, seen)| seen),
        };
        if before.is_some() && before == now {
            return;
        }
        self.nudge_teams_of(ctx, &key);
    }

    fn team_changed(&self, key: ObjectKey, obj: Option<Arc<TerdutTeam>>) {
        debug!(team = %key, "team changed");
        let now = obj.as_deref().map(TeamSeen::of);
        let before = match &now {
            Some(seen) => self.team_seen.insert(key.clone(), seen.clone()),
            None => self.team_seen.remove(&key).map(|(_, seen)| seen),
        };
        let own = own_write(
            self.ctx.get(),
            Written::Object(Kind::Team),
            &key,
            before.as_ref().and_then(|b| b.resource_version.as_deref()),
            now.as_ref().and_then(|n| n.resource_version.as_deref()),
        );
        if obj.is_none()
            && let Some(ctx) = self.ctx.get()
        {
            ctx.own_writes.forget(Written::Object(Kind::Team), &key);
        }
        if let Some(teams) = self.teams.get()
            && !own
        {
            let msg = match obj {
                Some(o) => SupervisorMsg::Ensure(key.clone(), TeamSpec::new(&o)),
                None => SupervisorMsg::Remove(key.clone()),
            };
            let _ = teams.cast(msg);
        }
        // Fan out only what the dependants read: most team events are the team's own status
        // writes, and re-running its server and every source on each of them multiplied the
        // passes per object (docs/performance.md).
        // The server recounts consent when a team appears, goes, or its Ready flips (a
        // namespace relabel shows up as the team turning RefNotPermitted or back).
        let server_affected = match (&before, &now) {
            (Some(b), Some(n)) => b.server != n.server || b.ready != n.ready,
            _ => true,
        };
        let sources_affected =
            before.as_ref().map(TeamSeen::gate) != now.as_ref().map(TeamSeen::gate);
        // The server's status counts its accepted and refused teams (DESIGN §4.6): nudge its
        // actor (only its actor: `server_changed` would fan back out to every team).
        let server = now.as_ref().or(before.as_ref()).map(|s| s.server.clone());
        if server_affected
            && let (Some(server), Some(servers), Some(ctx)) =
                (server, self.servers.get(), self.ctx.get())
            && let Some(obj) = ctx
                .stores
                .servers
                .get(&ObjectRef::new(&server.name).within(&server.namespace))
        {
            let _ = servers.cast(SupervisorMsg::Ensure(server, ServerSpec(obj)));
        }
        // DESIGN §5: a TerdutAlertSource waiting for its team re-reconciles when it changes.
        if sources_affected && let Some(ctx) = self.ctx.get() {
            for source in ctx.stores.sources.state() {
                if source.metadata.namespace.as_deref() == Some(key.namespace.as_str())
                    && source.spec.team_ref.name == key.name
                {
                    self.source_changed(ObjectKey::of(source.as_ref()), Some(source));
                }
            }
        }
    }

    fn source_changed(&self, key: ObjectKey, obj: Option<Arc<TerdutAlertSource>>) {
        let now = obj.as_deref().and_then(|s| s.resource_version());
        let before = match &obj {
            Some(_) => self.source_seen.insert(key.clone(), now.clone()),
            None => {
                if let Some(ctx) = self.ctx.get() {
                    ctx.own_writes.forget(Written::Object(Kind::Source), &key);
                }
                self.source_seen.remove(&key).map(|(_, rv)| rv)
            }
        };
        let own = own_write(
            self.ctx.get(),
            Written::Object(Kind::Source),
            &key,
            before.flatten().as_deref(),
            now.as_deref(),
        );
        let Some(sources) = self.sources.get() else {
            return;
        };
        if own {
            return;
        }
        let msg = match obj {
            Some(o) => SupervisorMsg::Ensure(key, SourceSpec::new(&o)),
            None => SupervisorMsg::Remove(key),
        };
        let _ = sources.cast(msg);
    }

    fn webhook_secret_changed(
        &self,
        secret: ObjectKey,
        resource_version: Option<String>,
        deleted: bool,
        source: ObjectKey,
        obj: Option<Arc<TerdutAlertSource>>,
    ) {
        // The Secret a source pass created or replaced comes back as a watch event; that pass
        // already reported on it (its status says Ready with that integration), so the event
        // is no reason for another pass (issue 8: sources took a third pass for it). A delete,
        // or a version anyone else wrote, still nudges: DESIGN §5, a lost Secret fails closed.
        let before = if deleted {
            if let Some(ctx) = self.ctx.get() {
                ctx.own_writes.forget(Written::WebhookSecret, &secret);
            }
            self.secret_seen.remove(&secret).map(|(_, rv)| rv)
        } else {
            self.secret_seen
                .insert(secret.clone(), resource_version.clone())
        };
        let own = !deleted
            && own_write(
                self.ctx.get(),
                Written::WebhookSecret,
                &secret,
                before.flatten().as_deref(),
                resource_version.as_deref(),
            );
        if own {
            return;
        }
        if obj.is_some() {
            self.source_changed(source, obj);
        }
    }

    fn synced(&self, kind: &'static str, namespace: Option<String>) {
        // Objects deleted while no watch was open never produce a Delete event: after every
        // (re)list, stop the actors of that scope whose object is no longer in the cache.
        let Some(ctx) = self.ctx.get().cloned() else {
            return;
        };
        match kind {
            "team" => {
                if let Some(teams) = self.teams.get().cloned() {
                    remove_gone(teams, ctx.stores.teams.clone(), namespace);
                }
            }
            "source" => {
                if let Some(sources) = self.sources.get().cloned() {
                    remove_gone(sources, ctx.stores.sources.clone(), namespace);
                }
            }
            "server" => {
                if let Some(servers) = self.servers.get().cloned() {
                    remove_gone(servers, ctx.stores.servers.clone(), namespace);
                }
            }
            _ => {}
        }
        // A reflector swaps its whole list in at the end of a (re)list, not object by object:
        // until then an actor can find its server or team missing from the cache, and a fan-out
        // can find no dependants to nudge. Nothing else would wake those actors before their
        // resync, so once any of these kinds (or Namespaces, whose labels decide consent) has
        // listed, nudge every team and alert source
        // (coalesced; a pass that finds nothing to do only reads).
        if matches!(kind, "server" | "team" | "source" | "namespace") {
            if let Some(teams) = self.teams.get() {
                for team in ctx.stores.teams.state() {
                    let _ = teams.cast(SupervisorMsg::Ensure(
                        ObjectKey::of(team.as_ref()),
                        TeamSpec::new(&team),
                    ));
                }
            }
            if let Some(sources) = self.sources.get() {
                for source in ctx.stores.sources.state() {
                    let key = ObjectKey::of(source.as_ref());
                    let _ = sources.cast(SupervisorMsg::Ensure(key, SourceSpec::new(&source)));
                }
            }
        }
    }
}

impl OperatorRoutes {
    /// Nudges every team of TerdutServer `server` (only the team: its own object did not
    /// change, so its server and alert sources need no fan-out).
    fn nudge_teams_of(&self, ctx: &Ctx, server: &ObjectKey) {
        let Some(teams) = self.teams.get() else {
            return;
        };
        for team in ctx.stores.teams.state() {
            if team_server_key(&team) == *server {
                let key = ObjectKey::of(team.as_ref());
                let _ = teams.cast(SupervisorMsg::Ensure(key, TeamSpec::new(&team)));
            }
        }
    }

    /// The server's actor published a new client (or lost it): its teams and their alert
    /// sources look again now instead of after their backoff.
    fn credentials_changed(&self, server: &ObjectKey) {
        let Some(ctx) = self.ctx.get() else {
            return;
        };
        self.nudge_all_of(ctx, server);
    }

    /// A pass found the server's data lost: every team and source of it looks now. Every one
    /// of them that passes finds the same, so one fan-out per [`DATA_LOST_QUIET`] is enough
    /// (10,000 teams each nudging 10,000 would be 10^8 messages).
    fn data_lost(&self, server: &ObjectKey) {
        let Some(ctx) = self.ctx.get() else {
            return;
        };
        let now = ctx.clock.now();
        let recent = self
            .data_lost_at
            .get(server)
            .is_some_and(|at| now.saturating_duration_since(*at) < DATA_LOST_QUIET);
        if recent {
            return;
        }
        self.data_lost_at.insert(server.clone(), now);
        info!(server = %server, "a recorded team or integration is gone from the server; every team and alert source of it looks again");
        self.nudge_all_of(ctx, server);
    }

    /// Nudges every team of `server` and every alert source of those teams.
    fn nudge_all_of(&self, ctx: &Ctx, server: &ObjectKey) {
        self.nudge_teams_of(ctx, server);
        let Some(sources) = self.sources.get() else {
            return;
        };
        for source in ctx.stores.sources.state() {
            let ns = source.metadata.namespace.clone().unwrap_or_default();
            let team = ctx
                .stores
                .teams
                .get(&ObjectRef::new(&source.spec.team_ref.name).within(&ns));
            if team.is_some_and(|t| team_server_key(&t) == *server) {
                let key = ObjectKey::of(source.as_ref());
                let _ = sources.cast(SupervisorMsg::Ensure(key, SourceSpec::new(&source)));
            }
        }
    }
}

/// The wiring's side of [`ServerEvents`]. Weak: the context must not keep the routes (and
/// through them itself) alive.
struct RouteServerEvents(Weak<OperatorRoutes>);

impl ServerEvents for RouteServerEvents {
    fn credentials_changed(&self, server: &ObjectKey) {
        if let Some(routes) = self.0.upgrade() {
            routes.credentials_changed(server);
        }
    }

    fn data_lost(&self, server: &ObjectKey) {
        if let Some(routes) = self.0.upgrade() {
            routes.data_lost(server);
        }
    }
}

/// At most one data-lost fan-out per server in this long (see `OperatorRoutes::data_lost`).
const DATA_LOST_QUIET: Duration = Duration::from_secs(10);

/// Stops the children of `supervisor` in `namespace` (`None`: any) whose object is not in
/// `store` (after a relist of that namespace).
fn remove_gone<F, K>(
    supervisor: ActorRef<SupervisorMsg<F>>,
    store: NamespacedStores<K>,
    namespace: Option<String>,
) where
    F: ChildFactory,
    K: kube::Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    tokio::spawn(async move {
        let Ok(snap) = snapshot(&supervisor, Duration::from_secs(10)).await else {
            return;
        };
        for key in snap.children.keys() {
            if namespace.as_ref().is_none_or(|ns| *ns == key.namespace)
                && store
                    .get(&ObjectRef::new(&key.name).within(&key.namespace))
                    .is_none()
            {
                let _ = supervisor.cast(SupervisorMsg::Remove(key.clone()));
            }
        }
    });
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
    pub fn register(registry: &mut Registry) -> Self {
        Self {
            operator: OperatorMetrics::register(registry),
            api: ApiMetrics::register(registry),
            supervisor: SupervisorMetrics::register(registry),
        }
    }
}

/// Starts the operator: informers, supervisors, actors.
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

    let routes = Arc::new(OperatorRoutes {
        servers: OnceLock::new(),
        sources: OnceLock::new(),
        teams: OnceLock::new(),
        team_seen: DashMap::new(),
        server_seen: DashMap::new(),
        source_seen: DashMap::new(),
        secret_seen: DashMap::new(),
        data_lost_at: DashMap::new(),
        ctx: OnceLock::new(),
    });
    let informers = informers::build(&watch, &opts.config.watch_namespaces, routes.clone());
    let ctx = Ctx::new(Inner {
        kube: client,
        stores: informers.stores.clone(),
        events,
        metrics,
        api_metrics,
        clock: opts.clock.clone(),
        config: opts.config.clone(),
        servers: Default::default(),
        on_server: OnceLock::new(),
        own_writes: Default::default(),
    });
    // Weak: the context must not keep the routes (and through them itself) alive.
    let weak: Weak<OperatorRoutes> = Arc::downgrade(&routes);
    let _ = ctx.on_server.set(Box::new(RouteServerEvents(weak)));

    let sup_config = |seed: u64| SupervisorConfig {
        policy: opts.restart_policy.clone(),
        clock: opts.clock.clone(),
        metrics: sup_metrics.clone(),
        jitter_seed: Some(seed),
        shutdown_timeout: Duration::from_secs(20),
    };
    let (servers, server_handle) = Actor::spawn(
        None,
        KeyedSupervisor::new(
            ServerFactory { ctx: ctx.clone() },
            sup_config(rand::random()),
        ),
        (),
    )
    .await?;

    let (sources, source_handle) = Actor::spawn(
        None,
        KeyedSupervisor::new(SourceFactory::new(ctx.clone()), sup_config(rand::random())),
        (),
    )
    .await?;

    let (teams, team_handle) = Actor::spawn(
        None,
        KeyedSupervisor::new(TeamFactory::new(ctx.clone()), sup_config(rand::random())),
        (),
    )
    .await?;

    let _ = routes.servers.set(servers.clone());
    if children == ChildRuntime::Actors {
        let _ = routes.teams.set(teams.clone());
        let _ = routes.sources.set(sources.clone());
    }
    let _ = routes.ctx.set(ctx.clone());
    let tasks = informers.tasks.into_iter().map(tokio::spawn).collect();
    info!("operator started");
    Ok(RunningOperator {
        ctx,
        servers,
        sources,
        teams,
        tasks,
        supervisor_handles: vec![server_handle, source_handle, team_handle],
        synced: informers.synced,
        expected: informers.expected,
    })
}
