//! Who hosts a set of keyed children: the keyed supervisor itself, or an actor that hosts
//! children beside its own work (a TerdutServer's actor hosts its teams and alert sources).
//! The children table (`state.rs`) only needs to link children to the host, and to send the
//! host its own supervision messages (restart timers, failed starts, idle children).

use std::time::Duration;

use ractor::{ActorCell, ActorRef};
use tokio::task::AbortHandle;

use super::factory::ChildFactory;
use super::messages::SupervisorMsg;

/// A host of `F`'s children.
pub trait Host<F: ChildFactory>: Clone + Send + Sync + 'static {
    /// The actor children are linked to (their supervisor in ractor's sense).
    fn cell(&self) -> ActorCell;

    /// Delivers `msg` to the host's children table; `false` when the host is gone.
    fn send(&self, msg: SupervisorMsg<F>) -> bool;

    /// Delivers `msg` after `delay`.
    fn send_after(&self, delay: Duration, msg: SupervisorMsg<F>) -> AbortHandle;
}

impl<F: ChildFactory> Host<F> for ActorRef<SupervisorMsg<F>> {
    fn cell(&self) -> ActorCell {
        self.get_cell()
    }

    fn send(&self, msg: SupervisorMsg<F>) -> bool {
        self.send_message(msg).is_ok()
    }

    fn send_after(&self, delay: Duration, msg: SupervisorMsg<F>) -> AbortHandle {
        ActorRef::send_after(self, delay, move || msg).abort_handle()
    }
}

/// An actor of message type `M` hosting `F`'s children: their messages reach it wrapped.
pub struct Wrapped<M: ractor::Message, F: ChildFactory> {
    pub actor: ActorRef<M>,
    pub wrap: fn(SupervisorMsg<F>) -> M,
}

impl<M: ractor::Message, F: ChildFactory> Clone for Wrapped<M, F> {
    fn clone(&self) -> Self {
        Self {
            actor: self.actor.clone(),
            wrap: self.wrap,
        }
    }
}

impl<M: ractor::Message, F: ChildFactory> std::fmt::Debug for Wrapped<M, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wrapped").finish_non_exhaustive()
    }
}

impl<M: ractor::Message, F: ChildFactory> Host<F> for Wrapped<M, F> {
    fn cell(&self) -> ActorCell {
        self.actor.get_cell()
    }

    fn send(&self, msg: SupervisorMsg<F>) -> bool {
        self.actor.send_message((self.wrap)(msg)).is_ok()
    }

    fn send_after(&self, delay: Duration, msg: SupervisorMsg<F>) -> AbortHandle {
        let wrap = self.wrap;
        self.actor
            .send_after(delay, move || wrap(msg))
            .abort_handle()
    }
}
