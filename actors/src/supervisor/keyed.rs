//! The keyed supervisor actor: thin dispatch from messages and supervision events to
//! [`SupervisorState`].

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use std::fmt;
use std::sync::Arc;

use super::config::SupervisorConfig;
use super::factory::ChildFactory;
use super::messages::SupervisorMsg;
use super::state::SupervisorState;
use crate::runtime::faults::FaultPoint;

/// Supervises one child actor per [`ObjectKey`](crate::key::ObjectKey), built by `F`.
///
/// Restarts a failed child after an exponential, jittered backoff; parks it as crash-looping
/// past the intensity limit; never stops because a child did (ractor's default
/// `handle_supervisor_evt` would). Spawn it with `Actor::spawn` or, under a root supervisor,
/// `Actor::spawn_linked`; its `Arguments` are `()`.
///
/// ```no_run
/// # use terdut_actors::supervisor::*;
/// # async fn demo<F: ChildFactory>(factory: F, key: terdut_actors::key::ObjectKey, spec: F::Spec)
/// # -> Result<(), Box<dyn std::error::Error>> {
/// use ractor::Actor;
/// let sup = KeyedSupervisor::new(factory, SupervisorConfig::default());
/// let (sup, _handle) = Actor::spawn(None, sup, ()).await?;
/// sup.cast(SupervisorMsg::Ensure(key, spec))?;
/// let state = snapshot(&sup, std::time::Duration::from_secs(5)).await?;
/// # Ok(()) }
/// ```
pub struct KeyedSupervisor<F: ChildFactory> {
    factory: Arc<F>,
    config: SupervisorConfig,
    /// Test hooks only: where an armed fault meets the supervisor (docs/adr/0017-liveness.md).
    fault: FaultPoint,
}

impl<F: ChildFactory> KeyedSupervisor<F> {
    /// A supervisor for the children `factory` builds.
    pub fn new(factory: F, config: SupervisorConfig) -> Self {
        Self {
            factory: Arc::new(factory),
            config,
            fault: FaultPoint::default(),
        }
    }

    /// The same, meeting the faults the test hooks arm at `fault`.
    pub fn with_fault_point(self, fault: FaultPoint) -> Self {
        Self { fault, ..self }
    }
}

impl<F: ChildFactory> fmt::Debug for KeyedSupervisor<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedSupervisor")
            .field("kind", &self.factory.kind())
            .field("config", &self.config)
            .finish()
    }
}

impl<F: ChildFactory> Actor for KeyedSupervisor<F> {
    type Msg = SupervisorMsg<F>;
    type State = SupervisorState<F>;
    type Arguments = ();

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        _args: (),
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(SupervisorState::new(
            Arc::clone(&self.factory),
            self.config.clone(),
        ))
    }

    /// Never returns `Err`: a supervisor that failed would take every child down with it
    /// (the operator restarts the root if it panics, `supervisor/part.rs`).
    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if self.fault.reached().await {
            // Without a reason: as an actor that stopped on its own (the test hook's `end`).
            myself.stop(None);
        }
        state.handle(&myself, msg);
        Ok(())
    }

    /// Overridden because the default stops the supervisor when any child exits.
    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.supervision(&myself, &event);
        Ok(())
    }

    async fn post_stop(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.shut_down();
        myself
            .stop_children_and_wait(
                Some("supervisor stopping".to_owned()),
                Some(self.config.shutdown_timeout),
            )
            .await;
        Ok(())
    }
}
