//! The per-key requests of the protocol: `Ensure` (a new entry, a changed spec), `Remove`,
//! `Reset` and `Forward`.

use super::super::child::{Child, Phase, SpecCell};
use super::super::coalesce::send_counted;
use super::super::factory::{ChildFactory, ChildMsg};
use super::super::host::Host;
use super::super::restart_policy::RestartTracker;
use super::SupervisorState;
use crate::key::ObjectKey;

impl<F: ChildFactory> SupervisorState<F> {
    /// `Ensure`: a new entry, or update the spec and nudge, or restart a failed child whose
    /// spec changed.
    pub(super) fn ensure<H: Host<F>>(&mut self, myself: &H, key: ObjectKey, spec: F::Spec) {
        let Some((key, mut child)) = self.take(&key) else {
            // A new entry starts through the wake queue: at once while the budget has room,
            // which it has but when a host adopts or a list brings thousands at once (an
            // operator or server actor starting over them, ADR 0011).
            let mut child = Box::new(Child {
                spec: SpecCell::Value(spec),
                tracker: RestartTracker::default(),
                // Not started yet: no timer or report can name incarnation 0.
                incarnation: 0,
                restarts: 0,
                phase: Phase::Passive {
                    due: None,
                    keepsake: None,
                    waiting: false,
                },
            });
            self.metrics.passive.inc();
            self.queue_wake(&key, &mut child);
            self.children.insert(key, child);
            return;
        };
        let changed = child.spec.set(spec);
        match &child.phase {
            Phase::Running(running) => self.nudge(&key, running),
            // Its own object changed: at once.
            Phase::Passive { .. } if changed => self.activate(myself, &key, &mut child),
            // Something it depends on may have (a relist says every object again).
            Phase::Passive { .. } => self.queue_wake(&key, &mut child),
            Phase::BackingOff { .. } | Phase::CrashLooping { .. } if changed => {
                tracing::info!(kind = self.factory.kind(), %key, "spec changed; restarting now");
                child.tracker.reset();
                self.restart(myself, &key, &mut child);
            }
            Phase::BackingOff { .. } | Phase::CrashLooping { .. } => {}
        }
        self.children.insert(key, child);
    }

    /// `Remove`: stop the child and forget it.
    pub fn remove(&mut self, key: &ObjectKey) {
        self.remove_because(key, "object removed");
    }

    pub(super) fn remove_because(&mut self, key: &ObjectKey, why: &'static str) {
        let Some((key, child)) = self.take(key) else {
            return;
        };
        tracing::info!(kind = self.factory.kind(), %key, why, "stopping its actor");
        self.leave_phase(child.phase, Some(why));
    }

    /// `Reset`: forget the history; start the child if it is not running.
    pub fn reset<H: Host<F>>(&mut self, myself: &H, key: &ObjectKey) {
        let Some((key, mut child)) = self.take(key) else {
            return;
        };
        child.tracker.reset();
        if !matches!(child.phase, Phase::Running(_)) {
            self.restart(myself, &key, &mut child);
        }
        self.children.insert(key, child);
    }

    /// `Forward`: deliver to a running child, counted in the depth gauge. A passive child is
    /// started instead (its first message is a pass, which is what any message asks of it).
    pub fn forward<H: Host<F>>(&mut self, myself: &H, key: &ObjectKey, msg: ChildMsg<F>) {
        match self.children.get(key).map(|c| &c.phase) {
            Some(Phase::Running(running)) => {
                if send_counted(&running.actor, &running.mailbox, msg).is_err() {
                    tracing::debug!(kind = self.factory.kind(), %key, "child exiting; dropped");
                }
            }
            Some(Phase::Passive { .. }) => {
                if let Some((key, mut child)) = self.take(key) {
                    self.activate(myself, &key, &mut child);
                    self.children.insert(key, child);
                }
            }
            _ => tracing::debug!(kind = self.factory.kind(), %key, "no running child; dropped"),
        }
    }
}
