//! Peer (b): the team and alert-source pipelines (`pipeline::Driver` of `Team`, `Source`)
//! driven by kube-runtime `Controller`s as a kube-rs user writes them, instead of one actor per
//! object. TerdutServers stay with their actors (they hand out credentials and consent), so
//! only the runtime of teams and sources changes.
//!
//! Idiomatic means (docs/performance.md, "How each peer was tuned"):
//! - each Controller is fed by its own reflector through `predicate_filter`: generation (its own
//!   status writes do not bump it), annotations (pause, adopt, rotate), finalizers (so the pass
//!   after `finalizer()` added one runs) and the deletion timestamp; nothing else triggers;
//! - a TerdutServer event maps to its teams only when the server's generation changed (a spec
//!   change), never on its status; a team event maps to its sources only when the team's Ready
//!   condition or its id on the server changed (what a waiting source waits for);
//! - the webhook Secrets are owned (`owns_stream`, the operator's label only);
//! - `kube::runtime::finalizer()` adds the finalizer before the first pass and, on deletion,
//!   runs the cleanup pass; the pass releases the finalizer itself (it is the same pass the
//!   actors run), so `finalizer()`'s own removal then finds the object gone (404), which the
//!   error policy ignores;
//! - `concurrency` as (a)'s `--max-concurrent-reconciles`.
//!
//! The per-object memory the actor would keep (failures, the remembered team id) lives in a
//! `DashMap` keyed by `ObjectRef`. A Controller never runs two reconciles of one object at once,
//! so taking the memory out for the pass and putting it back is race-free.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::finalizer::{self, Event as Finalizer};
use kube::runtime::predicates;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::utils::PredicateConfig;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use terdut_actors::context::Ctx;
use terdut_actors::key::ObjectKey;
use terdut_actors::pipeline::{Driver, Memory};
use terdut_actors::server::observe::team_server_key;
use terdut_actors::source::Source;
use terdut_actors::team::Team;
use terdut_actors::tree::Parent;
use terdut_actors::tree::writer::Registry;
use terdut_crds::v1alpha1::conditions::{READY, find};
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutServer, TerdutTeam};
use tokio::task::JoinHandle;

const TEAM_FINALIZER: &str = "terdut.ryuvia.com/team-cleanup";
const SOURCE_FINALIZER: &str = "terdut.ryuvia.com/source-cleanup";

/// The two running Controllers; abort them with [`Baseline::stop`].
pub struct Baseline {
    tasks: Vec<JoinHandle<()>>,
}

impl Baseline {
    pub fn stop(self) {
        for t in self.tasks {
            t.abort();
        }
    }
}

struct TeamCtx {
    driver: Driver<Team>,
    parent: Parent,
    api: Api<TerdutTeam>,
    memory: DashMap<ObjectRef<TerdutTeam>, Memory<Team>>,
}

