//! How many passes of one kind run at once ([`OperatorConfig::max_concurrent_passes`],
//! controller-runtime's MaxConcurrentReconciles).
//!
//! Memory, not throughput, is why: a pass's future is ~15 KB (kube and reqwest calls inline),
//! and a cold start or a relist nudges every object at once, so without a bound 10,000 teams
//! would hold 10,000 of them while they queue for the API servers (heap profile,
//! docs/performance.md). Waiting actors hold only the small future of the wait.
//!
//! [`OperatorConfig::max_concurrent_passes`]: crate::context::OperatorConfig::max_concurrent_passes

use std::future::Future;
use std::sync::Arc;

use tokio::sync::Semaphore;

/// Shared by every actor of one kind; cheap to clone.
#[derive(Clone, Debug)]
pub struct PassLimit(Arc<Semaphore>);

impl PassLimit {
    pub fn new(passes: usize) -> Self {
        Self(Arc::new(Semaphore::new(passes.max(1))))
    }

    /// Runs the pass `start` makes once a slot is free. The pass is made and boxed only then:
    /// the caller's future (an actor's processing loop, boxed once per actor by ractor) holds
    /// a pointer to it, not the pass itself.
    pub async fn run<F: Future>(&self, start: impl FnOnce() -> F) -> F::Output {
        // The semaphore is never closed, so the permit is always granted eventually.
        let _permit = self.0.acquire().await.ok();
        Box::pin(start()).await
    }

    /// Passes that could start now.
    pub fn available(&self) -> usize {
        self.0.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[tokio::test]
    async fn no_more_than_the_limit_run_at_once_and_all_finish() {
        let limit = PassLimit::new(3);
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
    }

    #[test]
    fn a_limit_of_zero_still_lets_passes_run() {
        assert_eq!(PassLimit::new(0).available(), 1);
    }
}
