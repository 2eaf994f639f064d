//! The TerdutAlertSource actor: one per TerdutAlertSource (DESIGN §4.5, §5). It resolves the
//! team and its server's credentials, keeps one integration on the server whose webhook URL
//! and key live only in the owned Secret, and deletes the integration before the object goes.
//!
//! Each message is one pass of [`SourceReconciler`] (`reconcile.rs`: resolve -> observe ->
//! `plan` (pure) -> execute -> status, callable outside the actor); the actor keeps the
//! per-object [`SourceMemory`] and re-arms one timer with the delay the pass returned.
//! Expected failures (a 5xx, a conflict) are handled in the pass and retried by timer; only a
//! panic (or the crash-window test hook) restarts the actor through its supervisor.

use std::sync::Arc;

use kube::runtime::reflector::ObjectRef;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use terdut_crds::v1alpha1::TerdutAlertSource;
use tokio::task::JoinHandle;
use tracing::debug;

use super::reconcile::{SourceMemory, SourceReconciler};
use crate::context::Ctx;
use crate::key::ObjectKey;
use crate::pass_limit::PassLimit;
use crate::supervisor::{ChildContext, ChildFactory, ChildMsg};

const KIND: &str = "source";

/// Messages a source actor handles.
#[derive(Debug)]
pub enum SourceMsg {
    /// Reconcile now (the supervisor's coalesced nudge).
    Reconcile,
    /// The periodic resync or a retry timer fired.
    Resync,
}

/// The desired state the supervisor hands the actor. Equal when the object did not change in
/// a way that should restart a crash-looping actor: uid, generation, annotations and whether it
/// is being deleted (our own status writes change none of them).
#[derive(Clone, Debug)]
pub struct SourceSpec(pub Arc<TerdutAlertSource>);

impl PartialEq for SourceSpec {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (&self.0.metadata, &other.0.metadata);
        a.uid == b.uid
            && a.generation == b.generation
            && a.annotations == b.annotations
            && a.deletion_timestamp.is_some() == b.deletion_timestamp.is_some()
    }
}

/// Builds source actors for the keyed supervisor.
#[derive(Clone, Debug)]
pub struct SourceFactory {
    pub ctx: Ctx,
    /// Shared by all its actors (`max_concurrent_passes`).
    passes: PassLimit,
}

impl SourceFactory {
    pub fn new(ctx: Ctx) -> Self {
        let passes = PassLimit::new(
            ctx.config.max_concurrent_passes,
            ctx.metrics.pass_gauges(KIND),
        );
        Self { ctx, passes }
    }
}

impl ChildFactory for SourceFactory {
    type Child = SourceActor;
    type Spec = SourceSpec;

    fn kind(&self) -> &'static str {
        KIND
    }

    fn build(&self, child: ChildContext<SourceSpec>) -> (SourceActor, ChildContext<SourceSpec>) {
        (
            SourceActor {
                ctx: self.ctx.clone(),
                reconciler: SourceReconciler::new(self.ctx.clone()),
                passes: self.passes.clone(),
            },
            child,
        )
    }

    fn nudge(&self) -> ChildMsg<Self> {
        SourceMsg::Reconcile
    }

    fn on_crash_loop(&self, key: &ObjectKey, last_error: &str) {
        let (ctx, key, err) = (self.ctx.clone(), key.clone(), last_error.to_owned());
        tokio::spawn(async move {
            crate::crash_loop::report::<TerdutAlertSource>(&ctx, KIND, &key, &err).await
        });
    }
}

/// The actor's state for one incarnation.
pub struct SourceState {
    child: ChildContext<SourceSpec>,
    timer: Option<JoinHandle<Result<(), ractor::MessagingErr<SourceMsg>>>>,
    /// What the reconciler keeps between passes.
    memory: SourceMemory,
}

impl std::fmt::Debug for SourceState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceState")
            .field("key", self.child.key())
            .field("failures", &self.memory.failures)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
pub struct SourceActor {
    ctx: Ctx,
    reconciler: SourceReconciler,
    passes: PassLimit,
}

impl Actor for SourceActor {
    type Msg = SourceMsg;
    type State = SourceState;
    type Arguments = ChildContext<SourceSpec>;

    async fn pre_start(
        &self,
        _myself: ActorRef<SourceMsg>,
        child: ChildContext<SourceSpec>,
    ) -> Result<SourceState, ActorProcessingErr> {
        Ok(SourceState {
            child,
            timer: None,
            memory: SourceMemory::default(),
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<SourceMsg>,
        state: &mut SourceState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(t) = state.timer.take() {
            t.abort();
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<SourceMsg>,
        msg: SourceMsg,
        state: &mut SourceState,
    ) -> Result<(), ActorProcessingErr> {
        state.child.message_received();
        if let SourceMsg::Reconcile = msg {
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

impl SourceActor {
    /// The newest copy of the object from the cache; `None` once it is gone (the supervisor's
    /// Remove follows).
    fn current(&self, key: &ObjectKey) -> Option<Arc<TerdutAlertSource>> {
        self.ctx
            .stores
            .sources
            .get(&ObjectRef::new(&key.name).within(&key.namespace))
    }

    async fn reconcile(&self, myself: &ActorRef<SourceMsg>, state: &mut SourceState) {
        let key = state.child.key().clone();
        let Some(source) = self.current(&key) else {
            debug!(source = %key, "not in the cache (deleted); nothing to do");
            return;
        };
        let next = self.reconciler.reconcile(&source, &mut state.memory).await;
        if let Some(t) = state.timer.take() {
            t.abort();
        }
        state.timer = Some(myself.send_after(next, || SourceMsg::Resync));
    }
}
