//! The actor of one TerdutServer (docs/design.md §4.1, §6, §7): it owns the server's operator
//! key, Deployment and API client, supervises the actors of the TerdutTeams and
//! TerdutAlertSources it accepts (ADR 0008), and answers their questions (credentials,
//! consent) from its state, at once; a new incarnation holds them for its first pass, at
//! most [`HOLD_LIMIT`], so that a handover does not tell a child "no operator key yet".
//!
//! Its own passes never run inside its message loop: a `Reconcile` hands the pass (and the
//! pipeline's memory) to a worker task, which reports back with `PassDone`; a nudge that
//! arrives meanwhile is remembered and runs when that pass is done. So a child's question
//! waits behind other messages only, never behind the server's Kubernetes or terdut IO.
//!
//! Crash semantics: when the actor fails, ractor stops its children with it; the root
//! restarts it with backoff, and the new incarnation adopts its children from the routing
//! index, so each of them is restarted once, with a fresh restart history. A child's own
//! failure is handled by its table here and touches no sibling.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt as _;
use kube::runtime::reflector::ObjectRef;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use terdut_crds::v1alpha1::TerdutServer;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, info};

use super::children::{ChildSetup, Children};
use super::messages::{ChildrenMsg, ServerMsg};
use super::parent::{Access, CALL_TIMEOUT, Credentials, Parent, consent_from_caches};
use super::writer::{HostRef, Registry, Writer};
use crate::key::ObjectKey;
use crate::kind::Kind;
use crate::pipeline::{Driver, Memory};
use crate::routing::Host;
use crate::server::{Server, test_fault};
use crate::supervisor::{ChildContext, ChildFactory, ChildMsg};

/// At most one data-lost fan-out per server in this long: every child that passes finds the
/// same loss, and 10,000 teams each nudging 10,000 would be 10^8 messages.
const DATA_LOST_QUIET: Duration = Duration::from_secs(10);

/// How long a new incarnation holds its children's questions for its first pass (below). A
/// first pass that takes longer (a server that does not answer) must not make them wait
/// for [`CALL_TIMEOUT`]: a child whose question times out hears "restarting", which reads
/// as a refusal; they hear the actor's state as it is instead.
const HOLD_LIMIT: Duration = Duration::from_secs(3);
const _: () = assert!(HOLD_LIMIT.as_millis() < CALL_TIMEOUT.as_millis());

/// The desired state the supervisor hands the actor. Equal when the object did not change in
/// a way that should reset a crash-looping actor: uid, generation and annotations (its own
/// status writes change none of them, so they never reset a parked actor).
#[derive(Clone, Debug)]
pub struct ServerSpec(pub Arc<TerdutServer>);

impl PartialEq for ServerSpec {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (&self.0.metadata, &other.0.metadata);
        a.uid == b.uid && a.generation == b.generation && a.annotations == b.annotations
    }
}

/// Builds server actors for the root supervisor.
#[derive(Clone, Debug)]
pub struct ServerFactory {
    /// What the actor's children tables share (the context among it).
    pub setup: ChildSetup,
    /// Where the actor asks for its children when it starts.
    pub writer: Writer,
    pub registry: Registry,
}

impl ChildFactory for ServerFactory {
    type Child = ServerActor;
    type Spec = ServerSpec;

    fn kind(&self) -> &'static str {
        Kind::Server.label()
    }

    fn build(&self, child: ChildContext<ServerSpec>) -> (ServerActor, ChildContext<ServerSpec>) {
        (
            ServerActor {
                driver: Driver::new(self.setup.ctx.clone(), Server),
                factory: self.clone(),
            },
            child,
        )
    }

    fn nudge(&self) -> ChildMsg<Self> {
        ServerMsg::Reconcile
    }

    fn on_crash_loop(&self, key: &ObjectKey, last_error: &str) {
        let (ctx, key, err) = (self.setup.ctx.clone(), key.clone(), last_error.to_owned());
        tokio::spawn(async move {
            crate::crash_loop::report::<TerdutServer>(&ctx, Kind::Server.label(), &key, &err).await
        });
    }
}

