//! When an actor runs its next pass: the periodic resync (docs/design.md §5, 5 minutes) with ±10%
//! jitter so thousands of objects do not resync in lockstep, and the retry delay after failed
//! passes, exponential through `backon` (ADR 0001) and jittered too: the objects of one server
//! fail together when it goes away, and without jitter they would all come back at the same
//! instants (docs/security.md, "bounded and fair").

use std::time::Duration;

use backon::{BackoffBuilder as _, ExponentialBuilder};
use rand::Rng as _;

/// First retry after a failed pass.
pub const RETRY_MIN: Duration = Duration::from_secs(1);
/// No retry waits longer; the resync is the backstop beyond it. Half the 60 s within which
/// everything converges once a storm is over (docs/reliability.md): with a 60 s cap, an object
/// that failed 6+ times in a row could sleep out the whole promise after its server came back
/// (`just chaos` measured 58-60 s after stand-in restarts). Cost: a failing object retries
/// twice a minute instead of once.
pub const RETRY_MAX: Duration = Duration::from_secs(30);

/// The resync period ±10%.
pub fn jittered(period: Duration) -> Duration {
    let f = rand::rng().random_range(0.9..1.1);
    period.mul_f64(f)
}

/// Retry delay after `failures` consecutive failed passes: [`retry_base`] scaled by a random
/// factor in 0.75..=1.0, so it never exceeds the cap and objects that failed together retry
/// spread over a quarter of the step.
pub fn retry_delay(failures: u32) -> Duration {
    let f = rand::rng().random_range(0.75..=1.0);
    retry_base(failures).mul_f64(f)
}

/// The unjittered retry delay: 1s, 2s, 4s ... capped at 30s.
pub fn retry_base(failures: u32) -> Duration {
    // 1s doubles past the 30s cap within 5 steps; walking further only costs time.
    let step = failures.saturating_sub(1).min(16) as usize;
    ExponentialBuilder::default()
        .with_min_delay(RETRY_MIN)
        .with_max_delay(RETRY_MAX)
        .with_factor(2.0)
        .without_max_times()
        .build()
        .nth(step)
        .unwrap_or(RETRY_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delays_grow_and_cap() {
        let d: Vec<u64> = (1..=9).map(|n| retry_base(n).as_secs()).collect();
        assert_eq!(d, [1, 2, 4, 8, 16, 30, 30, 30, 30]);
        assert_eq!(retry_base(0), RETRY_MIN);
        assert_eq!(retry_base(u32::MAX), RETRY_MAX);
    }

    #[test]
    fn retry_delays_are_jittered_below_their_step() {
        let delays: Vec<Duration> = (0..200).map(|_| retry_delay(4)).collect();
        let base = retry_base(4);
        assert!(
            delays
                .iter()
                .all(|d| *d <= base && *d >= base.mul_f64(0.75))
        );
        let distinct: std::collections::BTreeSet<_> = delays.iter().collect();
        assert!(
            distinct.len() > 100,
            "jittered: {} distinct of 200",
            distinct.len()
        );
        assert!((0..200).all(|_| retry_delay(u32::MAX) <= RETRY_MAX));
    }

    #[test]
    fn jitter_stays_within_ten_percent() {
        for _ in 0..100 {
            let j = jittered(Duration::from_secs(300)).as_secs_f64();
            assert!((270.0..330.0).contains(&j), "{j}");
        }
    }
}
