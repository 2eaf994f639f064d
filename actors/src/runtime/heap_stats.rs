//! `heap_bytes{state}`: what the allocator holds, in use and freed-but-kept
//! (docs/adr/0009-heap-figures-from-glibc.md, docs/adr/0010-jemalloc-in-the-image.md).
//!
//! After convergence most actors passivate (docs/design.md §5, ADR 0008) and free what they
//! held. jemalloc (linked into every binary, ADR 0010) purges the freed pages after a decay.
//! `in_use` is what the operator needs; `free` is what the allocator keeps resident. Refreshed
//! every 10 s; the allocator is logged once at start.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How often the allocator is asked.
pub const EVERY: Duration = Duration::from_secs(10);

/// `{allocator, state}` of `heap_bytes`: `jemalloc`; `in_use` or `free`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    allocator: &'static str,
    state: &'static str,
}

/// The `heap_bytes{state}` gauges.
#[derive(Clone, Debug, Default)]
pub struct HeapMetrics {
    bytes: Family<StateLabel, Gauge>,
}

impl HeapMetrics {
    /// Registers the family in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "heap_bytes",
            "Bytes the allocator holds: in use by the operator, or freed and kept resident (jemalloc, linked into the binary)",
            m.bytes.clone(),
        );
        m
    }

    /// Sets both gauges from `stats`.
    pub fn observe(&self, stats: terdut_heap::HeapStats) {
        let allocator = stats.allocator.name();
        for (state, v) in [("in_use", stats.in_use), ("free", stats.free)] {
            self.bytes
                .get_or_create(&StateLabel { allocator, state })
                .set(i64::try_from(v).unwrap_or(i64::MAX));
        }
    }

    /// The gauge of `state` under `allocator`, for tests.
    pub fn get(&self, allocator: &'static str, state: &'static str) -> i64 {
        self.bytes
            .get_or_create(&StateLabel { allocator, state })
            .get()
    }
}

/// Refreshes the gauges every `every` until `stop`; should the allocator not answer, it returns
/// at once and the family stays empty.
pub fn spawn(every: Duration, metrics: HeapMetrics, stop: CancellationToken) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut stats = terdut_heap::stats();
        if let Some(first) = stats {
            tracing::info!(
                allocator = first.allocator.name(),
                "heap figures from the allocator"
            );
        }
        while let Some(now) = stats {
            metrics.observe(now);
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
            stats = terdut_heap::stats();
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_gauges_show_what_the_allocator_holds() {
        let metrics = HeapMetrics::default();
        let stop = CancellationToken::new();
        let task = spawn(Duration::from_millis(10), metrics.clone(), stop.clone());
        tokio::time::sleep(Duration::from_millis(50)).await;
        stop.cancel();
        task.await.expect("the task ends on stop");
        if let Some(stats) = terdut_heap::stats() {
            assert!(
                metrics.get(stats.allocator.name(), "in_use") > 0,
                "in_use never set"
            );
        }
    }
}
