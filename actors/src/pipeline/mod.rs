//! One pipeline for every kind: observe → plan (pure) → apply → status (pure) → finalize.
//!
//! Each kind (`server/`, `team/`, `source/`, each with the same file names) implements
//! [`Pipeline`]; [`driver::Driver`] runs it the same way for all three and owns what is not
//! the kind's business: deletion versus convergence, pause, timing and metrics, the failure
//! streak (one warning per streak), the Ready announcement (once per reason), the status
//! write (`write::status`), and when the next pass is due ([`Next`]). What drives the driver
//! (an actor of the tree, or kube-runtime's `Controller` in the benchmark) only keeps
//! [`driver::Memory`] between passes and arms a timer with the delay it returns.

pub mod driver;
pub mod next;

use std::future::Future;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

pub use driver::{Driver, Memory};
pub use next::{Next, Streak};

use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::kind::Kind;
use crate::runtime::events::EventType;
use crate::tree::Parent;
use crate::write::Managed;

/// What a pass of one object gets: the shared context and who to ask for the credentials and
/// consent of a server (the actor's parent in the tree).
#[derive(Clone, Copy, Debug)]
pub struct Pass<'a> {
    pub ctx: &'a Ctx,
    pub parent: &'a Parent,
}

/// What a pass decided for the status, when to run again, and what to tell the user.
#[derive(Clone, Debug)]
pub struct Verdict<D> {
    pub desired: D,
    pub next: Next,
    /// An Event for the Ready reason of `desired`, published when the object's current Ready
    /// condition differs from it (see [`Announce`]).
    pub announce: Option<Announce>,
}

impl<D> Verdict<D> {
    pub fn new(desired: D, next: Next) -> Self {
        Self {
            desired,
            next,
            announce: None,
        }
    }

    #[must_use]
    pub fn announce(mut self, announce: Option<Announce>) -> Self {
        self.announce = announce;
        self
    }
}

/// An Event about a (not) Ready reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Announce {
    pub type_: EventType,
    pub reason: String,
    pub message: String,
    /// Also announce when only the message changed under the same reason (a different user
    /// unknown, another foreign object), not only when the reason did.
    pub on_message: bool,
}

/// How a deletion pass ended.
#[derive(Clone, Debug)]
pub enum Finalized<D> {
    /// Nothing on the server is left to clean up (or the finalizer was not there): released.
    Released,
    /// Still waiting; the status to write, if any, and when to look again.
    Waiting { desired: Option<D>, next: Next },
}

/// One kind's steps. The driver calls them in order; `observe` and `apply` do IO, `plan` and
/// `status` are pure and unit-tested on their own.
pub trait Pipeline: Send + Sync + 'static {
    /// The custom resource.
    type Object: Managed + Send + Sync + 'static;
    /// What the kind keeps between passes of one object (beyond the driver's streaks).
    type Memory: Default + Clone + Send + Sync + 'static;
    /// What observing found (IO done).
    type Observed: Send;
    /// What to do, decided without IO.
    type Plan: std::fmt::Debug + Send;
    /// What applying did.
    type Applied: Send;
    /// The status the object should have, without timestamps.
    type Desired: Send + Sync;

    const KIND: Kind;

    /// Reads what the plan decides from: caches, the server, the parent's answers.
    fn observe<'a>(
        &'a self,
        pass: Pass<'a>,
        object: &'a Self::Object,
        memory: &'a mut Self::Memory,
    ) -> impl Future<Output = Result<Self::Observed, ReconcileError>> + Send + 'a;

    /// PURE: what to change, given what was observed.
    fn plan(object: &Self::Object, observed: &Self::Observed) -> Self::Plan;

    /// Carries the plan out; expected refusals are in `Applied`, not errors.
    fn apply<'a>(
        &'a self,
        pass: Pass<'a>,
        object: &'a Self::Object,
        observed: Self::Observed,
        plan: Self::Plan,
        memory: &'a mut Self::Memory,
    ) -> impl Future<Output = Result<Self::Applied, ReconcileError>> + Send + 'a;

    /// PURE: the status after `applied`, and when to look again.
    fn status(object: &Self::Object, applied: &Self::Applied) -> Verdict<Self::Desired>;

    /// PURE: the status after a pass that failed with `error`; `None` leaves the status as it
    /// is (the error is in the logs, metrics and retry).
    fn failed(object: &Self::Object, error: &ReconcileError) -> Option<Self::Desired>;

    /// PURE: the status while the object is paused (docs/configuration.md), or `None` when
    /// it is not paused.
    fn paused(object: &Self::Object) -> Option<Self::Desired>;

    /// PURE: the status patch, `None` when `desired` shows nothing new over `current`.
    fn patch(
        current: Option<&<Self::Object as Managed>::Status>,
        desired: &Self::Desired,
        now: Time,
    ) -> Option<serde_json::Value>;

    /// A pass of an object being deleted.
    fn finalize<'a>(
        &'a self,
        pass: Pass<'a>,
        object: &'a Self::Object,
        memory: &'a mut Self::Memory,
    ) -> impl Future<Output = Result<Finalized<Self::Desired>, ReconcileError>> + Send + 'a;
}
