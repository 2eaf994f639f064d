//! The actor of one TerdutTeam or one TerdutAlertSource (DESIGN §5): the two kinds differ in
//! their reconciler, not in how an actor drives it, so the actor is written once here and each
//! kind says what differs through [`ObjectKind`] (`team/actor.rs`, `source/actor.rs`).
//!
//! Each message is one pass of the kind's reconciler (resolve -> observe -> `plan` (pure) ->
//! execute -> status, callable outside the actor: `reconcile.rs` of each kind). The actor keeps
//! the per-object memory for one incarnation and re-arms one timer with the delay the pass
//! returned (the previous timer is aborted, so timers never pile up). Expected failures (a
//! 5xx, a conflict) are handled in the pass and retried by timer; only a panic (or the
//! crash-window test hook) restarts the actor through its supervisor.

use std::fmt::Debug;
use std::future::Future;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use kube::Resource;
use kube::runtime::reflector::ObjectRef;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::task::JoinHandle;
use tracing::debug;

use crate::context::Ctx;
use crate::crash_loop::Conditioned;
use crate::key::ObjectKey;
use crate::pass_limit::PassLimit;
use crate::stores::NamespacedStores;
use crate::supervisor::{ChildContext, ChildFactory, ChildMsg};

/// What one reconciled kind brings to the shared actor.
pub trait ObjectKind: Send + Sync + 'static {
    /// The custom resource.
    type Object: Conditioned + Send + Sync + 'static;
    /// What the reconciler keeps between passes, for one incarnation.
    type Memory: Default + Send + Sync + 'static;
    /// Runs one pass; shared by the kind's actors.
    type Reconciler: Debug + Send + Sync + 'static;

    /// The `kind` label of metrics and logs.
    const KIND: &'static str;

    fn reconciler(ctx: Ctx) -> Self::Reconciler;

    /// The informer cache of the kind.
    fn store(ctx: &Ctx) -> &NamespacedStores<Self::Object>;

    /// Consecutive failed passes, for the state's `Debug`.
    fn failures(memory: &Self::Memory) -> u32;

    /// The TerdutServer a pass of `object` works on: its lane of the pass limit, so one
    /// server that never answers cannot hold every slot (`pass_limit.rs`).
    fn lane(ctx: &Ctx, object: &Self::Object) -> ObjectKey;

    /// One pass over the newest copy of the object; returns when the next pass is due.
    fn reconcile<'a>(
        reconciler: &'a Self::Reconciler,
        object: &'a Self::Object,
        memory: &'a mut Self::Memory,
    ) -> impl Future<Output = Duration> + Send + 'a;
}

/// Messages the actor handles.
#[derive(Debug)]
pub enum ObjectMsg {
    /// Reconcile now (the supervisor's coalesced nudge).
    Reconcile,
    /// The periodic resync or a retry timer fired (tests send it to force a pass).
    Resync,
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
        write!(f, "ObjectSpec({}, {:016x})", K::KIND, self.fingerprint)
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
    /// Shared by all its actors (`max_concurrent_passes`).
    passes: PassLimit,
    kind: PhantomData<fn() -> K>,
}

impl<K: ObjectKind> ObjectFactory<K> {
    pub fn new(ctx: Ctx) -> Self {
        let passes = PassLimit::new(
            ctx.config.max_concurrent_passes,
            ctx.metrics.pass_gauges(K::KIND),
        );
        Self {
            ctx,
            passes,
            kind: PhantomData,
        }
    }
}

impl<K: ObjectKind> Clone for ObjectFactory<K> {
    fn clone(&self) -> Self {
        Self {
            ctx: self.ctx.clone(),
            passes: self.passes.clone(),
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

impl<K: ObjectKind> ChildFactory for ObjectFactory<K> {
    type Child = ObjectActor<K>;
    type Spec = ObjectSpec<K>;

    fn kind(&self) -> &'static str {
        K::KIND
    }

    fn build(
        &self,
        child: ChildContext<ObjectSpec<K>>,
    ) -> (ObjectActor<K>, ChildContext<ObjectSpec<K>>) {
        (
            ObjectActor {
                ctx: self.ctx.clone(),
                reconciler: K::reconciler(self.ctx.clone()),
                passes: self.passes.clone(),
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
            crate::crash_loop::report::<K::Object>(&ctx, K::KIND, &key, &err).await
        });
    }
}

/// The actor's state for one incarnation.
pub struct ObjectState<K: ObjectKind> {
    child: ChildContext<ObjectSpec<K>>,
    timer: Option<JoinHandle<Result<(), ractor::MessagingErr<ObjectMsg>>>>,
    /// What the reconciler keeps between passes.
    memory: K::Memory,
}

impl<K: ObjectKind> Debug for ObjectState<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectState")
            .field("kind", &K::KIND)
            .field("key", self.child.key())
            .field("failures", &K::failures(&self.memory))
            .finish_non_exhaustive()
    }
}

pub struct ObjectActor<K: ObjectKind> {
    ctx: Ctx,
    reconciler: K::Reconciler,
    passes: PassLimit,
}

impl<K: ObjectKind> Debug for ObjectActor<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectActor")
            .field("kind", &K::KIND)
            .field("reconciler", &self.reconciler)
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
            child,
            timer: None,
            memory: K::Memory::default(),
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<ObjectMsg>,
        state: &mut ObjectState<K>,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(t) = state.timer.take() {
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
        if let ObjectMsg::Reconcile = msg {
            state.child.nudge_received();
        }
        // Made and boxed by the limit once a slot is free, so the pass's future (~15 KB)
        // exists only while the pass runs: ractor boxes each actor's processing loop once, and
        // a handler future awaited inline would make every idle actor carry that size
        // (docs/adr/0005-memory-per-object.md).
        // The lane is read from the copy now; the pass reads the newest copy again once it has
        // its slot.
        let Some(object) = self.current(state.child.key()) else {
            debug!(kind = K::KIND, object = %state.child.key(), "not in the cache (deleted); nothing to do");
            return Ok(());
        };
        let lane = K::lane(&self.ctx, &object);
        drop(object);
        self.passes
            .run(lane, || self.reconcile(&myself, state))
            .await;
        Ok(())
    }
}

impl<K: ObjectKind> ObjectActor<K> {
    /// The newest copy of the object from the cache; `None` once it is gone (the supervisor's
    /// Remove follows). The copy the supervisor handed over is never reconciled in its place:
    /// it may predate the deletion, and a pass on it could create what was just deleted.
    fn current(&self, key: &ObjectKey) -> Option<Arc<K::Object>> {
        K::store(&self.ctx).get(&ObjectRef::new(&key.name).within(&key.namespace))
    }

    async fn reconcile(&self, myself: &ActorRef<ObjectMsg>, state: &mut ObjectState<K>) {
        let key = state.child.key().clone();
        let Some(object) = self.current(&key) else {
            debug!(kind = K::KIND, object = %key, "not in the cache (deleted); nothing to do");
            return;
        };
        let next = K::reconcile(&self.reconciler, &object, &mut state.memory).await;
        if let Some(t) = state.timer.take() {
            t.abort();
        }
        state.timer = Some(myself.send_after(next, || ObjectMsg::Resync));
    }
}

#[cfg(test)]
mod tests {
    use crate::team::actor::TeamSpec;
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