struct SourceCtx {
    driver: Driver<Source>,
    parent: Parent,
    api: Api<TerdutAlertSource>,
    memory: DashMap<ObjectRef<TerdutAlertSource>, Memory<Source>>,
    /// The newest resourceVersion of each team the source Controller's team watch delivered.
    teams_seen: Arc<DashMap<ObjectRef<TerdutTeam>, u64>>,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Failed(String);

fn version<K: kube::Resource>(obj: &K) -> u64 {
    obj.meta()
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// What triggers a pass of an object of its own watch: a spec change (generation), an
/// annotation, a finalizer added or removed, the start of its deletion.
fn own_changes<K: Resource>(obj: &K) -> Option<u64> {
    let mut h = std::hash::DefaultHasher::new();
    predicates::generation(obj).hash(&mut h);
    predicates::annotations(obj).hash(&mut h);
    predicates::finalizers(obj).hash(&mut h);
    obj.meta().deletion_timestamp.is_some().hash(&mut h);
    Some(h.finish())
}

/// What a waiting source waits for: its team's Ready condition and its id on the server.
fn team_readiness(team: &TerdutTeam) -> Option<u64> {
    let mut h = std::hash::DefaultHasher::new();
    let status = team.status.as_ref();
    status
        .and_then(|s| find(&s.conditions, READY))
        .map(|c| c.status.clone())
        .hash(&mut h);
    status.and_then(|s| s.team_id).hash(&mut h);
    Some(h.finish())
}

/// The pass releases the finalizer itself, so `finalizer()`'s removal may find the object
/// gone: that is the end of a deletion, not a failure.
fn error_policy<K>(_: Arc<K>, e: &finalizer::Error<Failed>, _: Arc<impl Sized>) -> Action {
    match e {
        finalizer::Error::RemoveFinalizer(kube::Error::Api(s))
            if s.code == 404 || s.code == 422 =>
        {
            Action::await_change()
        }
        _ => Action::requeue(Duration::from_secs(5)),
    }
}

async fn reconcile_team(
    team: Arc<TerdutTeam>,
    cx: Arc<TeamCtx>,
) -> Result<Action, finalizer::Error<Failed>> {
    finalizer::finalizer(&cx.api, TEAM_FINALIZER, team, |event| async {
        // Apply and Cleanup run the same pass: it converges a live object and cleans up a
        // deleted one (docs/design.md §5 "Finalizers").
        let (Finalizer::Apply(team) | Finalizer::Cleanup(team)) = event;
        let key = ObjectRef::from_obj(team.as_ref());
        let mut memory = cx.memory.remove(&key).map(|(_, m)| m).unwrap_or_default();
        let next = cx.driver.reconcile(&cx.parent, &team, &mut memory).await;
        if team.meta().deletion_timestamp.is_none() {
            cx.memory.insert(key, memory);
        }
        Ok::<_, Failed>(Action::requeue(next))
    })
    .await
}

async fn reconcile_source(
    source: Arc<TerdutAlertSource>,
    cx: Arc<SourceCtx>,
) -> Result<Action, finalizer::Error<Failed>> {
    finalizer::finalizer(&cx.api, SOURCE_FINALIZER, source, |event| async {
        let (Finalizer::Apply(source) | Finalizer::Cleanup(source)) = event;
        let key = ObjectRef::from_obj(source.as_ref());
        // The pass reads the team from the operator's cache, a different watch than the one
        // that triggered it: wait (at most 2 s) until that cache has the version the trigger
        // saw, or a team-Ready trigger could run on the old team and the wake-up be lost.
        let team = ObjectRef::new(&source.spec.team_ref.name)
            .within(&key.namespace.clone().unwrap_or_default());
        if let Some(want) = cx.teams_seen.get(&team).map(|v| *v) {
            let stores = &cx.driver.ctx.stores;
            for _ in 0..200 {
                if stores
                    .teams
                    .get(&team)
                    .is_some_and(|t| version(t.as_ref()) >= want)
                {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        let mut memory = cx.memory.remove(&key).map(|(_, m)| m).unwrap_or_default();
        let next = cx.driver.reconcile(&cx.parent, &source, &mut memory).await;
        if source.meta().deletion_timestamp.is_none() {
            cx.memory.insert(key, memory);
        }
        Ok::<_, Failed>(Action::requeue(next))
    })
    .await
}

/// Starts a team Controller and a source Controller on namespace `ns`, `concurrency` reconciles
/// at most at a time each (0: unbounded). `ctx` is the context of an operator started with
/// `ChildRuntime::External`: its caches, its server actors, its metrics.
pub fn spawn(
    client: &kube::Client,
    ctx: &Ctx,
    servers: &Registry,
    ns: &str,
    concurrency: u16,
) -> Baseline {
    let config = Config::default().concurrency(concurrency);
    let wc = watcher::Config::default();
    let pc = PredicateConfig::default;

    // docs/design.md §5: a TerdutTeam re-reconciles when its TerdutServer's spec changes.
    let teams_of_server = {
        let ctx = ctx.clone();
        move |server: TerdutServer| {
            let key = ObjectKey::of(&server);
            ctx.stores
                .teams
                .state()
                .into_iter()
                .filter(|t| team_server_key(t) == key)
                .map(|t| ObjectRef::from_obj(t.as_ref()))
                .collect::<Vec<_>>()
        }
    };
    let team_api = Api::<TerdutTeam>::namespaced(client.clone(), ns);
    let (team_reader, team_writer) = reflector::store();
    let team_stream = watcher(team_api.clone(), wc.clone())
        .default_backoff()
        .reflect(team_writer)
        .applied_objects()
        .predicate_filter(own_changes, pc());
    let server_stream = watcher(
        Api::<TerdutServer>::namespaced(client.clone(), ns),
        wc.clone(),
    )
    .default_backoff()
    .applied_objects()
    .predicate_filter(predicates::generation, pc());
    let teams = Controller::for_stream(team_stream, team_reader)
        .with_config(config.clone())
        .watches_stream(server_stream, teams_of_server)
        .run(
            reconcile_team,
            error_policy,
            Arc::new(TeamCtx {
                driver: Driver::new(ctx.clone(), Team),
                parent: Parent::Lookup(servers.clone()),
                api: team_api,
                memory: DashMap::new(),
            }),
        )
        .for_each(|_| async {});

    // docs/design.md §5: a TerdutAlertSource waiting for its team re-reconciles when the team
    // turns Ready (or gets its id). The sources are looked up in this Controller's own store.
    let source_api = Api::<TerdutAlertSource>::namespaced(client.clone(), ns);
    let (source_reader, source_writer) = reflector::store();
    let source_stream = watcher(source_api.clone(), wc.clone())
        .default_backoff()
        .reflect(source_writer)
        .applied_objects()
        .predicate_filter(own_changes, pc());
    let teams_seen: Arc<DashMap<ObjectRef<TerdutTeam>, u64>> = Arc::default();
    let sources_of_team = {
        let store = source_reader.clone();
        let teams_seen = teams_seen.clone();
        move |team: TerdutTeam| {
            let ns = team.metadata.namespace.clone();
            let name = team.name_any();
            let v = version(&team);
            teams_seen
                .entry(ObjectRef::from_obj(&team))
                .and_modify(|x| *x = (*x).max(v))
                .or_insert(v);
            store
                .state()
                .into_iter()
                .filter(|s| s.metadata.namespace == ns && s.spec.team_ref.name == name)
                .map(|s| ObjectRef::from_obj(s.as_ref()))
                .collect::<Vec<_>>()
        }
    };
    let team_readiness_stream = watcher(team_api_for(client, ns), wc.clone())
        .default_backoff()
        .applied_objects()
        .predicate_filter(team_readiness, pc());
    let webhook_secrets = watcher(
        Api::<Secret>::namespaced(client.clone(), ns),
        wc.labels("terdut.ryuvia.com/managed=true"),
    )
    .default_backoff()
    .applied_objects();
    let sources = Controller::for_stream(source_stream, source_reader)
        .with_config(config)
        .owns_stream(webhook_secrets)
        .watches_stream(team_readiness_stream, sources_of_team)
        .run(
            reconcile_source,
            error_policy,
            Arc::new(SourceCtx {
                driver: Driver::new(ctx.clone(), Source),
                parent: Parent::Lookup(servers.clone()),
                api: source_api,
                memory: DashMap::new(),
                teams_seen,
            }),
        )
        .for_each(|_| async {});

    Baseline {
        tasks: vec![tokio::spawn(teams), tokio::spawn(sources)],
    }
}

fn team_api_for(client: &kube::Client, ns: &str) -> Api<TerdutTeam> {
    Api::namespaced(client.clone(), ns)
}