/// The actor's state for one incarnation.
pub struct ServerState {
    child: ChildContext<ServerSpec>,
    /// The pipeline's memory; `None` while the worker has it.
    memory: Option<Box<Memory<Server>>>,
    /// A nudge arrived while the worker ran: run again when it is done.
    again: bool,
    worker: Option<JoinHandle<()>>,
    timer: Option<JoinHandle<Result<(), ractor::MessagingErr<ServerMsg>>>>,
    /// What the children get when they ask, and its fingerprint.
    credentials: Credentials,
    published: Option<String>,
    /// A child was answered since `published` last changed: it holds what it was told, and
    /// a change must nudge it. A new incarnation's first pass nudges nobody when every
    /// question was held for it (the children heard its answer, docs/design.md §5), which on
    /// a restart or handover was a second pass, and its server calls, for every child.
    answered: bool,
    /// Children's questions held until this incarnation's first pass is done, at most
    /// [`HOLD_LIMIT`] (`None` after): answered before it, they would hear "no operator key
    /// yet" and write Ready=False for a server that is fine, on every leader handover and
    /// restart (docs/adr/0018-upgrades-that-change-nothing.md).
    held: Option<Vec<(String, RpcReplyPort<Access>)>>,
    /// The team and alert-source actors this server accepts.
    children: Children<ServerMsg>,
    /// When the last data-lost fan-out ran.
    data_lost_at: Option<Instant>,
}

/// A failed incarnation skips `post_stop`: its worker and timer must not outlive it.
impl Drop for ServerState {
    fn drop(&mut self) {
        for t in [
            self.timer.take().map(|t| t.abort_handle()),
            self.worker.take().map(|w| w.abort_handle()),
        ]
        .into_iter()
        .flatten()
        {
            t.abort();
        }
    }
}

impl std::fmt::Debug for ServerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerState")
            .field("key", self.child.key())
            .field("running", &self.memory.is_none())
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
pub struct ServerActor {
    driver: Driver<Server>,
    factory: ServerFactory,
}

impl Actor for ServerActor {
    type Msg = ServerMsg;
    type State = ServerState;
    type Arguments = ChildContext<ServerSpec>;

    async fn pre_start(
        &self,
        myself: ActorRef<ServerMsg>,
        child: ChildContext<ServerSpec>,
    ) -> Result<ServerState, ActorProcessingErr> {
        let key = child.key().clone();
        // Not kept: a message to an incarnation that is gone goes nowhere.
        drop(myself.send_after(HOLD_LIMIT, || ServerMsg::AnswerHeld));
        self.factory.registry.insert(key.clone(), myself.clone());
        self.factory
            .writer
            .adopt(Host::Server(key.clone()), HostRef::Server(myself.clone()));
        let children = Children::new(
            &self.factory.setup,
            myself.clone(),
            Parent::Server(Arc::new(myself)),
        );
        Ok(ServerState {
            child,
            memory: Some(Box::default()),
            again: false,
            worker: None,
            timer: None,
            // A new incarnation hands out no client until its first pass built one.
            credentials: Credentials::NotReady(format!(
                "TerdutServer {key} has no operator key yet"
            )),
            published: None,
            answered: false,
            held: Some(vec![]),
            children,
            data_lost_at: None,
        })
    }

