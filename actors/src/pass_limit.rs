//! How many passes of one kind run at once ([`OperatorConfig::max_concurrent_passes`],
//! controller-runtime's MaxConcurrentReconciles).
//!
//! Memory, not throughput, is why: a pass's future is ~15 KB (kube and reqwest calls inline),
//! and a cold start or a relist nudges every object at once, so without a bound 10,000 teams
//! would hold 10,000 of them while they queue for the API servers (heap profile,
//! docs/performance.md). Waiting actors hold only the small future of the wait.
//!
//! The limit is a queue that `actor_mailbox_depth` cannot see (a waiting actor has taken its
//! message), so it exports its own `reconcile_passes_waiting` and `reconcile_passes_running`:
//! running pinned at the limit with a waiting queue that does not drain says raise the limit
//! or look at the API servers' latency.
//!
//! [`OperatorConfig::max_concurrent_passes`]: crate::context::OperatorConfig::max_concurrent_passes

use std::future::Future;
use std::sync::Arc;

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Semaphore;

/// Shared by every actor of one kind; cheap to clone.
#[derive(Clone, Debug)]
pub struct PassLimit {
    slots: Arc<Semaphore>,
    /// Passes waiting for a slot, and passes holding one.
    waiting: Gauge,
    running: Gauge,
}

/// Counts one in a gauge for as long as it lives, so a pass cancelled while waiting (its
/// actor stopped) or while running is counted out all the same.
struct Counted(Gauge);

impl Counted {
    fn new(gauge: &Gauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl PassLimit {
    /// `passes` at once (at least one); `(waiting, running)` as
    /// [`OperatorMetrics::pass_gauges`](crate::runtime::metrics::OperatorMetrics::pass_gauges)
    /// gives them.
    pub fn new(passes: usize, (waiting, running): (Gauge, Gauge)) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(passes.max(1))),
            waiting,
            running,
        }
    }

    /// Runs the pass `start` makes once a slot is free. The pass is made and boxed only then:
    /// the caller's future (an actor's processing loop, boxed once per actor by ractor) holds
    /// a pointer to it, not the pass itself.
    pub async fn run<F: Future>(&self, start: impl FnOnce() -> F) -> F::Output {
        let waiting = Counted::new(&self.waiting);
        // The semaphore is never closed, so the permit is always granted eventually.
        let _permit = self.slots.acquire().await.ok();
        drop(waiting);
        let _running = Counted::new(&self.running);
        Box::pin(start()).await
    }

    /// Passes that could start now.
    pub fn available(&self) -> usize {
        self.slots.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[tokio::test]
    async fn no_more_than_the_limit_run_at_once_and_all_finish() {
        let gauges = (Gauge::default(), Gauge::default());
        let limit = PassLimit::new(3, gauges.clone());
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let (limit, running, most) = (limit.clone(), running.clone(), most.clone());
                tokio::spawn(async move {
                    limit
                        .run(|| async {
                            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(now, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(5)).await;
                            running.fetch_sub(1, Ordering::SeqCst);
                            7
                        })
                        .await
                })
            })
            .collect();
        for t in tasks {
            assert_eq!(t.await.unwrap(), 7);
        }
        assert_eq!(most.load(Ordering::SeqCst), 3);
        assert_eq!(limit.available(), 3, "every slot given back");
        assert_eq!((gauges.0.get(), gauges.1.get()), (0, 0), "all counted out");
    }

    #[tokio::test]
    async fn the_gauges_count_passes_waiting_and_running_and_cancelled_ones_leave() {
        let (waiting, running) = (Gauge::default(), Gauge::default());
        let limit = PassLimit::new(1, (waiting.clone(), running.clone()));
        let (release, hold) = tokio::sync::oneshot::channel::<()>();
        let first = tokio::spawn({
            let limit = limit.clone();
            async move { limit.run(|| async { hold.await.ok() }).await }
        });
        let second = tokio::spawn({
            let limit = limit.clone();
            async move { limit.run(|| async {}).await }
        });
        // Both are parked: one on its slot, one on the semaphore.
        while (waiting.get(), running.get()) != (1, 1) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        second.abort();
        assert!(second.await.is_err(), "cancelled while waiting");
        assert_eq!((waiting.get(), running.get()), (0, 1));
        release.send(()).unwrap();
        first.await.unwrap();
        assert_eq!((waiting.get(), running.get()), (0, 0));
    }

    #[test]
    fn a_limit_of_zero_still_lets_passes_run() {
        let gauges = (Gauge::default(), Gauge::default());
        assert_eq!(PassLimit::new(0, gauges).available(), 1);
    }
}
