//! The actor of one TerdutTeam or one TerdutAlertSource (docs/design.md §5), a child of its
//! host (its server's actor, or the holding host; ADR 0008): the two kinds differ in their
//! pipeline, not in how an actor drives it, so the actor is written once here and each kind
//! says what differs through [`ObjectKind`] (its cache, its lane of the pass limit).
//!
//! Each message is one pass of the kind's pipeline through the generic driver
//! (`pipeline/driver.rs`: observe -> plan (pure) -> apply -> status (pure), or finalize;
//! callable outside the actor too, as the benchmark's baselines do). The actor keeps the
//! per-object memory and re-arms one timer with the delay the pass returned (the previous
//! timer is aborted, so timers never pile up). Converged with nothing due for longer than
//! `passivate_after`, it tells its host it is idle and may be stopped, leaving its memory with
//! its entry. Expected failures (a 5xx, a conflict) are handled in the pass and retried by
//! timer; only a panic (or the crash-window test hook) restarts the actor through its host.

use std::fmt::Debug;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::marker::PhantomData;
use std::sync::Arc;

use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutTeam};
use tokio::task::JoinHandle;
use tracing::debug;

use crate::context::Ctx;
use crate::key::ObjectKey;
use crate::kind::Written;
use crate::pass_limit::{Lane, PassLimit};
use crate::pipeline::{Driver, Keepsake, Memory, Pipeline};
use crate::server::observe::team_server_key;
use crate::source::Source;
use crate::stores::NamespacedStores;
use crate::supervisor::{ChildContext, ChildFactory, ChildMsg};
use crate::team::Team;
use crate::tree::Parent;

/// Messages a team actor handles.
pub type TeamMsg = ObjectMsg;
/// What the supervisor hands a team actor.
pub type TeamSpec = ObjectSpec<Team>;
/// Builds team actors for the keyed supervisor.
pub type TeamFactory = ObjectFactory<Team>;
/// Messages a source actor handles.
pub type SourceMsg = ObjectMsg;
/// What the supervisor hands a source actor.
pub type SourceSpec = ObjectSpec<Source>;
/// Builds source actors for the keyed supervisor.
pub type SourceFactory = ObjectFactory<Source>;

/// A kind whose objects have an actor of their own under a server (TerdutTeam,
/// TerdutAlertSource): where its objects are cached, and which server a pass works on.
pub trait ObjectKind: Pipeline {
    /// The informer cache of the kind.
    fn store(ctx: &Ctx) -> &NamespacedStores<Self::Object>;

    /// The TerdutServer a pass of `object` works on: its lane of the pass limit, so one
    /// server that never answers cannot hold every slot (`pass_limit.rs`).
    fn server(ctx: &Ctx, object: &Self::Object) -> ObjectKey;

    /// Its lane of the pass limit: its server, and its namespace within the server's lane,
    /// so one tenant's passes cannot queue another's behind them (`pass_limit.rs`).
    fn lane(ctx: &Ctx, object: &Self::Object) -> Lane {
        Lane::new(
            Self::server(ctx, object),
            object.meta().namespace.clone().unwrap_or_default(),
        )
    }
}

impl ObjectKind for Team {
    fn store(ctx: &Ctx) -> &NamespacedStores<TerdutTeam> {
        &ctx.stores.teams
    }

    fn server(_ctx: &Ctx, team: &TerdutTeam) -> ObjectKey {
        team_server_key(team)
    }
}

impl ObjectKind for Source {
    fn store(ctx: &Ctx) -> &NamespacedStores<TerdutAlertSource> {
        &ctx.stores.sources
    }

    /// The server of its team; a source whose team is not in the cache yet has nothing to
    /// call and shares the lane of all such sources.
    fn server(ctx: &Ctx, source: &TerdutAlertSource) -> ObjectKey {
        let ns = source.namespace().unwrap_or_default();
        ctx.stores
            .teams
            .get(&ObjectRef::new(&source.spec.team_ref.name).within(&ns))
            .map(|team| team_server_key(&team))
            .unwrap_or_else(|| ObjectKey::new("", ""))
    }
}

/// Messages the actor handles.
#[derive(Debug)]
pub enum ObjectMsg {
    /// Reconcile now (the supervisor's coalesced nudge).
    Reconcile,
    /// The periodic resync or a retry timer fired (tests send it to force a pass).
    Resync,
    /// The idle period after pass number `pass` is over: if no pass ran since, the actor tells
    /// its host it may passivate it.
    Idle { pass: u64 },
}

/// What the supervisor keeps of one object: not the object (the actor reads the newest copy
/// from the cache on every pass), only a fingerprint of what should reset a crash-looping
/// actor: uid, generation, annotations and whether it is being deleted (our own status writes
/// change none of them). 8 bytes per object instead of a second copy of it (ADR 0005).
pub struct ObjectSpec<K: ObjectKind> {
    fingerprint: u64,
    kind: PhantomData<fn() -> K>,
}

