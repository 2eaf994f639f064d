//! The wake queue and the wake budget (ADR 0011): passive children due a pass wait here and
//! start as places free up; a started child holds its place until its pass is done or its hold
//! ends.

use std::collections::VecDeque;
use tokio::time::Instant;

use super::super::child::{Child, Phase};
use super::super::factory::ChildFactory;
use super::super::host::Host;
use super::SupervisorState;
use crate::key::ObjectKey;

impl<F: ChildFactory> SupervisorState<F> {
    /// `NudgeAll`: every running child gets a nudge, every passive one is queued for a start.
    pub(super) fn nudge_all(&mut self) {
        let keys: Vec<ObjectKey> = self.children.keys().cloned().collect();
        for key in keys {
            let Some((key, mut child)) = self.take(&key) else {
                continue;
            };
            match &child.phase {
                Phase::Running(running) => self.nudge(&key, running),
                Phase::Passive { .. } => self.queue_wake(&key, &mut child),
                _ => {}
            }
            self.children.insert(key, child);
        }
    }

    /// Children running now (not passive, not backing off or parked).
    pub fn running(&self) -> usize {
        self.children
            .values()
            .filter(|c| matches!(c.phase, Phase::Running(_)))
            .count()
    }

    /// Queues passive `child` for a start within the wake budget (once).
    pub(super) fn queue_wake(&mut self, key: &ObjectKey, child: &mut Child<F>) {
        if let Phase::Passive { waiting, .. } = &mut child.phase
            && !*waiting
        {
            *waiting = true;
            self.metrics.waiting.inc();
            self.waiting.push_back(key.clone());
        }
    }

    /// When the oldest hold ends, if children wait for it (the budget is full).
    pub(super) fn hold_ends(&self) -> Option<Instant> {
        if self.waiting.is_empty() || self.held < self.config.wake_budget {
            return None;
        }
        self.holds.front().map(|(until, _, _)| *until)
    }

    /// Starts waiting children while the wake budget has room, after taking back the places
    /// held longer than `wake_hold`; arms the timer for the next hold to end if some still wait.
    pub(super) fn admit<H: Host<F>>(&mut self, myself: &H) {
        let now = self.config.clock.now();
        // Holds that ended take their place back; entries of children that gave theirs back
        // already are dropped once they reach the front, so the queue stays near `held`.
        while let Some((until, key, incarnation)) = self.holds.front() {
            let holder = self
                .children
                .get_mut(key)
                .filter(|c| c.incarnation == *incarnation)
                .and_then(|c| match &mut c.phase {
                    Phase::Running(running) if running.woken => Some(running),
                    _ => None,
                });
            match holder {
                Some(running) if *until <= now => {
                    running.woken = false;
                    self.held -= 1;
                }
                Some(_) => break,
                None => {}
            }
            self.holds.pop_front();
        }
        shrink(&mut self.holds);
        while self.held < self.config.wake_budget {
            let Some(key) = self.waiting.pop_front() else {
                break;
            };
            let Some((key, mut child)) = self.take(&key) else {
                continue;
            };
            if matches!(child.phase, Phase::Passive { waiting: true, .. }) {
                self.starting_woken = true;
                self.activate(myself, &key, &mut child);
                self.starting_woken = false;
                if let Phase::Running(running) = &mut child.phase {
                    running.woken = true;
                    self.held += 1;
                    self.holds.push_back((
                        now + self.config.wake_hold,
                        key.clone(),
                        child.incarnation,
                    ));
                }
            }
            self.children.insert(key, child);
        }
        shrink(&mut self.waiting);
        if let Some(ends) = self.hold_ends()
            && self.armed.as_ref().is_none_or(|(at, _)| ends < *at)
        {
            self.arm(myself);
        }
    }

    /// `Released`: a child started from the queue is done with its pass and stays running.
    pub(super) fn released(&mut self, key: &ObjectKey, incarnation: u64) {
        if let Some(child) = self.children.get_mut(key)
            && child.incarnation == incarnation
            && let Phase::Running(running) = &mut child.phase
            && std::mem::take(&mut running.woken)
        {
            self.held -= 1;
        }
    }
}

/// A queue a burst grew (a relist queues every entry) gives its buffer back once it drained:
/// a `VecDeque` keeps its largest capacity otherwise (~0.6 MB after 8,000 starts).
fn shrink<T>(queue: &mut VecDeque<T>) {
    if queue.capacity() > 64 && queue.len() < queue.capacity() / 4 {
        queue.shrink_to(queue.len() * 2);
    }
}
