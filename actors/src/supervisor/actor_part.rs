//! A host actor as a [`Part`]: the root supervisor and the holding host, which ractor alone
//! would not restart (docs/adr/0017-liveness.md).
//!
//! Each incarnation is spawned linked to a witness, an actor with no work of its own, so its
//! end reaches the loop as ractor reports it: a panic in a handler (`ActorFailed`, with the
//! message) or a stop nobody asked for. ractor kills the failed actor's children with it
//! (a server actor's teams and sources too); the next incarnation adopts them again.
//! [`Current`] always names the incarnation that runs, for whoever sends to it.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::sync::{oneshot, watch};

use super::part::{Incarnation, Part};
use crate::runtime::faults::Faults;

/// The running incarnation of a restartable actor; clones share it.
#[derive(Debug)]
pub struct Current<T>(Arc<watch::Sender<T>>);

impl<T> Clone for Current<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<T: Clone> Current<T> {
    pub fn new(value: T) -> Self {
        Self(Arc::new(watch::channel(value).0))
    }

    pub fn get(&self) -> T {
        self.0.borrow().clone()
    }

    pub fn set(&self, value: T) {
        self.0.send_replace(value);
    }

    /// Waits until the value satisfies `ready`.
    pub async fn wait_for(&self, ready: impl FnMut(&T) -> bool) {
        let mut rx = self.0.subscribe();
        // The sender lives in `self`, so the channel cannot close under us.
        let _ = rx.wait_for(ready).await;
    }
}

/// Builds each incarnation of an actor part, and tells the world about a new one.
pub trait ActorSpec: Send + 'static {
    type Actor: Actor<Arguments = ()>;

    /// The actor of the next incarnation.
    fn build(&mut self) -> Self::Actor;

    /// Right after it started: publish it, ask the writer for its children.
    fn started(&mut self, actor: &ActorRef<<Self::Actor as Actor>::Msg>);

    /// A message that only makes it handle one (so it meets an armed fault).
    fn poke(&self, actor: &ActorRef<<Self::Actor as Actor>::Msg>);
}

/// A restartable actor: spawned by [`ActorSpec::build`], restarted by the part loop.
pub struct ActorPart<S: ActorSpec> {
    name: String,
    spec: S,
    faults: Faults,
    shutdown_timeout: Duration,
    running: Option<ActorRef<<S::Actor as Actor>::Msg>>,
}

impl<S: ActorSpec> std::fmt::Debug for ActorPart<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActorPart")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<S: ActorSpec> ActorPart<S> {
    pub fn new(name: &str, spec: S, faults: Faults, shutdown_timeout: Duration) -> Self {
        Self {
            name: name.to_owned(),
            spec,
            faults,
            shutdown_timeout,
            running: None,
        }
    }
}

impl<S: ActorSpec> Part for ActorPart<S> {
    fn name(&self) -> &str {
        &self.name
    }

    fn meets_faults_itself(&self) -> bool {
        true
    }

    fn run(&mut self) -> Incarnation<'_> {
        Box::pin(async move {
            let (tx, ended) = oneshot::channel();
            let (witness, _) = Actor::spawn(None, Witness, Some(tx))
                .await
                .map_err(|e| format!("its witness did not start: {e}"))?;
            let actor = self.spec.build();
            let started = Actor::spawn_linked(None, actor, (), witness.get_cell()).await;
            let (actor, _) = match started {
                Ok(started) => started,
                Err(e) => {
                    witness.stop(None);
                    return Err(format!("it did not start: {e}"));
                }
            };
            self.running = Some(actor.clone());
            self.spec.started(&actor);
            let mut ended = std::pin::pin!(ended);
            let ended = tokio::select! {
                ended = &mut ended => ended,
                _ = self.faults.armed(&self.name) => {
                    // It meets the fault in its handler: give it a message to handle.
                    self.spec.poke(&actor);
                    ended.await
                }
            };
            let ended =
                ended.unwrap_or_else(|_| End::Stopped(Some("its witness went away".into())));
            witness.stop(None);
            self.running = None;
            match ended {
                // Its handlers never return an error, so a failure is a panic in one (ractor
                // caught it in the actor's task): raised again here, the part loop records it
                // as the panic it was. `resume_unwind` runs no panic hook: logged once.
                End::Panicked(why) => std::panic::resume_unwind(Box::new(why)),
                End::Stopped(Some(why)) => Err(why),
                End::Stopped(None) => Ok(()),
            }
        })
    }

    fn stop(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if let Some(actor) = self.running.take() {
                let stopped = actor
                    .stop_and_wait(
                        Some("operator stopping".into()),
                        Some(self.shutdown_timeout + Duration::from_secs(5)),
                    )
                    .await;
                if stopped.is_err() {
                    // A stalled actor never takes its stop: end it, and its children with it.
                    actor.kill();
                }
            }
        })
    }
}

/// How an actor part's incarnation ended, as its witness saw it.
#[derive(Debug)]
enum End {
    /// ractor reported it failed: a panic in a handler, with the panic's message.
    Panicked(String),
    /// It stopped, with the reason it gave (`None`: none, as an actor that ends on its own).
    Stopped(Option<String>),
}

/// Linked above an actor part's incarnation: reports how it ended, then stops.
#[derive(Debug)]
struct Witness;

impl Actor for Witness {
    type Msg = ();
    type State = Option<oneshot::Sender<End>>;
    type Arguments = Option<oneshot::Sender<End>>;

    async fn pre_start(
        &self,
        _: ActorRef<()>,
        tx: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(tx)
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<()>,
        event: SupervisionEvent,
        tx: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let end = match event {
            SupervisionEvent::ActorFailed(_, err) => End::Panicked(err.to_string()),
            SupervisionEvent::ActorTerminated(_, _, reason) => End::Stopped(reason),
            _ => return Ok(()),
        };
        if let Some(tx) = tx.take() {
            let _ = tx.send(end);
        }
        myself.stop(None);
        Ok(())
    }
}
