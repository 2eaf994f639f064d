//! How a watch waits after an error (docs/design.md §5, docs/reliability.md).
//!
//! kube-runtime's `default_backoff` is client-go's: 0.8 s doubling to 30 s, reset by any event
//! that gets through. A kube-apiserver restart that takes 12 s already grows it to 12.8 s, and
//! its first list after the restart is often refused (403 while the new apiserver's RBAC cache
//! fills), so the next wait is ~25 s: in `just chaos-long` the operator noticed changes made
//! during a storm of six restarts only 76 s after the last one. The same curve capped at 5 s
//! (at most 10 s with jitter) notices them within seconds; nine watches retrying every 5-10 s
//! are no load on an apiserver.

use std::time::Duration;

use kube::runtime::utils::ResetTimerBackoff;
use kube::runtime::watcher::ExponentialBackoff;

/// The longest wait between two attempts of one watch, before jitter (which adds up to as much
/// again).
pub const MAX_WAIT: Duration = Duration::from_secs(5);

/// 0.8 s doubling to [`MAX_WAIT`], with jitter; started over by any event that gets through,
/// or after 30 s without an error.
pub fn watch_backoff() -> ResetTimerBackoff<ExponentialBackoff> {
    let curve = backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(800))
        .with_max_delay(MAX_WAIT)
        .with_factor(2.0)
        .with_jitter()
        .without_max_times();
    ResetTimerBackoff::new(ExponentialBackoff::from(curve), Duration::from_secs(30))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waits_grow_from_under_a_second_and_never_pass_twice_the_cap() {
        let waits: Vec<Duration> = watch_backoff().take(12).collect();
        assert_eq!(waits.len(), 12, "the backoff never gives up");
        // Jitter adds up to the delay itself on top of it.
        assert!(waits[0] >= Duration::from_millis(800) && waits[0] < Duration::from_millis(1600));
        assert!(waits.iter().all(|w| *w <= MAX_WAIT * 2), "{waits:?}");
        assert!(waits[6..].iter().all(|w| *w >= MAX_WAIT), "{waits:?}");
    }
}
