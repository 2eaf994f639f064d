//! How a [`KeyedSupervisor`](super::KeyedSupervisor) makes and talks to one kind of child.
//!
//! The supervisor is generic; the per-kind code (server, team, alert source) implements
//! [`ChildFactory`] and receives a [`ChildContext`] in every incarnation.

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

/// What one child incarnation gets from its supervisor.
#[derive(Clone, Debug)]
pub struct ChildContext<S> {
    key: ObjectKey,
    incarnation: u64,
    spec: watch::Receiver<S>,
    mailbox: MailboxDepth,
    pending: PendingFlag,
}

impl<S: Clone> ChildContext<S> {
    pub(super) fn new(
        key: ObjectKey,
        incarnation: u64,
        spec: watch::Receiver<S>,
        mailbox: MailboxDepth,
        pending: PendingFlag,
    ) -> Self {
        Self {
            key,
            incarnation,
            spec,
            mailbox,
            pending,
        }
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
        self.pending.clear();
    }
}