impl<K: ObjectKind> ObjectSpec<K> {
    pub fn new(object: &K::Object) -> Self {
        let meta = object.meta();
        let mut h = DefaultHasher::new();
        meta.uid.hash(&mut h);
        meta.generation.hash(&mut h);
        meta.annotations.hash(&mut h);
        meta.deletion_timestamp.is_some().hash(&mut h);
        Self {
            fingerprint: h.finish(),
            kind: PhantomData,
        }
    }
}

impl<K: ObjectKind> Clone for ObjectSpec<K> {
    fn clone(&self) -> Self {
        Self {
            fingerprint: self.fingerprint,
            kind: PhantomData,
        }
    }
}

impl<K: ObjectKind> Debug for ObjectSpec<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ObjectSpec({}, {:016x})",
            K::KIND.label(),
            self.fingerprint
        )
    }
}

impl<K: ObjectKind> PartialEq for ObjectSpec<K> {
    fn eq(&self, other: &Self) -> bool {
        self.fingerprint == other.fingerprint
    }
}

/// Builds the actors of one kind for the keyed supervisor.
pub struct ObjectFactory<K: ObjectKind> {
    pub ctx: Ctx,
    /// Shared by every actor of the kind, in every host (`max_concurrent_passes`).
    passes: PassLimit,
    /// Whom the actors ask for credentials and consent: their host.
    parent: Parent,
    kind: PhantomData<fn() -> K>,
}

impl<K: ObjectKind> ObjectFactory<K> {
    pub fn new(ctx: Ctx, passes: PassLimit, parent: Parent) -> Self {
        Self {
            ctx,
            passes,
            parent,
            kind: PhantomData,
        }
    }

    /// The pass limit of kind `K` for the whole operator.
    pub fn pass_limit(ctx: &Ctx) -> PassLimit {
        PassLimit::new(
            ctx.config.max_concurrent_passes,
            ctx.metrics.pass_gauges(K::KIND.label()),
        )
    }
}

impl<K: ObjectKind> Clone for ObjectFactory<K> {
    fn clone(&self) -> Self {
        Self {
            ctx: self.ctx.clone(),
            passes: self.passes.clone(),
            parent: self.parent.clone(),
            kind: PhantomData,
        }
    }
}

impl<K: ObjectKind> Debug for ObjectFactory<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectFactory")
            .field("kind", &K::KIND)
            .finish_non_exhaustive()
    }
}

impl<K: ObjectKind + Default> ChildFactory for ObjectFactory<K> {
    type Child = ObjectActor<K>;
    type Spec = ObjectSpec<K>;

    fn kind(&self) -> &'static str {
        K::KIND.label()
    }

    fn build(
        &self,
        child: ChildContext<ObjectSpec<K>>,
    ) -> (ObjectActor<K>, ChildContext<ObjectSpec<K>>) {
        (
            ObjectActor {
                driver: Driver::new(self.ctx.clone(), K::default()),
                passes: self.passes.clone(),
                parent: self.parent.clone(),
            },
            child,
        )
    }

    fn nudge(&self) -> ChildMsg<Self> {
        ObjectMsg::Reconcile
    }

    fn on_crash_loop(&self, key: &ObjectKey, last_error: &str) {
        let (ctx, key, err) = (self.ctx.clone(), key.clone(), last_error.to_owned());
        tokio::spawn(async move {
            crate::crash_loop::report::<K::Object>(&ctx, K::KIND.label(), &key, &err).await
        });
    }
}

/// The actor's state for one incarnation.
pub struct ObjectState<K: ObjectKind> {
    child: ChildContext<ObjectSpec<K>>,
    timer: Option<JoinHandle<Result<(), ractor::MessagingErr<ObjectMsg>>>>,
    /// The idle-period timer after a converged pass.
    idle: Option<JoinHandle<Result<(), ractor::MessagingErr<ObjectMsg>>>>,
    /// Passes run by this incarnation, and when the next one is due.
    passes: u64,
    due: Option<tokio::time::Instant>,
    /// What the driver keeps between passes.
    memory: Memory<K>,
}

impl<K: ObjectKind> Debug for ObjectState<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectState")
            .field("kind", &K::KIND)
            .field("key", self.child.key())
            .field("streak", &self.memory.streak)
            .finish_non_exhaustive()
    }
}

pub struct ObjectActor<K: ObjectKind> {
    driver: Driver<K>,
    passes: PassLimit,
    /// Who its passes ask for credentials and consent.
    parent: Parent,
}

impl<K: ObjectKind> Debug for ObjectActor<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectActor")
            .field("kind", &K::KIND)
            .field("parent", &self.parent)
            .finish_non_exhaustive()
    }
}

impl<K: ObjectKind> Actor for ObjectActor<K> {
    type Msg = ObjectMsg;
    type State = ObjectState<K>;
    type Arguments = ChildContext<ObjectSpec<K>>;

