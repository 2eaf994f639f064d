//! Supervision metrics, one series per actor kind (`server`, `team`, `alert_source`).
//!
//! Families are created once at registration and cloned into every supervisor; prometheus
//! metrics share their atomics on clone, so [`KindMetrics`] is a cheap handle.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// From 10 µs to ~1.3 s: an event reaches its actor in microseconds when nothing queues.
fn dispatch_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.00001, 2.0, 18))
}

/// The `kind` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    /// Actor kind, e.g. `server`.
    pub kind: String,
}

/// All supervision metric families. `Default` gives unregistered families, for tests.
#[derive(Clone, Debug)]
pub struct SupervisorMetrics {
    restarts: Family<KindLabel, Counter>,
    active: Family<KindLabel, Gauge>,
    mailbox_depth: Family<KindLabel, Gauge>,
    crash_looping: Family<KindLabel, Gauge>,
    passive: Family<KindLabel, Gauge>,
    waiting: Family<KindLabel, Gauge>,
    dispatch: Family<KindLabel, Histogram, fn() -> Histogram>,
}

impl Default for SupervisorMetrics {
    fn default() -> Self {
        Self {
            restarts: Family::default(),
            active: Family::default(),
            mailbox_depth: Family::default(),
            crash_looping: Family::default(),
            passive: Family::default(),
            waiting: Family::default(),
            dispatch: Family::new_with_constructor(dispatch_histogram),
        }
    }
}

impl SupervisorMetrics {
    /// Register the families in `registry` (counters get `_total` from the encoder).
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "actor_restarts",
            "Child actors restarted by their supervisor",
            m.restarts.clone(),
        );
        registry.register(
            "actors_active",
            "Child actors currently running",
            m.active.clone(),
        );
        registry.register(
            "actor_mailbox_depth",
            "Messages queued to child actors and not yet handled",
            m.mailbox_depth.clone(),
        );
        registry.register(
            "actors_crash_looping",
            "Child actors parked after exceeding the restart-intensity limit",
            m.crash_looping.clone(),
        );
        registry.register(
            "actors_passive",
            "Objects converged and idle, kept as an entry with no actor (passivation)",
            m.passive.clone(),
        );
        registry.register(
            "actors_waiting",
            "Passive objects due a pass with no change of their own (a relist, a resync), \
             waiting for a place in the wake budget",
            m.waiting.clone(),
        );
        registry.register(
            "actor_dispatch_seconds",
            "From an informer event to the start of the pass it asked for",
            m.dispatch.clone(),
        );
        m
    }

    /// Handles on the series of one kind.
    pub fn kind(&self, kind: &str) -> KindMetrics {
        let label = KindLabel {
            kind: kind.to_owned(),
        };
        KindMetrics {
            restarts: self.restarts.get_or_create(&label).clone(),
            active: self.active.get_or_create(&label).clone(),
            mailbox_depth: self.mailbox_depth.get_or_create(&label).clone(),
            crash_looping: self.crash_looping.get_or_create(&label).clone(),
            passive: self.passive.get_or_create(&label).clone(),
            waiting: self.waiting.get_or_create(&label).clone(),
            dispatch: self.dispatch.get_or_create(&label).clone(),
        }
    }
}

/// The series of one kind; clones share the underlying values.
#[derive(Clone, Debug)]
pub struct KindMetrics {
    /// `actor_restarts_total{kind}`.
    pub restarts: Counter,
    /// `actors_active{kind}`.
    pub active: Gauge,
    /// `actor_mailbox_depth{kind}`.
    pub mailbox_depth: Gauge,
    /// `actors_crash_looping{kind}`.
    pub crash_looping: Gauge,
    /// `actors_passive{kind}`.
    pub passive: Gauge,
    /// `actors_waiting{kind}`.
    pub waiting: Gauge,
    /// `actor_dispatch_seconds{kind}`.
    pub dispatch: Histogram,
}

impl Default for KindMetrics {
    fn default() -> Self {
        SupervisorMetrics::default().kind("")
    }
}

#[cfg(test)]
mod tests {
    use super::SupervisorMetrics;
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    #[test]
    fn exposes_the_four_series_with_a_kind_label() {
        let mut registry = Registry::default();
        let metrics = SupervisorMetrics::register(&mut registry);
        let server = metrics.kind("server");
        server.restarts.inc();
        server.active.set(2);
        metrics.kind("server").mailbox_depth.inc();
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        assert!(
            text.contains(r#"actor_restarts_total{kind="server"} 1"#),
            "{text}"
        );
        assert!(text.contains(r#"actors_active{kind="server"} 2"#), "{text}");
        assert!(
            text.contains(r#"actor_mailbox_depth{kind="server"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"actors_crash_looping{kind="server"} 0"#),
            "{text}"
        );
    }
}
