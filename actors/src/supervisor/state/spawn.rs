//! Starting an incarnation without blocking the supervisor, restarting one, and what a failure
//! leads to (a restart timer, or parking a crash-looping child).

use ractor::{ActorRuntime, SpawnErr};
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::super::child::{Child, Phase, Running};
use super::super::coalesce::{MailboxDepth, PendingFlag};
use super::super::factory::{ChildContext, ChildFactory, IdleReport, Keepsake, Links, PlaceReport};
use super::super::host::Host;
use super::super::messages::SupervisorMsg;
use super::super::restart_policy::{RestartTracker, Verdict};
use super::{SupervisorState, take_phase};
use crate::key::ObjectKey;

impl<F: ChildFactory> SupervisorState<F> {
    /// Starts a passive child: a new incarnation, not a restart (no failure happened, the
    /// restart history is kept as it is).
    pub(super) fn activate<H: Host<F>>(
        &mut self,
        myself: &H,
        key: &ObjectKey,
        child: &mut Child<F>,
    ) {
        let keepsake = match take_phase(child) {
            Phase::Passive {
                keepsake, waiting, ..
            } => {
                self.metrics.passive.dec();
                if waiting {
                    self.metrics.waiting.dec();
                }
                keepsake
            }
            other => {
                self.leave_phase(other, None);
                None
            }
        };
        child.incarnation = self.next_incarnation();
        child.phase = self.start(
            myself,
            key,
            child.spec.subscribe(),
            &mut child.tracker,
            child.incarnation,
            keepsake,
        );
    }

    /// Start `child` again after a failure, a reset or a changed spec.
    pub(super) fn restart<H: Host<F>>(
        &mut self,
        myself: &H,
        key: &ObjectKey,
        child: &mut Child<F>,
    ) {
        let old = take_phase(child);
        self.leave_phase(old, Some("restarting"));
        child.restarts += 1;
        self.metrics.restarts.inc();
        child.incarnation = self.next_incarnation();
        // A restart after a failure starts from nothing: what the failed incarnation knew
        // may be what made it fail.
        child.phase = self.start(
            myself,
            key,
            child.spec.subscribe(),
            &mut child.tracker,
            child.incarnation,
            None,
        );
    }

    /// Spawn one incarnation without waiting for its `pre_start`.
    ///
    /// `spawn_linked` would run the child's `pre_start` inside this handler, stalling every
    /// other child's supervision; the instant variant returns at once and a small task reports
    /// a failed `pre_start` back as `StartFailed` (ractor sends no supervision event for it).
    pub(super) fn start<H: Host<F>>(
        &mut self,
        myself: &H,
        key: &ObjectKey,
        spec: watch::Receiver<F::Spec>,
        tracker: &mut RestartTracker,
        incarnation: u64,
        keepsake: Option<Keepsake>,
    ) -> Phase<F> {
        let started_at = self.config.clock.now();
        let mailbox = MailboxDepth::new(self.metrics.mailbox_depth.clone());
        let pending = PendingFlag::default();
        let idle: IdleReport = {
            let (host, key) = (myself.clone(), key.clone());
            Arc::new(move |due, keepsake| {
                let _ = host.send(SupervisorMsg::Idle {
                    key: key.clone(),
                    incarnation,
                    due,
                    keepsake,
                });
            })
        };
        let release: PlaceReport = {
            let (host, key) = (myself.clone(), key.clone());
            Arc::new(move || {
                let _ = host.send(SupervisorMsg::Released {
                    key: key.clone(),
                    incarnation,
                });
            })
        };
        let ctx = ChildContext::new(
            key.clone(),
            incarnation,
            spec,
            Links {
                mailbox: mailbox.clone(),
                pending: pending.clone(),
                idle,
                place: self.starting_woken,
                release,
                keepsake,
                dispatch: self.metrics.dispatch.clone(),
            },
        );
        let (actor, args) = self.factory.build(ctx);
        match ActorRuntime::<F::Child>::spawn_linked_instant(None, actor, args, myself.cell()) {
            Ok((actor, startup)) => {
                tracing::debug!(kind = self.factory.kind(), %key, incarnation, "child started");
                self.by_actor
                    .insert(actor.get_id(), (key.clone(), incarnation));
                self.metrics.active.inc();
                report_failed_start(myself.clone(), key.clone(), incarnation, startup);
                let running = Running {
                    actor,
                    started_at,
                    mailbox,
                    pending,
                    woken: false,
                };
                // Every incarnation reconciles once on start, through the same path as updates.
                self.nudge(key, &running);
                Phase::Running(running)
            }
            // Only a registry name clash fails here, and children are unnamed; still, never
            // lose a child: treat it like a failed start.
            Err(e) => {
                self.after_failure(myself, key, tracker, incarnation, started_at, e.to_string())
            }
        }
    }

