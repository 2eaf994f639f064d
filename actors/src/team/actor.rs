//! The TerdutTeam actor: one per TerdutTeam (DESIGN §4.2, §4.6, §5). It reaches its server
//! only through the server's actor (consent and credentials, see `access.rs`), and is never
//! called by it.
//!
//! Each message is one pass of [`TeamReconciler`] (`reconcile.rs`: the pass, its status write
//! and Events, and when the next pass is due, callable outside the actor); the actor keeps the
//! per-object [`TeamMemory`] and re-arms one timer with the delay the pass returned (the
//! previous timer is aborted, so timers never pile up).

use std::sync::Arc;

use kube::runtime::reflector::ObjectRef;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use terdut_crds::v1alpha1::TerdutTeam;
use tokio::task::JoinHandle;

pub use super::reconcile::Next;
use super::reconcile::{TeamMemory, TeamReconciler};
use crate::context::Ctx;
use crate::key::ObjectKey;
use crate::pass_limit::PassLimit;
use crate::supervisor::{ChildContext, ChildFactory, ChildMsg};

/// Messages a team actor handles.
#[derive(Debug)]
pub enum TeamMsg {
    /// Reconcile now (the supervisor's coalesced nudge).
    Reconcile,
    /// The periodic resync or a retry timer fired (tests send it to force a pass).
    Resync,
}

/// The desired state the supervisor hands the actor. Equal when nothing changed that should
/// reset a crash-looping actor: uid, generation, annotations and the deletion mark (our own
/// status writes change none of them).
#[derive(Clone, Debug)]
pub struct TeamSpec(pub Arc<TerdutTeam>);

impl PartialEq for TeamSpec {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (&self.0.metadata, &other.0.metadata);
        a.uid == b.uid
            && a.generation == b.generation
            && a.annotations == b.annotations
            && a.deletion_timestamp == b.deletion_timestamp
    }
}

/// Builds team actors for the keyed supervisor.
#[derive(Clone, Debug)]
pub struct TeamFactory {
    pub ctx: Ctx,
    /// Shared by all its actors (`max_concurrent_passes`).
    passes: PassLimit,
}

impl TeamFactory {
    pub fn new(ctx: Ctx) -> Self {
        let passes = PassLimit::new(
            ctx.config.max_concurrent_passes,
            ctx.metrics.pass_gauges("team"),
        );
        Self { ctx, passes }
    }
}

impl ChildFactory for TeamFactory {
    type Child = TeamActor;
    type Spec = TeamSpec;

    fn kind(&self) -> &'static str {
        "team"
    }

    fn build(&self, child: ChildContext<TeamSpec>) -> (TeamActor, ChildContext<TeamSpec>) {
        (
            TeamActor {
                ctx: self.ctx.clone(),
                reconciler: TeamReconciler::new(self.ctx.clone()),
                passes: self.passes.clone(),
            },
            child,
        )
    }

    fn nudge(&self) -> ChildMsg<Self> {
        TeamMsg::Reconcile
    }

    fn on_crash_loop(&self, key: &ObjectKey, last_error: &str) {
        let (ctx, key, err) = (self.ctx.clone(), key.clone(), last_error.to_owned());
        tokio::spawn(async move {
            crate::crash_loop::report::<TerdutTeam>(&ctx, "team", &key, &err).await
        });
    }
}

/// The actor's state for one incarnation.
pub struct TeamState {
    child: ChildContext<TeamSpec>,
    timer: Option<JoinHandle<Result<(), ractor::MessagingErr<TeamMsg>>>>,
    /// What the reconciler keeps between passes.
    memory: TeamMemory,
}

impl std::fmt::Debug for TeamState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TeamState")
            .field("key", self.child.key())
            .field("failures", &self.memory.failures)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
pub struct TeamActor {
    ctx: Ctx,
    reconciler: TeamReconciler,
    passes: PassLimit,
}

impl Actor for TeamActor {
    type Msg = TeamMsg;
    type State = TeamState;
    type Arguments = ChildContext<TeamSpec>;

    async fn pre_start(
        &self,
        _myself: ActorRef<TeamMsg>,
        child: ChildContext<TeamSpec>,
    ) -> Result<TeamState, ActorProcessingErr> {
        Ok(TeamState {
            child,
            timer: None,
            memory: TeamMemory::default(),
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<TeamMsg>,
        state: &mut TeamState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(t) = state.timer.take() {
            t.abort();
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<TeamMsg>,
        msg: TeamMsg,
        state: &mut TeamState,
    ) -> Result<(), ActorProcessingErr> {
        state.child.message_received();
        if let TeamMsg::Reconcile = msg {
            state.child.nudge_received();
        }
        // Made and boxed by the limit once a slot is free, so the pass's future (~15 KB)
        // exists only while the pass runs: ractor boxes each actor's processing loop once, and
        // a handler future awaited inline would make every idle actor carry that size
        // (docs/performance.md, heap profile).
        self.passes.run(|| self.reconcile(&myself, state)).await;
        Ok(())
    }
}

impl TeamActor {
    /// The newest copy of the object: the cache, else what the supervisor last handed over.
    fn current(&self, child: &ChildContext<TeamSpec>) -> Arc<TerdutTeam> {
        let key = child.key();
        self.ctx
            .stores
            .teams
            .get(&ObjectRef::new(&key.name).within(&key.namespace))
            .unwrap_or_else(|| child.spec().0)
    }

    async fn reconcile(&self, myself: &ActorRef<TeamMsg>, state: &mut TeamState) {
        let team = self.current(&state.child);
        let next = self.reconciler.reconcile(&team, &mut state.memory).await;
        if let Some(t) = state.timer.take() {
            t.abort();
        }
        state.timer = Some(myself.send_after(next, || TeamMsg::Resync));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(v: serde_json::Value) -> TeamSpec {
        TeamSpec(Arc::new(serde_json::from_value(v).unwrap()))
    }

    #[test]
    fn spec_equality_ignores_status_but_not_annotations_or_deletion() {
        let base = serde_json::json!({
            "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutTeam",
            "metadata": {"name": "t", "namespace": "ns", "uid": "u1", "generation": 2},
            "spec": {"serverRef": {"name": "s"}, "displayName": "T"},
        });
        let mut with_status = base.clone();
        with_status["status"] = serde_json::json!({"teamID": 4});
        assert_eq!(spec(base.clone()), spec(with_status));
        let mut paused = base.clone();
        paused["metadata"]["annotations"] = serde_json::json!({"terdut.ryuvia.com/paused": "true"});
        assert_ne!(spec(base.clone()), spec(paused));
        let mut deleting = base.clone();
        deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z".into();
        assert_ne!(spec(base), spec(deleting));
    }
}
