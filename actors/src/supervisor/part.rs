//! The supervisor of the leader's long-lived parts, the ones there is one of: the root
//! supervisor, the holding host, the routing writer, each watch, the census
//! (docs/adr/0017-liveness.md). The per-object children have their tables (`state.rs`); these
//! have this loop, with the same [`RestartPolicy`]:
//!
//! - an incarnation that panics (caught), returns, or fails is started again after the
//!   policy's backoff, reset once it has run `stable_after`;
//! - past `max_restarts` within `window` the part is dead for good: [`Health`] says so, and
//!   whoever waits on [`Health::dead`] ends the process (a controller-runtime manager whose
//!   runnable fails stops; so does this one, so that the kubelet starts it again);
//! - every state change is recorded in [`Health`], which `/healthz` reports.
//!
//! What a restart means is the part's business ([`Part::run`] starts one incarnation): a
//! watch starts a fresh watcher over the same cache (a relist), the writer rebuilds its index
//! from the caches, a host actor is spawned again and adopts its children.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use rand::SeedableRng as _;
use rand::rngs::StdRng;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use super::restart_policy::{RestartPolicy, RestartTracker, Verdict};
use crate::clock::Clock;
use crate::runtime::faults::{Fault, Faults};
use crate::runtime::health::{Ended, Health};

/// One incarnation's end: `Ok` when it returned, `Err` with why it failed.
pub type Incarnation<'a> = BoxFuture<'a, Result<(), String>>;

/// A part of the operator that runs for as long as the operator leads.
pub trait Part: Send + 'static {
    /// Its name in `/healthz`, the logs and the test hooks.
    fn name(&self) -> &str;

    /// Starts one incarnation; it runs until it fails (a panic is caught around it).
    fn run(&mut self) -> Incarnation<'_>;

    /// Stops the running incarnation's side effects when the operator stops (an actor
    /// part stops its actor); the incarnation's future is dropped after this.
    fn stop(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    /// `true` when the part meets its faults itself (an actor, in its message handler);
    /// otherwise the loop injects them around [`Part::run`].
    fn meets_faults_itself(&self) -> bool {
        false
    }
}

impl<P: Part + ?Sized> Part for Box<P> {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn run(&mut self) -> Incarnation<'_> {
        (**self).run()
    }

    fn stop(&mut self) -> BoxFuture<'_, ()> {
        (**self).stop()
    }

    fn meets_faults_itself(&self) -> bool {
        (**self).meets_faults_itself()
    }
}

/// A part whose incarnation is a task that should never end: `start` makes a fresh one.
pub struct TaskPart<F> {
    pub name: String,
    pub start: F,
}

impl<F> std::fmt::Debug for TaskPart<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskPart")
            .field("name", &self.name)
            .finish()
    }
}

impl<F> Part for TaskPart<F>
where
    F: FnMut() -> BoxFuture<'static, ()> + Send + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn run(&mut self) -> Incarnation<'_> {
        let task = (self.start)();
        Box::pin(async move {
            task.await;
            Ok(())
        })
    }
}

/// What every part's loop shares.
#[derive(Clone, Debug)]
pub struct PartEnv {
    pub policy: RestartPolicy,
    pub clock: Arc<dyn Clock>,
    pub health: Health,
    pub faults: Faults,
    /// Cancelled when the operator stops: every part stops, none is restarted.
    pub stop: CancellationToken,
}

/// Runs `part` under its restart policy until the operator stops or the part is dead for
/// good. Spawn it: it returns only then.
pub async fn supervise(mut part: impl Part, env: PartEnv) {
    let name = part.name().to_owned();
    let mut tracker = RestartTracker::default();
    let mut rng = StdRng::from_os_rng();
    loop {
        env.health.up(&name);
        let started = env.clock.now();
        let injected = !part.meets_faults_itself();
        let outcome = {
            let incarnation = with_faults(part.run(), &env.faults, &name, injected);
            let caught = AssertUnwindSafe(incarnation).catch_unwind();
            tokio::select! {
                biased;
                () = env.stop.cancelled() => None,
                outcome = caught => Some(outcome),
            }
        };
        let Some(outcome) = outcome else {
            part.stop().await;
            env.health.stopped(&name);
            return;
        };
        if env.stop.is_cancelled() {
            // It ended because the operator is stopping (a host stopped with the tree).
            env.health.stopped(&name);
            return;
        }
        let (ended, why) = match outcome {
            Ok(Ok(())) => (Ended::Returned, "it returned".to_owned()),
            Ok(Err(why)) => (Ended::Failed, why),
            Err(panic) => (Ended::Panicked, panic_message(panic.as_ref())),
        };
        let now = env.clock.now();
        match tracker.on_failure(&env.policy, started.into_std(), now.into_std(), &mut rng) {
            Verdict::Restart(delay) => {
                warn!(part = %name, ended = ?ended, error = %why, ?delay, "a part of the operator ended; restarting it");
                env.health
                    .restarting(&name, ended, (now + delay).into_std());
                tokio::select! {
                    () = env.stop.cancelled() => {
                        env.health.stopped(&name);
                        return;
                    }
                    () = tokio::time::sleep(delay) => {}
                }
                info!(part = %name, "restarting a part of the operator");
            }
            Verdict::GiveUp { failures_in_window } => {
                error!(part = %name, ended = ?ended, error = %why, failures_in_window, "a part of the operator keeps ending; not restarting it again (the operator stops; the kubelet restarts the pod)");
                env.health.failed(&name, ended, failures_in_window);
                return;
            }
        }
    }
}

