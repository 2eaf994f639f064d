//! `heap_bytes{state}`: what the allocator holds, in use and freed-but-kept
//! (docs/adr/0009-heap-figures-from-glibc.md).
//!
//! After convergence most actors passivate (docs/design.md §5, ADR 0008) and free what they
//! held, but glibc keeps freed blocks that sit between live ones, so the RSS stays near its
//! peak. `in_use` is what the operator needs; `RSS − in_use − the binary` is the allocator's
//! retention. Refreshed every 10 s.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How often the allocator is asked.
pub const EVERY: Duration = Duration::from_secs(10);

/// `{state}` of `heap_bytes`: `in_use` or `free`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
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
            "Bytes the allocator holds: in use by the operator, or freed and kept (glibc only)",
            m.bytes.clone(),
        );
        m
    }

    /// Sets both gauges from `stats`.
    pub fn observe(&self, stats: terdut_heap::HeapStats) {
        for (state, v) in [("in_use", stats.in_use), ("free", stats.free)] {
            self.bytes
                .get_or_create(&StateLabel { state })
                .set(i64::try_from(v).unwrap_or(i64::MAX));
        }
    }

    /// The gauge of `state`, for tests.
    pub fn get(&self, state: &'static str) -> i64 {
        self.bytes.get_or_create(&StateLabel { state }).get()
    }
}

/// Refreshes the gauges every `every` until `stop`; where the allocator cannot be asked
/// (not glibc) it returns at once and the family stays empty.
pub fn spawn(every: Duration, metrics: HeapMetrics, stop: CancellationToken) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let Some(stats) = terdut_heap::stats() else {
                return;
            };
            metrics.observe(stats);
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
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
        if terdut_heap::stats().is_some() {
            assert!(metrics.get("in_use") > 0, "in_use never set");
        }
    }
}
