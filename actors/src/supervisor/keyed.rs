//! The keyed supervisor actor: thin dispatch from messages and supervision events to
//! [`SupervisorState`].

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use rand::SeedableRng;
use rand::rngs::StdRng;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::factory::ChildFactory;
use super::messages::SupervisorMsg;
use super::metrics::SupervisorMetrics;
use super::restart_policy::RestartPolicy;
use super::state::SupervisorState;
use crate::clock::{Clock, SystemClock};

/// Settings of one keyed supervisor.
#[derive(Clone, Debug)]
pub struct SupervisorConfig {
    /// Backoff, stability reset and intensity limit.
    pub policy: RestartPolicy,
    /// Monotonic time for backoff bookkeeping (timers themselves use tokio time).
    pub clock: Arc<dyn Clock>,
    /// Where `actor_*{kind}` series go.
    pub metrics: SupervisorMetrics,
    /// Seed for the jitter RNG; `None` seeds from the OS. Tests set it for repeatability.
    pub jitter_seed: Option<u64>,
    /// How long a stopping supervisor waits for its children to stop before ractor kills them.
    pub shutdown_timeout: Duration,
}

impl Default for SupervisorConfig {
    fn default() -> Self {
        Self {
            policy: RestartPolicy::default(),
            clock: Arc::new(SystemClock),
            metrics: SupervisorMetrics::default(),
            jitter_seed: None,
            shutdown_timeout: Duration::from_secs(10),
        }
    }
}

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
}

impl<F: ChildFactory> KeyedSupervisor<F> {
    /// A supervisor for the children `factory` builds.
    pub fn new(factory: F, config: SupervisorConfig) -> Self {
        Self {
            factory: Arc::new(factory),
            config,
        }
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
        let rng = match self.config.jitter_seed {
            Some(seed) => StdRng::seed_from_u64(seed),
            None => StdRng::from_os_rng(),
        };
        Ok(SupervisorState::new(
            Arc::clone(&self.factory),
            self.config.clone(),
            rng,
        ))
    }

    /// Never returns `Err`: a supervisor that failed would take every child down with it.
    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SupervisorMsg::Ensure(key, spec) => state.ensure(&myself, key, spec),
            SupervisorMsg::Remove(key) => state.remove(&key),
            SupervisorMsg::Reset(key) => state.reset(&myself, &key),
            SupervisorMsg::Forward(key, msg) => state.forward(&key, msg),
            SupervisorMsg::RestartDue { key, incarnation } => {
                state.restart_due(&myself, &key, incarnation)
            }
            SupervisorMsg::StartFailed {
                key,
                incarnation,
                error,
            } => state.failed(&myself, &key, incarnation, format!("pre_start: {error}")),
            SupervisorMsg::Snapshot(reply) => {
                // The caller may have timed out and gone; nothing to do then.
                let _ = reply.send(state.snapshot());
            }
        }
        Ok(())
    }

    /// Overridden because the default stops the supervisor when any child exits.
    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, error) = match event {
            SupervisionEvent::ActorFailed(cell, err) => (cell, err.to_string()),
            // Children we stop are forgotten before they terminate, so a termination we still
            // track was not asked for: treat it as a failure.
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                let reason = reason.unwrap_or_else(|| "no reason".to_owned());
                (cell, format!("stopped unexpectedly: {reason}"))
            }
            _ => return Ok(()),
        };
        if let Some((key, incarnation)) = state.child_of(cell.get_id()) {
            state.failed(&myself, &key, incarnation, error);
        }
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