    /// Ask the policy, then arm a restart timer or park the child.
    pub(super) fn after_failure<H: Host<F>>(
        &mut self,
        myself: &H,
        key: &ObjectKey,
        tracker: &mut RestartTracker,
        incarnation: u64,
        started_at: tokio::time::Instant,
        error: String,
    ) -> Phase<F> {
        let now = self.config.clock.now();
        let kind = self.factory.kind();
        let verdict = tracker.on_failure(
            &self.config.policy,
            started_at.into_std(),
            now.into_std(),
            &mut self.rng,
        );
        match verdict {
            Verdict::Restart(delay) => {
                tracing::warn!(kind, %key, incarnation, ?delay, %error, "child failed; restart scheduled");
                let timer = myself.send_after(
                    delay,
                    SupervisorMsg::RestartDue {
                        key: key.clone(),
                        incarnation,
                    },
                );
                Phase::BackingOff {
                    delay,
                    due: now + delay,
                    last_error: error,
                    timer,
                }
            }
            Verdict::GiveUp { failures_in_window } => {
                tracing::error!(kind, %key, failures_in_window, %error, "child is crash-looping; parked");
                self.metrics.crash_looping.inc();
                self.factory.on_crash_loop(key, &error);
                Phase::CrashLooping { last_error: error }
            }
        }
    }

    /// `RestartDue`: the backoff timer fired.
    pub fn restart_due<H: Host<F>>(&mut self, myself: &H, key: &ObjectKey, incarnation: u64) {
        let Some((key, mut child)) = self.take(key) else {
            tracing::debug!(kind = self.factory.kind(), %key, "restart timer for a removed child");
            return;
        };
        if child.incarnation == incarnation && matches!(child.phase, Phase::BackingOff { .. }) {
            self.restart(myself, &key, &mut child);
        } else {
            tracing::debug!(kind = self.factory.kind(), %key, incarnation, "stale restart timer");
        }
        self.children.insert(key, child);
    }

    /// A child incarnation failed: crashed, panicked, stopped on its own or failed to start.
    /// Reports about an older incarnation, or one already handled, are ignored.
    pub fn failed<H: Host<F>>(
        &mut self,
        myself: &H,
        key: &ObjectKey,
        incarnation: u64,
        error: String,
    ) {
        let Some((key, mut child)) = self.take(key) else {
            return;
        };
        let started_at = match &child.phase {
            Phase::Running(running) if child.incarnation == incarnation => Some(running.started_at),
            _ => None,
        };
        if let Some(started_at) = started_at {
            let old = take_phase(&mut child);
            self.leave_phase(old, None);
            child.phase = self.after_failure(
                myself,
                &key,
                &mut child.tracker,
                incarnation,
                started_at,
                error,
            );
        }
        self.children.insert(key, child);
    }
}

/// Wait for a child's `pre_start` on a task of its own and report a failure as `StartFailed`.
fn report_failed_start<F: ChildFactory, H: Host<F>>(
    supervisor: H,
    key: ObjectKey,
    incarnation: u64,
    startup: JoinHandle<Result<JoinHandle<()>, SpawnErr>>,
) {
    tokio::spawn(async move {
        let error = match startup.await {
            Ok(Ok(_running)) => return,
            Ok(Err(e)) => e.to_string(),
            Err(e) => e.to_string(),
        };
        // An error here means the supervisor itself is gone: nothing left to restart.
        let _ = supervisor.send(SupervisorMsg::StartFailed {
            key,
            incarnation,
            error,
        });
    });
}