/// `incarnation`, with the faults armed for `name` injected where it runs (test hooks only).
fn with_faults<'a>(
    incarnation: Incarnation<'a>,
    faults: &'a Faults,
    name: &'a str,
    inject: bool,
) -> Incarnation<'a> {
    if !inject || !faults.is_enabled() {
        return incarnation;
    }
    Box::pin(async move {
        let mut incarnation = incarnation;
        tokio::select! {
            ended = &mut incarnation => ended,
            fault = faults.armed(name) => {
                faults.take(name);
                match fault {
                    Fault::Panic | Fault::PanicAlways => {
                        panic!("injected fault: the test hook panicked {name}")
                    }
                    Fault::End => Ok(()),
                    // Kept, not polled: the part is still there and makes no progress.
                    Fault::Stall => {
                        let _kept = incarnation;
                        std::future::pending().await
                    }
                }
            }
        }
    })
}

/// The text of a caught panic.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SystemClock;
    use crate::runtime::health::PartState;
    use crate::supervisor::restart_policy::Jitter;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    /// A part that counts its starts and runs until the hooks end it, or fails at start
    /// while `fail_first` says so.
    struct Counting {
        starts: Arc<AtomicU32>,
        fail_first: u32,
    }

    impl Part for Counting {
        fn name(&self) -> &str {
            "counting"
        }

        fn run(&mut self) -> Incarnation<'_> {
            let n = self.starts.fetch_add(1, Ordering::SeqCst) + 1;
            let fail = n <= self.fail_first;
            Box::pin(async move {
                if fail {
                    return Err(format!("start {n} failed"));
                }
                std::future::pending().await
            })
        }
    }

    fn env(faults: Faults) -> PartEnv {
        PartEnv {
            policy: RestartPolicy {
                base: Duration::from_millis(10),
                cap: Duration::from_millis(40),
                jitter: Jitter::None,
                max_restarts: 3,
                ..RestartPolicy::default()
            },
            clock: Arc::new(SystemClock),
            health: Health::default(),
            faults,
            stop: CancellationToken::new(),
        }
    }

    async fn until(what: &str, f: impl Fn() -> bool) {
        for _ in 0..200 {
            if f() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("timed out waiting for {what}");
    }

    #[tokio::test]
    async fn a_part_that_fails_is_started_again_and_recorded() {
        let starts = Arc::new(AtomicU32::new(0));
        let env = env(Faults::default());
        let task = tokio::spawn(supervise(
            Counting {
                starts: starts.clone(),
                fail_first: 2,
            },
            env.clone(),
        ));
        until("the third start", || starts.load(Ordering::SeqCst) == 3).await;
        let part = env.health.part("counting").unwrap();
        assert_eq!(part.state, PartState::Up);
        assert_eq!(part.restarts, 2);
        assert_eq!(part.last_end, Some(Ended::Failed));
        assert!(env.health.report().live);
        env.stop.cancel();
        task.await.unwrap();
        assert_eq!(
            env.health.part("counting").unwrap().state,
            PartState::Stopped
        );
    }

    #[tokio::test]
    async fn a_part_that_keeps_failing_is_dead_for_good() {
        let env = env(Faults::default());
        let starts = Arc::new(AtomicU32::new(0));
        let task = tokio::spawn(supervise(
            Counting {
                starts: starts.clone(),
                fail_first: u32::MAX,
            },
            env.clone(),
        ));
        let dead = tokio::time::timeout(Duration::from_secs(5), env.health.dead())
            .await
            .expect("dead for good");
        assert!(dead.contains("\"counting\" failed 4 times"), "{dead}");
        task.await.unwrap();
        // The limit allows 3 restarts: 4 starts, no fifth.
        assert_eq!(starts.load(Ordering::SeqCst), 4);
        assert!(!env.health.report().live);
    }

    #[tokio::test]
    async fn injected_panics_and_ends_restart_the_part_and_a_stall_keeps_it() {
        let faults = Faults::enabled();
        let env = env(faults.clone());
        let starts = Arc::new(AtomicU32::new(0));
        let _task = tokio::spawn(supervise(
            Counting {
                starts: starts.clone(),
                fail_first: 0,
            },
            env.clone(),
        ));
        until("the first start", || starts.load(Ordering::SeqCst) == 1).await;
        faults.arm("counting", Fault::Panic).unwrap();
        until("a start after the panic", || {
            starts.load(Ordering::SeqCst) == 2
        })
        .await;
        assert_eq!(
            env.health.part("counting").unwrap().last_end,
            Some(Ended::Panicked)
        );
        faults.arm("counting", Fault::End).unwrap();
        until("a start after the end", || {
            starts.load(Ordering::SeqCst) == 3
        })
        .await;
        assert_eq!(
            env.health.part("counting").unwrap().last_end,
            Some(Ended::Returned)
        );
        faults.arm("counting", Fault::Stall).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(starts.load(Ordering::SeqCst), 3, "a stall is no end");
        assert_eq!(env.health.part("counting").unwrap().state, PartState::Up);
        env.stop.cancel();
    }
}