    async fn post_stop(
        &self,
        myself: ActorRef<ServerMsg>,
        state: &mut ServerState,
    ) -> Result<(), ActorProcessingErr> {
        state.children.shut_down();
        myself
            .stop_children_and_wait(
                Some("server actor stopping".to_owned()),
                Some(self.factory.setup.config.shutdown_timeout),
            )
            .await;
        self.factory
            .registry
            .remove_if(state.child.key(), |_, r| r.get_id() == myself.get_id());
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<ServerMsg>,
        msg: ServerMsg,
        state: &mut ServerState,
    ) -> Result<(), ActorProcessingErr> {
        state.child.message_received();
        match msg {
            ServerMsg::Reconcile => {
                state.child.nudge_received();
                self.start_pass(&myself, state);
            }
            ServerMsg::Resync => self.start_pass(&myself, state),
            ServerMsg::PassDone { memory, next } => {
                state.worker = None;
                self.publish(state, &memory);
                self.answer_held(state);
                state.memory = Some(memory);
                if std::mem::take(&mut state.again) {
                    self.start_pass(&myself, state);
                } else {
                    if let Some(t) = state.timer.take() {
                        t.abort();
                    }
                    state.timer = Some(myself.send_after(next, || ServerMsg::Resync));
                }
            }
            ServerMsg::PassPanicked(why) => {
                return Err(format!(
                    "the pass of TerdutServer {} panicked: {why}",
                    state.child.key()
                )
                .into());
            }
            ServerMsg::AnswerHeld => self.answer_held(state),
            ServerMsg::Access { namespace, reply } => match &mut state.held {
                Some(held) => held.push((namespace, reply)),
                None => self.answer(state, namespace, reply),
            },
            ServerMsg::DataLost => {
                let now = Instant::now();
                if state
                    .data_lost_at
                    .is_none_or(|at| now.saturating_duration_since(at) >= DATA_LOST_QUIET)
                {
                    state.data_lost_at = Some(now);
                    info!(server = %state.child.key(), "a recorded team or integration is gone from the server; every team and alert source of it looks again");
                    state.children.handle(ChildrenMsg::NudgeAll);
                }
            }
            ServerMsg::Children(msg) => state.children.handle(msg),
        }
        Ok(())
    }

    /// Overridden because the default stops the actor when any child exits.
    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<ServerMsg>,
        event: SupervisionEvent,
        state: &mut ServerState,
    ) -> Result<(), ActorProcessingErr> {
        state.children.supervision(&event);
        Ok(())
    }
}

impl ServerActor {
    /// The newest copy of the object: the cache, else what the supervisor last handed over.
    fn current(&self, child: &ChildContext<ServerSpec>) -> Arc<TerdutServer> {
        let key = child.key();
        self.driver
            .ctx
            .stores
            .servers
            .get(&ObjectRef::new(&key.name).within(&key.namespace))
            .unwrap_or_else(|| child.spec().0)
    }

    /// Hands a pass to a worker task, or remembers to run one when the running one is done.
    fn start_pass(&self, myself: &ActorRef<ServerMsg>, state: &mut ServerState) {
        let Some(mut memory) = state.memory.take() else {
            state.again = true;
            return;
        };
        let server = self.current(&state.child);
        if test_fault(self.driver.ctx.config.test_hooks, &server) {
            panic!("injected fault on TerdutServer {}", state.child.key());
        }
        let (driver, me) = (self.driver.clone(), myself.clone());
        state.worker = Some(tokio::spawn(async move {
            let pass = AssertUnwindSafe(driver.reconcile(&Parent::Holding, &server, &mut memory));
            let msg = match pass.catch_unwind().await {
                Ok(next) => ServerMsg::PassDone { memory, next },
                Err(panic) => ServerMsg::PassPanicked(
                    panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                        .unwrap_or_default(),
                ),
            };
            let _ = me.send_message(msg);
        }));
    }

    /// Answers the questions held for the first pass, and every later one at once.
    fn answer_held(&self, state: &mut ServerState) {
        for (namespace, reply) in state.held.take().unwrap_or_default() {
            self.answer(state, namespace, reply);
        }
    }

    fn answer(&self, state: &mut ServerState, namespace: String, reply: RpcReplyPort<Access>) {
        state.answered = true;
        let consent = consent_from_caches(&self.driver.ctx, state.child.key(), &namespace);
        let _ = reply.send(Access {
            consent,
            credentials: state.credentials.clone(),
        });
    }

    /// Takes what the pass published for the children; when it changed, the children told
    /// something else are nudged (they would otherwise wait for their backoff to see it).
    fn publish(&self, state: &mut ServerState, memory: &Memory<Server>) {
        let Some(published) = &memory.kind.published else {
            return;
        };
        state.credentials = published.credentials.clone();
        if state.published.as_ref() != Some(&published.fingerprint) {
            debug!(server = %state.child.key(), "published new credentials");
            state.published = Some(published.fingerprint.clone());
            if std::mem::take(&mut state.answered) {
                state.children.handle(ChildrenMsg::NudgeAll);
            }
        }
    }
}
