//! The TerdutServer actor: one per TerdutServer (DESIGN §4.1, §6, §7). It owns the server's
//! operator key, its Deployment/Service/PDB and its API client, and answers its children
//! (TerdutTeam and TerdutAlertSource actors) for credentials and consent.
//!
//! Each pass: observe (caches) -> `plan` (pure) -> `apply` (writes) -> status (only when it
//! changed) -> re-arm the resync timer. Expected failures (a 409, a 5xx) are handled here and
//! retried by timer; only a panic or an injected fault restarts the actor through its
//! supervisor.

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use terdut_crds::v1alpha1::TerdutServer;
use terdut_crds::v1alpha1::conditions::{DesiredCondition, READY, find};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use super::apply::{Applied, event, execute};
use super::key::{KeySecretState, OperatorKeyValue, classify_key_secret};
use super::names::Parent;
use super::observe::{Observation, observe};
use super::plan::plan;
use super::status::{DesiredStatus, reasons, status_patch};
use crate::api::{ApiError, ClientConfig, OperatorKey, TerdutClient};
use crate::consent::{Consent, decide};
use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::key::ObjectKey;
use crate::pacing::{jittered, retry_delay};
use crate::supervisor::{ChildContext, ChildFactory, ChildMsg};

/// Annotation that makes the actor panic when the operator runs with test hooks on; how tests
/// prove per-object isolation (issue 4). Ignored otherwise.
pub const TEST_FAULT_ANNOTATION: &str = "terdut.ryuvia.com/test-fault";

/// Messages a server actor handles.
pub enum ServerMsg {
    /// Reconcile now (the supervisor's coalesced nudge).
    Reconcile,
    /// The periodic resync or a retry timer fired.
    Resync,
    /// A child asks for the API client of this server.
    Credentials(RpcReplyPort<Credentials>),
    /// A child in `namespace` asks whether it may attach (DESIGN §4.6).
    Consent {
        namespace: String,
        reply: RpcReplyPort<Consent>,
    },
}

impl std::fmt::Debug for ServerMsg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Reconcile => f.write_str("Reconcile"),
            Self::Resync => f.write_str("Resync"),
            Self::Credentials(_) => f.write_str("Credentials"),
            Self::Consent { namespace, .. } => write!(f, "Consent({namespace})"),
        }
    }
}

/// Whether TerdutServer `key` accepts a team in `team_namespace` (DESIGN §4.6): from the
/// caches alone, so a child can ask without waiting for the server actor's pass; the actor's
/// `Consent` message answers the same.
pub fn consent(ctx: &Ctx, key: &ObjectKey, team_namespace: &str) -> Consent {
    let Some(server) = ctx
        .stores
        .servers
        .get(&ObjectRef::new(&key.name).within(&key.namespace))
    else {
        return Consent::Refused(format!("TerdutServer {key} does not exist"));
    };
    let labels = ctx
        .stores
        .namespaces
        .get(&ObjectRef::new(team_namespace))
        .map(|n| n.metadata.labels.clone().unwrap_or_default());
    decide(
        &key.namespace,
        &key.name,
        &server.spec.allowed_teams,
        team_namespace,
        labels.as_ref(),
    )
}

/// The credentials of TerdutServer `key` as its running actor published them (see
/// `Ctx::clients`); `None` when no actor of it is running (none registered, or it stopped or
/// panicked and is being restarted).
pub fn published_credentials(ctx: &Ctx, key: &ObjectKey) -> Option<Credentials> {
    let actor = ctx.servers.get(key).map(|r| r.clone())?;
    if !matches!(actor.get_status(), ractor::ActorStatus::Running) {
        return None;
    }
    Some(match ctx.clients.get(key) {
        Some(c) => c.clone(),
        None => Credentials::NotReady(format!("TerdutServer {key} has no operator key yet")),
    })
}

/// What a child gets when it asks for credentials.
#[derive(Clone, Debug)]
pub enum Credentials {
    /// The server has an operator key; this client carries it.
    Ready(Arc<TerdutClient>),
    /// No usable key yet; the message says why (for the child's WaitingForServer condition).
    NotReady(String),
}

