//! Time behind a trait, so scheduling and timestamps can be driven by tests.
//!
//! Two kinds of time are needed and they must not be mixed:
//! - **monotonic** ([`tokio::time::Instant`]) for deadlines, backoff and "healthy for 60s";
//!   it honours `tokio::time::pause`/`advance`, which is the main test mechanism here;
//! - **wall** ([`Timestamp`]) for what users read: condition `lastTransitionTime`, Events.
//!
//! [`SystemClock`] is the production clock. [`TokioClock`] derives wall time from the tokio
//! clock, so a paused-time test sees both clocks move together and deterministically.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;

/// A source of monotonic and wall time.
pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    /// Monotonic now, for scheduling. Follows tokio's paused clock in tests.
    fn now(&self) -> Instant;

    /// Wall-clock now, for timestamps users see.
    fn wall(&self) -> Timestamp;

    /// Wall-clock now as the Kubernetes `meta/v1` `Time` used in conditions.
    fn k8s_now(&self) -> Time {
        Time(self.wall())
    }
}

/// The real clock: tokio's monotonic clock and the system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn wall(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock whose wall time is `anchor + (tokio now - start)`: under `tokio::time::pause`
/// both clocks advance only when the test advances them.
#[derive(Clone, Debug)]
pub struct TokioClock {
    start: Instant,
    anchor: Timestamp,
}

impl TokioClock {
    /// A clock whose wall time reads `anchor` at the current tokio instant.
    pub fn anchored_at(anchor: Timestamp) -> Self {
        Self {
            start: Instant::now(),
            anchor,
        }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn wall(&self) -> Timestamp {
        let elapsed = Instant::now().saturating_duration_since(self.start);
        // Out of range only after ~10^4 years of elapsed test time; stay at the maximum.
        self.anchor.checked_add(elapsed).unwrap_or(Timestamp::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::{Clock, TokioClock};
    use k8s_openapi::jiff::Timestamp;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn tokio_clock_moves_wall_time_with_paused_time() {
        let anchor = Timestamp::from_second(1_700_000_000).expect("valid timestamp");
        let clock = TokioClock::anchored_at(anchor);
        let t0 = clock.now();
        tokio::time::advance(Duration::from_secs(90)).await;
        assert_eq!(clock.now() - t0, Duration::from_secs(90));
        assert_eq!(clock.wall().as_second(), 1_700_000_090);
        assert_eq!(clock.k8s_now().0.as_second(), 1_700_000_090);
    }
}
