//! When an actor runs its next pass: the periodic resync (DESIGN §5, 5 minutes) with ±10%
//! jitter so thousands of objects do not resync in lockstep, and the retry delay after failed
//! passes, exponential through `backon` (ADR 0001).

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

/// Retry delay after `failures` consecutive failed passes: 1s, 2s, 4s ... capped at 30s.
/// Deterministic (no jitter): a failure streak of one object is already decorrelated from
/// others by when it started, and tests assert the exact sequence.
pub fn retry_delay(failures: u32) -> Duration {
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
        let d: Vec<u64> = (1..=9).map(|n| retry_delay(n).as_secs()).collect();
        assert_eq!(d, [1, 2, 4, 8, 16, 30, 30, 30, 30]);
        assert_eq!(retry_delay(0), RETRY_MIN);
        assert_eq!(retry_delay(u32::MAX), RETRY_MAX);
    }

    #[test]
    fn jitter_stays_within_ten_percent() {
        for _ in 0..100 {
            let j = jittered(Duration::from_secs(300)).as_secs_f64();
            assert!((270.0..330.0).contains(&j), "{j}");
        }
    }
}
