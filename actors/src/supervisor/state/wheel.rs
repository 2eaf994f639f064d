//! Passivation and the timer wheel: an idle child is stopped and kept as an entry with when its
//! next pass is due; one timer, armed for the earliest, wakes them (ADR 0011).

use tokio::time::Instant;

use super::super::child::Phase;
use super::super::factory::{ChildFactory, Keepsake};
use super::super::host::Host;
use super::super::messages::SupervisorMsg;
use super::{SupervisorState, take_phase};
use crate::key::ObjectKey;

impl<F: ChildFactory> SupervisorState<F> {
    /// `Idle`: the incarnation converged with nothing due until `due`. Unless a nudge or
    /// message is queued for it (then it is busy, not idle), it is stopped and kept as an entry:
    /// its spec, its restart history (crash-loop accounting survives) and `due`, on the wheel.
    pub fn idle<H: Host<F>>(
        &mut self,
        myself: &H,
        key: &ObjectKey,
        incarnation: u64,
        due: Instant,
        keepsake: Keepsake,
    ) {
        let Some((key, mut child)) = self.take(key) else {
            return;
        };
        let idle = child.incarnation == incarnation
            && matches!(&child.phase, Phase::Running(r) if !r.pending.is_set() && r.mailbox.queued() == 0);
        if idle {
            let old = take_phase(&mut child);
            self.leave_phase(old, Some("passivated"));
            child.spec.park();
            child.phase = Phase::Passive {
                due: Some(due),
                keepsake: Some(keepsake),
                waiting: false,
            };
            self.metrics.passive.inc();
            self.schedule(myself, &key, due);
            tracing::debug!(kind = self.factory.kind(), %key, "passivated");
        }
        self.children.insert(key, child);
    }

    /// `Wake`: queues every passive child whose pass is due for a start, and arms the timer for
    /// the next.
    pub fn wake<H: Host<F>>(&mut self, myself: &H) {
        self.armed = None;
        let now = self.config.clock.now();
        while let Some((due, key)) = self.wheel.first().cloned() {
            if due > now {
                break;
            }
            self.wheel.pop_first();
            let Some((key, mut child)) = self.take(&key) else {
                continue;
            };
            if matches!(child.phase, Phase::Passive { due: Some(d), .. } if d == due) {
                self.queue_wake(&key, &mut child);
            }
            self.children.insert(key, child);
        }
        self.arm(myself);
    }

    /// Puts `key` on the wheel at `due` and re-arms the one timer if `due` is the earliest.
    pub(super) fn schedule<H: Host<F>>(&mut self, myself: &H, key: &ObjectKey, due: Instant) {
        self.wheel.insert((due, key.clone()));
        if self.armed.as_ref().is_none_or(|(at, _)| due < *at) {
            self.arm(myself);
        }
    }

    pub(super) fn arm<H: Host<F>>(&mut self, myself: &H) {
        if let Some((_, timer)) = self.armed.take() {
            timer.abort();
        }
        let next = [self.wheel.first().map(|(due, _)| *due), self.hold_ends()]
            .into_iter()
            .flatten()
            .min();
        if let Some(due) = next {
            let delay = due.saturating_duration_since(self.config.clock.now());
            self.armed = Some((due, myself.send_after(delay, SupervisorMsg::Wake)));
        }
    }
}
