//! Baselines (b) and (c): the same team and alert-source pipelines (`pipeline::Driver` of
//! `Team`, `Source`) driven by plain kube-runtime `Controller`s instead of one actor per
//! object. TerdutServers stay with their actors (they hand out credentials and
//! consent), so only the runtime of teams and sources changes.
//!
//! Plain means: every watch event of the object (its own status writes included) triggers a
//! reconcile, the returned delay becomes `Action::requeue`, and the per-object memory the actor
//! would keep (failures, the Warning of a streak, the remembered team id) lives in a `DashMap`
//! keyed by `ObjectRef`. A Controller never runs two reconciles of one object at once, so
//! taking the memory out for the pass and putting it back is race-free.

use std::convert::Infallible;
use std::sync::Arc;

use dashmap::DashMap;
use futures::StreamExt;
use kube::api::Api;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use terdut_actors::context::Ctx;
use terdut_actors::key::ObjectKey;
use terdut_actors::pipeline::{Driver, Memory};
use terdut_actors::server::observe::team_server_key;
use terdut_actors::source::Source;
use terdut_actors::team::Team;
use terdut_actors::tree::Parent;
use terdut_actors::tree::writer::Registry;
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutServer, TerdutTeam};
use tokio::task::JoinHandle;

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
    memory: DashMap<ObjectRef<TerdutTeam>, Memory<Team>>,
}

struct SourceCtx {
    driver: Driver<Source>,
    parent: Parent,
    memory: DashMap<ObjectRef<TerdutAlertSource>, Memory<Source>>,
    /// The newest resourceVersion of each team the source Controller's team watch delivered.
    teams_seen: Arc<DashMap<ObjectRef<TerdutTeam>, u64>>,
}

fn version<K: kube::Resource>(obj: &K) -> u64 {
    obj.meta()
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

async fn reconcile_team(team: Arc<TerdutTeam>, cx: Arc<TeamCtx>) -> Result<Action, Infallible> {
    let key = ObjectRef::from_obj(team.as_ref());
    let mut memory = cx.memory.remove(&key).map(|(_, m)| m).unwrap_or_default();
    // Outside the tree: the server's actor is looked up and asked, as a child would ask it.
    let next = cx.driver.reconcile(&cx.parent, &team, &mut memory).await;
    cx.memory.insert(key, memory);
    Ok(Action::requeue(next))
}

async fn reconcile_source(
    source: Arc<TerdutAlertSource>,
    cx: Arc<SourceCtx>,
) -> Result<Action, Infallible> {
    let key = ObjectRef::from_obj(source.as_ref());
    // The pass reads the team from the operator's cache, a different watch than the one that
    // triggered it: wait (at most 2 s) until that cache has the version the trigger saw, or a
    // team-Ready trigger could run on the old team and the wake-up be lost. The actors have no
    // such gap: their nudges come from the cache's own watch.
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
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
    let mut memory = cx.memory.remove(&key).map(|(_, m)| m).unwrap_or_default();
    let next = cx.driver.reconcile(&cx.parent, &source, &mut memory).await;
    cx.memory.insert(key, memory);
    Ok(Action::requeue(next))
}

/// Starts a team Controller and a source Controller on namespace `ns`, `concurrency` reconciles
/// at most at a time each (0: unbounded, like the actors). `ctx` is the context of an operator
/// started with `ChildRuntime::External`: its caches, its server actors, its metrics.
pub fn spawn(
    client: &kube::Client,
    ctx: &Ctx,
    servers: &Registry,
    ns: &str,
    concurrency: u16,
) -> Baseline {
    let config = Config::default().concurrency(concurrency);
    let wc = watcher::Config::default();

    // docs/design.md §5: a TerdutTeam re-reconciles when its TerdutServer changes.
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
    let teams = Controller::new(
        Api::<TerdutTeam>::namespaced(client.clone(), ns),
        wc.clone(),
    )
    .with_config(config.clone())
    .watches(
        Api::<TerdutServer>::namespaced(client.clone(), ns),
        wc.clone(),
        teams_of_server,
    )
    .run(
        reconcile_team,
        |_, _: &Infallible, _| Action::await_change(),
        Arc::new(TeamCtx {
            driver: Driver::new(ctx.clone(), Team),
            parent: Parent::Lookup(servers.clone()),
            memory: DashMap::new(),
        }),
    )
    .for_each(|_| async {});

    // docs/design.md §5: a TerdutAlertSource waiting for its team re-reconciles when the team
    // changes. The sources are looked up in this Controller's own store (it has every source it
    // will reconcile).
    let sources = Controller::new(
        Api::<TerdutAlertSource>::namespaced(client.clone(), ns),
        wc.clone(),
    );
    let teams_seen: Arc<DashMap<ObjectRef<TerdutTeam>, u64>> = Arc::default();
    let sources_of_team = {
        let store = sources.store();
        let teams_seen = teams_seen.clone();
        move |team: TerdutTeam| {
            let ns = team.metadata.namespace.clone();
            let name = team.metadata.name.clone().unwrap_or_default();
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
    let sources = sources
        .with_config(config)
        .watches(
            Api::<TerdutTeam>::namespaced(client.clone(), ns),
            wc,
            sources_of_team,
        )
        .run(
            reconcile_source,
            |_, _: &Infallible, _| Action::await_change(),
            Arc::new(SourceCtx {
                driver: Driver::new(ctx.clone(), Source),
                parent: Parent::Lookup(servers.clone()),
                memory: DashMap::new(),
                teams_seen,
            }),
        )
        .for_each(|_| async {});

    Baseline {
        tasks: vec![tokio::spawn(teams), tokio::spawn(sources)],
    }
}