    async fn pre_start(
        &self,
        _myself: ActorRef<ObjectMsg>,
        child: ChildContext<ObjectSpec<K>>,
    ) -> Result<ObjectState<K>, ActorProcessingErr> {
        Ok(ObjectState {
            timer: None,
            idle: None,
            passes: 0,
            due: None,
            // A passivated incarnation's memory carries over; a restart starts afresh.
            memory: child
                .take_keepsake::<Keepsake<K>>()
                .map(Memory::resume)
                .unwrap_or_default(),
            child,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<ObjectMsg>,
        state: &mut ObjectState<K>,
    ) -> Result<(), ActorProcessingErr> {
        for t in [state.timer.take(), state.idle.take()]
            .into_iter()
            .flatten()
        {
            t.abort();
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<ObjectMsg>,
        msg: ObjectMsg,
        state: &mut ObjectState<K>,
    ) -> Result<(), ActorProcessingErr> {
        state.child.message_received();
        match msg {
            ObjectMsg::Reconcile => state.child.nudge_received(),
            ObjectMsg::Resync => {}
            ObjectMsg::Idle { pass } => {
                // Nothing ran since that pass: nothing is due before its next one.
                if pass == state.passes
                    && let Some(due) = state.due
                {
                    state
                        .child
                        .report_idle(due, Box::new(state.memory.keepsake()));
                    // The events of this object's own writes came in long before this idle
                    // period ended: their record only costs memory now (~150 bytes per idle
                    // object). A late one is taken for another writer's: one extra pass.
                    self.driver
                        .ctx
                        .own_writes
                        .forget(Written::Object(K::KIND), state.child.key());
                }
                return Ok(());
            }
        }
        // Made and boxed by the limit once a slot is free, so the pass's future (~15 KB)
        // exists only while the pass runs: ractor boxes each actor's processing loop once, and
        // a handler future awaited inline would make every idle actor carry that size
        // (docs/adr/0005-memory-per-object.md).
        // The lane is read from the copy now; the pass reads the newest copy again once it has
        // its slot.
        if let Some(object) = self.current(state.child.key()) {
            let lane = K::lane(&self.driver.ctx, &object);
            drop(object);
            self.passes
                .run(lane, || self.reconcile(&myself, state))
                .await;
        } else {
            debug!(kind = K::KIND.label(), object = %state.child.key(), "not in the cache (deleted); nothing to do");
        }
        // Going idle gives a place in the wake budget back when the host stops the actor; one
        // that stays running gives it back now (ADR 0011).
        if state.idle.is_none() {
            state.child.release_place();
        }
        Ok(())
    }
}

impl<K: ObjectKind> ObjectActor<K> {
    /// The newest copy of the object from the cache; `None` once it is gone (the supervisor's
    /// Remove follows). The copy the supervisor handed over is never reconciled in its place:
    /// it may predate the deletion, and a pass on it could create what was just deleted.
    fn current(&self, key: &ObjectKey) -> Option<Arc<K::Object>> {
        K::store(&self.driver.ctx).get(&ObjectRef::new(&key.name).within(&key.namespace))
    }

    async fn reconcile(&self, myself: &ActorRef<ObjectMsg>, state: &mut ObjectState<K>) {
        let key = state.child.key().clone();
        let Some(object) = self.current(&key) else {
            debug!(kind = K::KIND.label(), object = %key, "not in the cache (deleted); nothing to do");
            return;
        };
        let next = self
            .driver
            .reconcile(&self.parent, &object, &mut state.memory)
            .await;
        for t in [state.timer.take(), state.idle.take()]
            .into_iter()
            .flatten()
        {
            t.abort();
        }
        state.timer = Some(myself.send_after(next, || ObjectMsg::Resync));
        state.passes += 1;
        state.due = Some(tokio::time::Instant::now() + next);
        // Converged with nothing due for longer than the idle period: after that period, with
        // no pass in between, the host may stop the actor and keep only its entry (ADR 0008).
        if let Some(after) = self.driver.ctx.config.passivate_after
            && next > after
        {
            let pass = state.passes;
            state.idle = Some(myself.send_after(after, move || ObjectMsg::Idle { pass }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::TeamSpec;
    use terdut_crds::v1alpha1::TerdutTeam;

    fn spec(v: &serde_json::Value) -> TeamSpec {
        TeamSpec::new(&serde_json::from_value::<TerdutTeam>(v.clone()).unwrap())
    }

    #[test]
    fn an_object_is_the_same_until_its_uid_generation_annotations_or_deletion_change() {
        let base = serde_json::json!({
            "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutTeam",
            "metadata": {"name": "t", "namespace": "ns", "uid": "u1", "generation": 2},
            "spec": {"serverRef": {"name": "s"}, "displayName": "T"},
        });
        let mut status_write = base.clone();
        status_write["metadata"]["resourceVersion"] = "99".into();
        status_write["status"] = serde_json::json!({"teamID": 4});
        assert_eq!(spec(&base), spec(&status_write), "a status write");
        for (field, value) in [
            ("uid", serde_json::json!("u2")),
            ("generation", serde_json::json!(3)),
            (
                "annotations",
                serde_json::json!({"terdut.ryuvia.com/paused": "true"}),
            ),
            (
                "deletionTimestamp",
                serde_json::json!("2026-01-01T00:00:00Z"),
            ),
        ] {
            let mut changed = base.clone();
            changed["metadata"][field] = value;
            assert_ne!(spec(&base), spec(&changed), "{field}");
        }
    }
}