/// The desired state the supervisor hands the actor. Equal when the object did not change in
/// a way that should reset a crash-looping actor: uid, generation and annotations (our own
/// status writes change neither, so they never reset a parked actor).
#[derive(Clone, Debug)]
pub struct ServerSpec(pub Arc<TerdutServer>);

impl PartialEq for ServerSpec {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (&self.0.metadata, &other.0.metadata);
        a.uid == b.uid && a.generation == b.generation && a.annotations == b.annotations
    }
}

/// Builds server actors for the keyed supervisor.
#[derive(Clone, Debug)]
pub struct ServerFactory {
    pub ctx: Ctx,
}

impl ChildFactory for ServerFactory {
    type Child = ServerActor;
    type Spec = ServerSpec;

    fn kind(&self) -> &'static str {
        "server"
    }

    fn build(&self, child: ChildContext<ServerSpec>) -> (ServerActor, ChildContext<ServerSpec>) {
        (
            ServerActor {
                ctx: self.ctx.clone(),
            },
            child,
        )
    }

    fn nudge(&self) -> ChildMsg<Self> {
        ServerMsg::Reconcile
    }

    fn on_crash_loop(&self, key: &ObjectKey, last_error: &str) {
        let (ctx, key, err) = (self.ctx.clone(), key.clone(), last_error.to_owned());
        tokio::spawn(async move {
            crate::crash_loop::report::<TerdutServer>(&ctx, "server", &key, &err).await
        });
    }
}

/// The actor's state for one incarnation.
pub struct ServerState {
    child: ChildContext<ServerSpec>,
    /// The client and the key hash and URL it was built for.
    client: Option<(String, Arc<TerdutClient>)>,
    /// What was last published for the children (see `Ctx::clients`).
    published: Option<Published>,
    timer: Option<JoinHandle<Result<(), ractor::MessagingErr<ServerMsg>>>>,
    /// Consecutive failed passes, for the retry delay.
    failures: u32,
    /// Consecutive passes that ended waiting on something no watch reports (a foreign
    /// object, a missing Secret, a rejected key), for a growing retry delay.
    waits: u32,
    /// Spec warnings are published once per generation, not once per pass.
    warned_generation: Option<i64>,
}

/// What the children were last told, compared to tell them only of changes.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Published {
    /// A client, by key hash and URL.
    Client(String),
    /// No client; why.
    Wait(String),
}

impl std::fmt::Debug for ServerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerState")
            .field("key", self.child.key())
            .field("has_client", &self.client.is_some())
            .field("failures", &self.failures)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
pub struct ServerActor {
    ctx: Ctx,
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
        self.ctx.servers.insert(child.key().clone(), myself);
        // A new incarnation hands out no client until its first pass built one.
        self.ctx.clients.remove(child.key());
        Ok(ServerState {
            child,
            client: None,
            published: None,
            timer: None,
            failures: 0,
            waits: 0,
            warned_generation: None,
        })
    }

    async fn post_stop(
        &self,
        myself: ActorRef<ServerMsg>,
        state: &mut ServerState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(t) = state.timer.take() {
            t.abort();
        }
        if self
            .ctx
            .servers
            .remove_if(state.child.key(), |_, r| r.get_id() == myself.get_id())
            .is_some()
        {
            self.ctx.clients.remove(state.child.key());
        }
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
                // Boxed for the same reason as the team and source passes: an inline handler
                // future would size every idle actor's processing loop (docs/performance.md).
                Box::pin(self.reconcile(&myself, state)).await
            }
            ServerMsg::Resync => Box::pin(self.reconcile(&myself, state)).await,
            ServerMsg::Credentials(reply) => {
                let answer = match &state.client {
                    Some((_, c)) => Credentials::Ready(c.clone()),
                    None => Credentials::NotReady(format!(
                        "TerdutServer {} has no operator key yet",
                        state.child.key()
                    )),
                };
                let _ = reply.send(answer);
                Ok(())
            }
            ServerMsg::Consent { namespace, reply } => {
                let _ = reply.send(consent(&self.ctx, state.child.key(), &namespace));
                Ok(())
            }
        }
    }
}

impl ServerActor {
    /// The newest copy of the object: the cache, else what the supervisor last handed over.
    fn current(&self, child: &ChildContext<ServerSpec>) -> Arc<TerdutServer> {
        let key = child.key();
        self.ctx
            .stores
            .servers
            .get(&ObjectRef::new(&key.name).within(&key.namespace))
            .unwrap_or_else(|| child.spec().0)
    }

