//! One pipeline for every kind: observe → plan (pure) → apply → status (pure); and deletion,
//! a pure plan per kind that the driver carries out ([`deletion`]).
//!
//! Each kind (`server/`, `team/`, `source/`, each with the same file names) implements
//! [`Pipeline`]; [`driver::Driver`] runs it the same way for all three and owns what is not
//! the kind's business: deletion versus convergence, pause, timing and metrics, the failure
//! streak (one warning per streak), the Ready announcement (once per reason), the status
//! write (`write::status`), and when the next pass is due ([`Next`]); and the two controls
//! every kind has the same way (docs/design.md §5 "Pause", "Management"): the pause
//! annotation (no writes at all) and `spec.management: ObserveOnly` (observe and plan, write
//! only the status with the plan in it). What drives the driver
//! (an actor of the tree, or kube-runtime's `Controller` in the benchmark) only keeps
//! [`driver::Memory`] between passes and arms a timer with the delay it returns.

pub mod deletion;
pub mod driver;
pub mod next;

use std::future::Future;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

pub use deletion::{Deletion, Note, Step, Then};
pub use driver::{Driver, Keepsake, Memory};
pub use next::{Next, Streak};

use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::kind::Kind;
use crate::runtime::events::EventType;
use crate::tree::Parent;
use crate::write::Managed;
use crate::write::shared::PausedBy;

pub use crate::names::PAUSE_ANNOTATION;

/// Whether `object`'s own annotation pauses it.
pub fn paused_by_annotation<K: kube::Resource>(object: &K) -> bool {
    object
        .meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(PAUSE_ANNOTATION))
        .map(String::as_str)
        == Some("true")
}

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

/// What observing found: go on to plan and apply it, or end the pass here with its outcome
/// (nothing may or can be done on the server: an invalid spec, a server that refuses the
/// namespace or cannot be reached). An ended pass plans nothing, holds no finalizer and
/// applies nothing; its status comes from the outcome as an applied one's does.
#[derive(Debug)]
pub enum Observation<O, A> {
    Go(O),
    End(A),
}

/// One kind's steps. The driver calls them in order; `observe` and `apply` do IO, `plan` and
/// `status` are pure and unit-tested on their own.
pub trait Pipeline: Send + Sync + 'static {
    /// The custom resource.
    type Object: Managed + Send + Sync + 'static;
    /// What the kind keeps between passes of one object (beyond the driver's streaks).
    type Memory: Default + Clone + Send + Sync + 'static;
    /// What observing found when the pass goes on (IO done).
    type Observed: Send;
    /// What to do, decided without IO.
    type Plan: std::fmt::Debug + Send;
    /// What applying did, or the outcome of a pass that observing ended.
    type Applied: Send;
    /// The status the object should have, without timestamps.
    type Desired: Send + Sync;
    /// How an object of the kind is deleted (`deletion.rs`); the driver runs it.
    type Deletion: Deletion<Object = Self::Object, Memory = Self::Memory, Desired = Self::Desired>;

    const KIND: Kind = <Self::Object as Managed>::KIND;

    /// Reads what the plan decides from: caches, the server, the parent's answers; or ends
    /// the pass with its outcome.
    #[allow(clippy::type_complexity)]
    fn observe<'a>(
        &'a self,
        pass: Pass<'a>,
        object: &'a Self::Object,
        memory: &'a mut Self::Memory,
    ) -> impl Future<Output = Result<Observation<Self::Observed, Self::Applied>, ReconcileError>>
    + Send
    + 'a;

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

    /// PURE: the status after a pass that failed with `error`; `None` (the default) leaves
    /// the status as it is (the error is in the logs, metrics and retry).
    fn failed(_object: &Self::Object, _error: &ReconcileError) -> Option<Self::Desired> {
        None
    }

    /// What pauses the object besides its own annotation (an alert source: its team's).
    fn paused_by(_ctx: &Ctx, _object: &Self::Object) -> Option<PausedBy> {
        None
    }

    /// What a paused or `ObserveOnly` pass still does, writing nothing (a server refreshes
    /// the client its children ask for); `observed` is this pass's observation, if it made one.
    fn read_only<'a>(
        &'a self,
        _pass: Pass<'a>,
        _object: &'a Self::Object,
        _observed: Option<&'a Self::Observed>,
        _memory: &'a mut Self::Memory,
    ) -> impl Future<Output = ()> + Send + 'a {
        async {}
    }

    /// PURE: whether applying what was observed may create something on the server: the
    /// driver then adds the kind's finalizer ([`Deletion::FINALIZER`]) first, so that nothing
    /// exists there that deleting the object would not remove (docs/design.md §5
    /// "Finalizers"). A pass that observing let go on may, unless the kind says otherwise
    /// (a team the adoption guard declined); a kind without a finalizer holds nothing anyway.
    fn holds(_observed: &Self::Observed) -> bool {
        true
    }

    /// PURE: the changes `plan` would make, one short line each, never a secret; `None` when
    /// nothing could be planned (a server's spec that cannot be planned).
    fn changes(
        object: &Self::Object,
        observed: &Self::Observed,
        plan: &Self::Plan,
    ) -> Option<Vec<String>>;

    /// PURE: the status of an `ObserveOnly` pass that planned `plan` (`changes` in words) and
    /// made none of it.
    fn planned(
        object: &Self::Object,
        observed: &Self::Observed,
        plan: &Self::Plan,
        changes: Option<&[String]>,
        memory: &Self::Memory,
    ) -> Verdict<Self::Desired>;

    /// PURE: whether applying made the planned changes (they then show as `lastApplied`).
    fn completed(applied: &Self::Applied) -> bool;

    /// PURE: the status patch, `None` when `desired` shows nothing new over `current`.
    fn patch(
        current: Option<&<Self::Object as Managed>::Status>,
        desired: &Self::Desired,
        now: Time,
    ) -> Option<serde_json::Value>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use terdut_crds::v1alpha1::TerdutTeam;

    #[test]
    fn only_the_value_true_pauses() {
        let mut team: TerdutTeam = serde_json::from_value(serde_json::json!({
            "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutTeam",
            "metadata": {"name": "t"},
            "spec": {"serverRef": {"name": "s"}, "displayName": "T"},
        }))
        .unwrap();
        assert!(!paused_by_annotation(&team));
        for (value, paused) in [("false", false), ("yes", false), ("true", true)] {
            team.metadata.annotations =
                Some([(PAUSE_ANNOTATION.to_owned(), value.to_owned())].into());
            assert_eq!(paused_by_annotation(&team), paused, "{value}");
        }
    }
}
