//! When a kind's next pass is due, decided once for every kind (pure): what the pass asked for
//! ([`Next`]) and the object's streaks ([`Streak`]) give the delay.

use std::time::Duration;

use crate::context::OperatorConfig;
use crate::pacing::{jittered, retry_delay};

/// What a pass asks for next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Converged, or waiting for a change a watch will report (a spec, a Secret the operator
    /// watches, a Namespace's labels): the jittered periodic resync (docs/design.md §5).
    Resync,
    /// Waiting for a change outside the cluster that no watch reports and that comes at its
    /// own pace (a user signs up, another team gives up a name): `config.blocked_retry`.
    Blocked,
    /// Waiting on something not failing but not there yet (a server starting, a Secret the
    /// operator does not watch, a team being corrected): looked at again with a growing
    /// delay, its own streak.
    Wait,
    /// The pass failed (an error from an API, a refused write): a growing delay, and the
    /// failure streak that warns once.
    Failed,
    /// A fixed delay (a cache known to lag a write by a moment).
    After(Duration),
}

impl Next {
    /// The `outcome` label of `reconciles_total`.
    pub fn outcome(self) -> &'static str {
        match self {
            Self::Resync | Self::After(_) => "ok",
            Self::Blocked => "blocked",
            Self::Wait => "waiting",
            Self::Failed => "error",
        }
    }
}

/// An object's streaks, kept by the driver between passes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Streak {
    /// Consecutive failed passes.
    pub failures: u32,
    /// Consecutive waiting passes.
    pub waits: u32,
}

impl Streak {
    /// Records `next` and returns the delay until the pass after it.
    pub fn after(&mut self, next: Next, config: &OperatorConfig) -> Duration {
        match next {
            Next::Failed => {
                self.failures = self.failures.saturating_add(1);
                retry_delay(self.failures)
            }
            Next::Wait => {
                self.failures = 0;
                self.waits = self.waits.saturating_add(1);
                retry_delay(self.waits)
            }
            Next::Resync | Next::Blocked | Next::After(_) => {
                self.failures = 0;
                self.waits = 0;
                match next {
                    Next::Blocked => config.blocked_retry,
                    Next::After(d) => d,
                    _ => jittered(config.resync),
                }
            }
        }
    }

    /// The first failure of a streak is logged at warn, the rest at debug.
    pub fn first_failure(&self) -> bool {
        self.failures == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pacing::retry_base;

    #[test]
    fn each_next_has_its_delay_and_streak() {
        let config = OperatorConfig::default();
        let mut s = Streak::default();
        let first = s.after(Next::Failed, &config);
        assert!(first <= retry_base(1) && s.first_failure());
        s.after(Next::Failed, &config);
        assert_eq!(s.failures, 2);
        assert!(!s.first_failure());
        // Waiting is not failing: the failure streak ends, the wait streak grows.
        let w = s.after(Next::Wait, &config);
        assert_eq!((s.failures, s.waits), (0, 1));
        assert!(w <= retry_base(1));
        s.after(Next::Wait, &config);
        assert_eq!(s.waits, 2);
        assert_eq!(s.after(Next::Blocked, &config), config.blocked_retry);
        assert_eq!((s.failures, s.waits), (0, 0));
        let r = s.after(Next::Resync, &config);
        assert!(r >= config.resync.mul_f64(0.9) && r <= config.resync.mul_f64(1.1));
        assert_eq!(
            s.after(Next::After(Duration::from_secs(1)), &config),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn outcomes_label_the_metrics() {
        let labels: Vec<_> = [Next::Resync, Next::Blocked, Next::Wait, Next::Failed]
            .iter()
            .map(|n| n.outcome())
            .collect();
        assert_eq!(labels, ["ok", "blocked", "waiting", "error"]);
    }
}