    async fn reconcile(
        &self,
        myself: &ActorRef<ServerMsg>,
        state: &mut ServerState,
    ) -> Result<(), ActorProcessingErr> {
        let server = self.current(&state.child);
        if self.ctx.config.test_hooks
            && server
                .annotations()
                .get(TEST_FAULT_ANNOTATION)
                .map(String::as_str)
                == Some("panic")
        {
            panic!("injected fault on TerdutServer {}", state.child.key());
        }
        let started = self.ctx.clock.now();
        let result = self.pass(&server, state).await;
        let took = self.ctx.clock.now() - started;
        let next = match result {
            Ok(requeue) => {
                self.ctx.metrics.reconciled("server", "ok", took);
                state.failures = 0;
                requeue.unwrap_or_else(|| jittered(self.ctx.config.resync))
            }
            Err(e) => {
                self.ctx.metrics.reconciled("server", "error", took);
                self.ctx.metrics.reconcile_error("server", e.category());
                state.failures = state.failures.saturating_add(1);
                // One warn per failure streak, debug after: no error-per-retry floods.
                if state.failures == 1 {
                    warn!(server = %state.child.key(), error = %e, "reconcile failed");
                } else {
                    debug!(server = %state.child.key(), error = %e, attempt = state.failures, "reconcile failed again");
                }
                if e.is_retryable() {
                    retry_delay(state.failures)
                } else {
                    jittered(self.ctx.config.resync)
                }
            }
        };
        if let Some(t) = state.timer.take() {
            t.abort();
        }
        state.timer = Some(myself.send_after(next, || ServerMsg::Resync));
        Ok(())
    }

