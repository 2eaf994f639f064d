//! How a [`KeyedSupervisor`](super::KeyedSupervisor) makes and talks to one kind of child.
//!
//! The supervisor is generic; the per-kind code (server, team, alert source) implements
//! [`ChildFactory`] and receives a [`ChildContext`] in every incarnation.

use std::sync::Arc;

use ractor::Actor;
use tokio::sync::watch;

use super::coalesce::{MailboxDepth, PendingFlag};
use crate::key::ObjectKey;

/// The message type of a factory's child actor.
pub type ChildMsg<F> = <<F as ChildFactory>::Child as Actor>::Msg;

/// Builds and describes the children of one supervisor.
///
/// Contract for the child actor:
/// - `pre_start` runs on a task of its own (the supervisor does not wait for it) but should
///   still only build state: a failing `pre_start` is retried with backoff like a crash.
/// - At the top of every `handle`, call [`ChildContext::message_received`]; when handling the
///   [`nudge`](Self::nudge), call [`ChildContext::nudge_received`] *before* reading
///   [`ChildContext::spec`]. This keeps the mailbox-depth gauge right and the nudges coalesced.
/// - Return `Err` (or panic) only when a restart is wanted; handle expected errors (a 409, a
///   5xx) inside and re-arm a timer instead.
pub trait ChildFactory: Send + Sync + 'static {
    /// The child actor.
    type Child: Actor;

    /// The desired state of one object. Equality must mean "the object did not change"
    /// (e.g. compare `metadata.generation` and the spec, not `resourceVersion`): an
    /// [`Ensure`](super::SupervisorMsg::Ensure) with an unequal spec resets a backing-off or
    /// crash-looping child and starts it at once.
    type Spec: Clone + PartialEq + Send + Sync + 'static;

    /// The `kind` label of metrics and logs, e.g. `"server"`.
    fn kind(&self) -> &'static str;

    /// A fresh actor and its arguments for one incarnation; called on every (re)start.
    fn build(
        &self,
        ctx: ChildContext<Self::Spec>,
    ) -> (Self::Child, <Self::Child as Actor>::Arguments);

    /// The data-less message that makes a running child re-read [`ChildContext::spec`] and
    /// reconcile. The supervisor queues one as the first message of every incarnation and
    /// then, coalesced, one per `Ensure`: a child needs no separate "initial reconcile" path.
    fn nudge(&self) -> ChildMsg<Self>;

    /// Called once each time a child is parked as crash-looping, with its last error. Runs
    /// inside the supervisor's handler: must not block; send a message or spawn a task to
    /// write the CR condition and Event.
    fn on_crash_loop(&self, key: &ObjectKey, last_error: &str);
}

/// What a passivated child leaves with its entry for its next incarnation: the memory a pass
/// would otherwise lose with the actor (e.g. the id it last converged, which is how it tells
/// that the server lost its data). Opaque to the host.
pub type Keepsake = Box<dyn std::any::Any + Send + Sync>;

/// How a child tells its host that it converged and has nothing due until an instant.
pub type IdleReport = Arc<dyn Fn(tokio::time::Instant, Keepsake) + Send + Sync>;

/// How a child started from the wake queue gives its place back (ADR 0011).
pub type PlaceReport = Arc<dyn Fn() + Send + Sync>;

/// What one child incarnation gets from its supervisor.
#[derive(Clone)]
pub struct ChildContext<S> {
    key: ObjectKey,
    incarnation: u64,
    spec: watch::Receiver<S>,
    mailbox: MailboxDepth,
    pending: PendingFlag,
    idle: IdleReport,
    /// Set while this incarnation holds a place in its table's wake budget.
    place: Arc<std::sync::atomic::AtomicBool>,
    release: PlaceReport,
    /// What the previous incarnation left when it was passivated; taken once.
    keepsake: Arc<std::sync::Mutex<Option<Keepsake>>>,
    /// `actor_dispatch_seconds{kind}`.
    dispatch: prometheus_client::metrics::histogram::Histogram,
}

impl<S> std::fmt::Debug for ChildContext<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildContext")
            .field("key", &self.key)
            .field("incarnation", &self.incarnation)
            .finish_non_exhaustive()
    }
}

/// How one incarnation is tied to its table: its mailbox accounting, its nudge flag, where it
/// reports idleness, what a passivated predecessor left, where dispatch times go.
pub(super) struct Links {
    pub mailbox: MailboxDepth,
    pub pending: PendingFlag,
    pub idle: IdleReport,
    /// Started from the wake queue: it holds a place until it releases it, stops, or
    /// holds it for `wake_hold`.
    pub place: bool,
    pub release: PlaceReport,
    pub keepsake: Option<Keepsake>,
    pub dispatch: prometheus_client::metrics::histogram::Histogram,
}

impl<S: Clone> ChildContext<S> {
    pub(super) fn new(
        key: ObjectKey,
        incarnation: u64,
        spec: watch::Receiver<S>,
        links: Links,
    ) -> Self {
        Self {
            key,
            incarnation,
            spec,
            mailbox: links.mailbox,
            pending: links.pending,
            idle: links.idle,
            place: Arc::new(std::sync::atomic::AtomicBool::new(links.place)),
            release: links.release,
            keepsake: Arc::new(std::sync::Mutex::new(links.keepsake)),
            dispatch: links.dispatch,
        }
    }

    /// The child converged and has nothing due until `due`: its host may stop it and keep
    /// only its entry and `keepsake` (passivation). Nothing happens if a nudge is queued
    /// meanwhile; the child keeps running with its own copy.
    pub fn report_idle(&self, due: tokio::time::Instant, keepsake: Keepsake) {
        (self.idle)(due, keepsake);
    }

    /// Call when a pass is done and the child does not go idle right after (it has work due
    /// soon, or nothing to reconcile): a place it holds in its table's wake budget goes back,
    /// so the queue moves on (ADR 0011). Only the first call of an incarnation started from
    /// the queue sends anything.
    pub fn release_place(&self) {
        if self.place.swap(false, std::sync::atomic::Ordering::Relaxed) {
            (self.release)();
        }
    }

    /// What the previous incarnation left when it was passivated, if it was and left a `T`
    /// (a restart after a failure starts from nothing).
    pub fn take_keepsake<T: 'static>(&self) -> Option<T> {
        let taken = self.keepsake.lock().ok()?.take()?;
        taken.downcast::<T>().ok().map(|b| *b)
    }

    /// The object this child owns.
    pub fn key(&self) -> &ObjectKey {
        &self.key
    }

    /// Unique per start of any child of this supervisor; useful in logs.
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// The latest desired spec. Updated by every `Ensure`, before the nudge is sent, and kept
    /// across restarts, so a restarted child starts from the newest spec.
    pub fn spec(&self) -> S {
        self.spec.borrow().clone()
    }

    /// Call first in every `handle`: one message left the mailbox.
    pub fn message_received(&self) {
        self.mailbox.handled();
    }

    /// Call when handling the nudge, before reading the spec: later `Ensure`s nudge again.
    pub fn nudge_received(&self) {
        if let Some(took) = self.pending.clear() {
            self.dispatch.observe(took.as_secs_f64());
        }
    }
}
