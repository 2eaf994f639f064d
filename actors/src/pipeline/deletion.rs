//! Deletion, one shape for every kind (docs/design.md §5 "Finalizers", "Deletion policy"): a
//! kind says, PURELY, what its deletion needs next given the object and what this pass has
//! learnt so far ([`Deletion::step`]); the driver does it and asks again, until the plan says
//! to release the finalizer or to wait. The kind's IO ([`Deletion::learn`]) only answers the
//! questions its plan asks: a read, or a call whose answer the plan needs (a lookup, a DELETE
//! on the server, detaching a Secret). The finalizer itself, and the Events and status the
//! plan names, are the driver's (`driver.rs`), so that release has one site.
//!
//! Asking step by step keeps the calls of a pass exactly those the decisions need, in their
//! order: a server is never asked what a cache already answered, and nothing is looked up on
//! a server once the plan knows it releases without a call.

use std::future::Future;
use std::marker::PhantomData;

use super::{Next, Pass};
use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::runtime::events::EventType;
use crate::write::Managed;

/// Every deletion Event's action.
pub const ACTION: &str = "Delete";

/// An Event a deletion pass publishes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    pub type_: EventType,
    pub reason: &'static str,
    pub message: String,
    /// A Warning published once per streak of the same reason (`events::warn_once`, with the
    /// kind's [`Deletion::warned`]), not on every retry.
    pub once: bool,
}

impl Note {
    pub fn normal(reason: &'static str, message: String) -> Self {
        Self {
            type_: EventType::Normal,
            reason,
            message,
            once: false,
        }
    }

    pub fn warning(reason: &'static str, message: String) -> Self {
        Self {
            type_: EventType::Warning,
            reason,
            message,
            once: false,
        }
    }

    pub fn warn_once(reason: &'static str, message: String) -> Self {
        Self {
            once: true,
            ..Self::warning(reason, message)
        }
    }
}

/// What a deletion pass does next, decided from what it knows so far.
#[derive(Debug, PartialEq, Eq)]
pub struct Step<Q, D> {
    /// Events to publish before anything else happens. Cumulative: each step repeats the
    /// notes of the steps before it in this pass, and the driver publishes each one once, as
    /// soon as it is known (before the next question is answered).
    pub notes: Vec<Note>,
    pub then: Then<Q, D>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Then<Q, D> {
    /// Answer this question (IO), then plan again.
    Ask(Q),
    /// Nothing is held: the object no longer carries the finalizer (as read live), or another
    /// pass already released it.
    Gone,
    /// Release the finalizer: nothing of the object is left to clean up on the server, or
    /// nothing could ever be. `after` is published once it is released; `log` is said at info.
    Release {
        after: Vec<Note>,
        log: Option<String>,
    },
    /// Keep the finalizer; write `desired` (if any) and look again after `next`.
    Wait { desired: Option<D>, next: Next },
}

impl<Q, D> Then<Q, D> {
    /// Release with only `after` to say.
    pub fn release(after: Vec<Note>) -> Self {
        Self::Release { after, log: None }
    }

    /// Keep the finalizer, status as it is, with backoff.
    pub fn wait() -> Self {
        Self::Wait {
            desired: None,
            next: Next::Wait,
        }
    }
}

/// One kind's deletion: its finalizer, its PURE plan, and the IO that answers the plan.
pub trait Deletion: Send + Sync + 'static {
    type Object: Managed + Send + Sync + 'static;
    /// The kind's memory (`Pipeline::Memory`).
    type Memory: Send + Sync;
    /// The status a waiting deletion writes (`Pipeline::Desired`).
    type Desired: Send + Sync;
    /// What a deletion pass has learnt so far; empty at its start.
    type Facts: Default + Send;
    /// What the plan asks to learn.
    type Question: std::fmt::Debug + Send;

    /// The finalizer the kind adds before it creates anything on the server; `None` for a
    /// kind that holds none (a deleted object of it is left to garbage collection).
    const FINALIZER: Option<&'static str>;

    /// PURE: what to do next, for an object that carries [`Self::FINALIZER`].
    fn step(
        object: &Self::Object,
        memory: &Self::Memory,
        facts: &Self::Facts,
    ) -> Step<Self::Question, Self::Desired>;

    /// Answers `question` into `facts`.
    fn learn<'a>(
        pass: Pass<'a>,
        object: &'a Self::Object,
        question: Self::Question,
        facts: &'a mut Self::Facts,
        memory: &'a mut Self::Memory,
    ) -> impl Future<Output = Result<(), ReconcileError>> + Send + 'a;

    /// The Event of a deletion pass that failed with `error` (an answer or the release).
    fn failed(_object: &Self::Object, _error: &ReconcileError) -> Option<Note> {
        None
    }

    /// What follows the release, before the `after` notes (a team forgets its record).
    fn released<'a>(
        _ctx: &'a Ctx,
        _object: &'a Self::Object,
    ) -> impl Future<Output = ()> + Send + 'a {
        async {}
    }

    /// Where the kind keeps the reason of the last [`Note::once`] Warning.
    fn warned(_memory: &mut Self::Memory) -> Option<&mut Option<String>> {
        None
    }
}

/// The types a [`NoFinalizer`] is about, held by none of its values.
type Unheld<O, M, D> = fn() -> (O, M, D);

/// The deletion of a kind that holds no finalizer.
#[derive(Debug)]
pub struct NoFinalizer<O, M, D>(PhantomData<Unheld<O, M, D>>);

impl<O, M, D> Deletion for NoFinalizer<O, M, D>
where
    O: Managed + Send + Sync + 'static,
    M: Send + Sync + 'static,
    D: Send + Sync + 'static,
{
    type Object = O;
    type Memory = M;
    type Desired = D;
    type Facts = ();
    type Question = std::convert::Infallible;

    const FINALIZER: Option<&'static str> = None;

    fn step(_: &O, _: &M, _: &()) -> Step<Self::Question, D> {
        Step {
            notes: vec![],
            then: Then::Gone,
        }
    }

    async fn learn<'a>(
        _: Pass<'a>,
        _: &'a O,
        question: Self::Question,
        _: &'a mut (),
        _: &'a mut M,
    ) -> Result<(), ReconcileError> {
        match question {}
    }
}