    /// One pass; `Ok(Some(d))` asks for another pass after `d` (a cache that lags a write).
    async fn pass(
        &self,
        server: &TerdutServer,
        state: &mut ServerState,
    ) -> Result<Option<Duration>, ReconcileError> {
        let key = state.child.key().clone();
        if server.metadata.deletion_timestamp.is_some() {
            // Being deleted (foreground deletion keeps it while the garbage collector removes
            // what it owns): writing now would recreate what GC just deleted (DESIGN §7).
            debug!(server = %key, "being deleted; nothing to do");
            return Ok(Some(jittered(self.ctx.config.resync)));
        }
        let observation = observe(&self.ctx, server).await?;
        let plan = plan(
            server,
            &observation.as_observed(),
            OperatorKeyValue::generate,
        )
        .map_err(|e| ReconcileError::Invalid(e.to_string()))?;
        debug!(server = %key, steps = ?plan.steps, "planned");

        if server.metadata.generation != state.warned_generation {
            for w in &plan.warnings {
                event(
                    &self.ctx,
                    server,
                    EventType::Warning,
                    w.reason(),
                    "Validate",
                    w.to_string(),
                )
                .await;
            }
            state.warned_generation = server.metadata.generation;
        }

        let mut requeue = None;
        let mut failure = None;
        for step in &plan.steps {
            match execute(&self.ctx, server, step).await {
                Ok(Applied::Done) => {}
                Ok(Applied::KeySecretRaced) => {
                    requeue = Some(Duration::from_secs(1));
                    break;
                }
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        if !plan.steps.is_empty() && failure.is_none() {
            info!(server = %key, steps = ?plan.steps, "applied");
        }

        let mut desired = plan.status.clone();
        if let Some(e) = &failure {
            desired.ready = DesiredCondition::ready(false, reasons::APPLY_FAILED, e.to_string())
                .at_generation(server.metadata.generation);
        }
        // The client first: a failed status write below must not withhold it from the teams.
        let key_check = self.refresh_client(server, &observation, state).await;
        desired.key_accepted = Some(key_check.condition(server.metadata.generation));
        self.announce(server, &desired).await;
        if let Some(patch) =
            status_patch(server.status.as_ref(), &desired, self.ctx.clock.k8s_now())
        {
            let api: Api<TerdutServer> = Api::namespaced(self.ctx.kube.clone(), &key.namespace);
            self.ctx.metrics.kube_write("server", "status");
            api.patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| {
                    ReconcileError::kube("patch status of", format!("TerdutServer {key}"), e)
                })?;
        }
        if let Some(e) = failure {
            return Err(e);
        }
        // Waiting on something no watch reports: look again soon, then less often.
        let waiting =
            reasons::POLLED.contains(&desired.ready.reason.as_str()) || !key_check.accepted();
        if waiting {
            state.waits = state.waits.saturating_add(1);
            return Ok(Some(requeue.unwrap_or_else(|| retry_delay(state.waits))));
        }
        state.waits = 0;
        Ok(requeue)
    }

    /// A Warning when the Ready reason changes to one that needs someone to act (a foreign
    /// object in the way, a missing Secret, a failed write, a stalled rollout, ...): once per
    /// streak, since an unchanged reason is not announced again.
    async fn announce(&self, server: &TerdutServer, desired: &DesiredStatus) {
        let want = &desired.ready;
        if want.status || !reasons::ANNOUNCED.contains(&want.reason.as_str()) {
            return;
        }
        let current = server
            .status
            .as_ref()
            .and_then(|s| find(&s.conditions, READY))
            .map(|c| c.reason.as_str());
        if current == Some(want.reason.as_str()) {
            return;
        }
        warn!(server = %ObjectKey::of(server), reason = %want.reason, message = %want.message, "not ready");
        event(
            &self.ctx,
            server,
            EventType::Warning,
            &want.reason,
            "Reconcile",
            want.message.clone(),
        )
        .await;
    }

    /// Builds (or rebuilds, when the key or URL changed) the API client from the key Secret
    /// this server controls (never from a Secret of that name someone else made: DESIGN §1),
    /// asks the server whether it accepts the key (`whoami`, DESIGN §6), and publishes what the
    /// children may use: the client, or why they wait.
    async fn refresh_client(
        &self,
        server: &TerdutServer,
        observation: &Observation,
        state: &mut ServerState,
    ) -> KeyCheck {
        let key = state.child.key().clone();
        let token = Parent::of(server).ok().and_then(|parent| {
            match classify_key_secret(
                &parent,
                observation.key_secret.as_deref(),
                observation.unlisted.key_secret.as_ref(),
            ) {
                KeySecretState::Present(token) => Some(token),
                _ => None,
            }
        });
        let Some(token) = token else {
            state.client = None;
            self.publish(
                &key,
                state,
                Published::Wait(format!("TerdutServer {key} has no operator key yet")),
                None,
            );
            return KeyCheck::NoKey;
        };
        let url = self.ctx.config.server_url(
            &key.name,
            &key.namespace,
            server.spec.networking.service_port,
        );
        let fingerprint = format!("{}@{url}", token.hash());
        if state.client.as_ref().is_none_or(|(f, _)| *f != fingerprint) {
            let config = ClientConfig::new(url, OperatorKey::new(token.expose()))
                .request_timeout(self.ctx.config.api_timeout)
                .metrics(self.ctx.api_metrics.clone());
            match TerdutClient::new(config) {
                Ok(c) => state.client = Some((fingerprint.clone(), Arc::new(c))),
                Err(e) => {
                    warn!(server = %key, error = %e, "could not build the terdut-server client");
                    state.client = None;
                    let why = format!("TerdutServer {key}: the API client could not be built: {e}");
                    self.publish(&key, state, Published::Wait(why.clone()), None);
                    return KeyCheck::Unreachable(why);
                }
            }
        }
        let Some((_, client)) = state.client.clone() else {
            return KeyCheck::NoKey;
        };
        let check = KeyCheck::of(client.whoami().await);
        match &check {
            // Every call of every child would be refused: tell them why, once, here.
            KeyCheck::Rejected(why) => {
                let why = format!(
                    "TerdutServer {key} does not accept the operator key ({why}); see its \
                     KeyAccepted condition"
                );
                self.publish(&key, state, Published::Wait(why), None);
            }
            // Accepted, or not answering: the children use the client (and find out for
            // themselves while it does not answer).
            _ => self.publish(&key, state, Published::Client(fingerprint), Some(client)),
        }
        check
    }

    /// Publishes `what` to the children (`Ctx::clients`); when it changed, tells the wiring,
    /// which nudges the server's teams and alert sources (they would otherwise wait for their
    /// backoff to see it).
    fn publish(
        &self,
        key: &ObjectKey,
        state: &mut ServerState,
        what: Published,
        client: Option<Arc<TerdutClient>>,
    ) {
        let credentials = match (&what, client) {
            (Published::Client(_), Some(c)) => Credentials::Ready(c),
            (Published::Wait(why), _) => Credentials::NotReady(why.clone()),
            (Published::Client(_), None) => {
                Credentials::NotReady(format!("TerdutServer {key} has no operator key yet"))
            }
        };
        self.ctx.clients.insert(key.clone(), credentials);
        let changed = state.published.as_ref() != Some(&what);
        state.published = Some(what);
        if changed && let Some(hooks) = self.ctx.on_server.get() {
            hooks.credentials_changed(key);
        }
    }
}

/// What the server said of the operator key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyCheck {
    Accepted,
    /// 401, or another account: the message says which.
    Rejected(String),
    /// No answer; why.
    Unreachable(String),
    /// No key (or no client) to ask with.
    NoKey,
}

impl KeyCheck {
    /// Reads a `whoami` answer (terdut-api.md "Operator account").
    pub fn of(answer: Result<crate::api::WhoAmI, ApiError>) -> Self {
        match answer {
            Ok(w) if w.account == OPERATOR_ACCOUNT => Self::Accepted,
            Ok(w) => Self::Rejected(format!(
                "the key belongs to account {:?}, not {OPERATOR_ACCOUNT}",
                w.account
            )),
            Err(ApiError::Unauthorized) => Self::Rejected("401 on whoami".into()),
            Err(e) => Self::Unreachable(e.to_string()),
        }
    }

    pub fn accepted(&self) -> bool {
        matches!(self, Self::Accepted)
    }

    /// The `KeyAccepted` condition.
    pub fn condition(&self, generation: Option<i64>) -> DesiredCondition {
        use super::status::key_accepted::{ACCEPTED, KEY_REJECTED, NO_KEY, TYPE, UNREACHABLE};
        let (status, reason, message) = match self {
            Self::Accepted => (
                true,
                ACCEPTED,
                "the server accepts the operator key (whoami answers as terdut-operator)"
                    .to_owned(),
            ),
            Self::Rejected(why) => (
                false,
                KEY_REJECTED,
                format!(
                    "the server refuses the operator key: {why}. Its pods were started with \
                     another key (they roll on their own after a key change; otherwise check \
                     that the image reads TERDUT_OPERATOR_KEY); its teams and alert sources \
                     wait until it accepts the key"
                ),
            ),
            Self::Unreachable(why) => (
                false,
                UNREACHABLE,
                format!("the server did not answer whoami: {why}"),
            ),
            Self::NoKey => (
                false,
                NO_KEY,
                "no operator key to check yet (see Ready)".to_owned(),
            ),
        };
        DesiredCondition {
            type_: TYPE.into(),
            status,
            reason: reason.into(),
            message,
            observed_generation: generation,
        }
    }
}

/// The account the server seeds from `TERDUT_OPERATOR_KEY` (terdut-api.md).
pub const OPERATOR_ACCOUNT: &str = "terdut-operator";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{TransientCause, WhoAmI};

    #[test]
    fn whoami_answers_become_the_key_condition() {
        let who = |account: &str| {
            Ok(WhoAmI {
                account: account.into(),
                scope: "instance".into(),
            })
        };
        assert_eq!(KeyCheck::of(who("terdut-operator")), KeyCheck::Accepted);
        let c = KeyCheck::of(who("alice")).condition(Some(2));
        assert_eq!((c.status, c.reason.as_str()), (false, "KeyRejected"));
        assert!(c.message.contains("alice"), "{}", c.message);
        let c = KeyCheck::of(Err(ApiError::Unauthorized)).condition(None);
        assert_eq!(c.reason, "KeyRejected");
        let down = Err(ApiError::Transient {
            cause: TransientCause::Connect,
            detail: "refused".into(),
        });
        let c = KeyCheck::of(down).condition(None);
        assert_eq!((c.status, c.reason.as_str()), (false, "Unreachable"));
        assert_eq!(c.type_, "KeyAccepted");
        assert!(KeyCheck::Accepted.condition(Some(1)).status);
    }
}
