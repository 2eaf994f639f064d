//! Reconcile-level metrics of the operator process.
//!
//! Families are registered once and cloned into every reconciler; prometheus metrics share
//! their atomics on clone, so [`OperatorMetrics`] is a cheap handle. Label values are plain
//! strings so that error types can pass their own `category()` without a conversion layer.
//!
//! `kube_writes_total{kind,verb}` exists so tests (and dashboards) can assert that a no-op
//! resync writes nothing to the API server: every write site calls [`OperatorMetrics::kube_write`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// `{kind}`: the reconciled kind, e.g. `server`, `team`, `alert_source`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    /// Reconciled kind.
    pub kind: String,
}

/// `{kind,outcome}` of `reconciles_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// Reconciled kind.
    pub kind: String,
    /// `changed`, `unchanged` or `error` by convention.
    pub outcome: String,
}

/// `{kind,category}` of `reconcile_errors_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CategoryLabels {
    /// Reconciled kind.
    pub kind: String,
    /// The error's category, e.g. `kube`, `terdut_api`, `invalid_spec`.
    pub category: String,
}

/// `{kind,verb}` of `kube_writes_total`; `kind` is the written Kubernetes kind here.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    /// Written kind, e.g. `Deployment`.
    pub kind: String,
    /// `create`, `apply`, `patch`, `replace` or `delete`.
    pub verb: String,
}

/// `{kind,ready,reason}` of `objects`: the Ready condition of the objects in the leader's
/// caches (`crate::census`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct ObjectLabels {
    /// `server`, `team` or `source`.
    pub kind: String,
    /// The Ready condition's status: `True`, `False`, or `Unknown` (also when there is none).
    pub ready: String,
    /// The Ready condition's reason; empty when there is none.
    pub reason: String,
}

type HistogramFamily = Family<KindLabel, Histogram, fn() -> Histogram>;

/// `{question}` of `parent_call_duration_seconds`: `credentials` or `consent`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QuestionLabel {
    pub question: String,
}

/// From 50 µs to 5 s on a 1-2.5-5 ladder, with an edge at exactly 1 ms: a server actor answers
/// from its state, so anything above a millisecond is a mailbox queue (docs/performance.md,
/// the 1 ms target), and the 5 s call timeout cuts the rest.
fn question_histogram() -> Histogram {
    Histogram::new(QUESTION_BUCKETS)
}

/// Seconds; see [`question_histogram`].
const QUESTION_BUCKETS: [f64; 16] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0,
];

/// Reconcile durations from 5 ms to ~41 s: a reconcile is a handful of API round trips, and
/// anything beyond the top bucket is a stuck call that the timeouts should have cut.
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 14))
}

/// All operator-process metric families. `Default` gives unregistered families, for tests.
#[derive(Clone, Debug)]
pub struct OperatorMetrics {
    reconciles: Family<OutcomeLabels, Counter>,
    reconcile_errors: Family<CategoryLabels, Counter>,
    reconcile_duration: HistogramFamily,
    drift_corrections: Family<KindLabel, Counter>,
    kube_writes: Family<WriteLabels, Counter>,
    /// Unregistered sum over all `kube_writes` series: families cannot be iterated.
    kube_writes_sum: Counter,
    /// Unregistered: passes by kind over every outcome, for [`passes`](Self::passes).
    passes_by_kind: Family<KindLabel, Counter>,
    leader: Gauge,
    event_failures: Counter,
    passes_waiting: Family<KindLabel, Gauge>,
    passes_running: Family<KindLabel, Gauge>,
    parent_calls: Family<QuestionLabel, Histogram, fn() -> Histogram>,
    objects: Family<ObjectLabels, Gauge>,
    /// Every label set `objects` has, with the censuses it has been empty for in a row: one
    /// no object has any more is set to 0 rather than left at its last count, and removed
    /// after [`EMPTY_CENSUSES_KEPT`] (families cannot be iterated).
    objects_seen: Arc<Mutex<BTreeMap<ObjectLabels, u32>>>,
}

/// How many censuses in a row (5 s apart, `crate::census::PERIOD`) a series of `objects` stays
/// at 0 before it is removed: a minute, so an alert on it resolves and a graph shows the drop.
pub const EMPTY_CENSUSES_KEPT: u32 = 12;

impl Default for OperatorMetrics {
    fn default() -> Self {
        Self {
            reconciles: Family::default(),
            reconcile_errors: Family::default(),
            reconcile_duration: Family::new_with_constructor(duration_histogram),
            drift_corrections: Family::default(),
            kube_writes: Family::default(),
            kube_writes_sum: Counter::default(),
            passes_by_kind: Family::default(),
            leader: Gauge::default(),
            event_failures: Counter::default(),
            passes_waiting: Family::default(),
            passes_running: Family::default(),
            parent_calls: Family::new_with_constructor(question_histogram),
            objects: Family::default(),
            objects_seen: Arc::default(),
        }
    }
}

impl OperatorMetrics {
    /// Register the families in `registry` (counters get `_total` from the encoder).
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "reconciles",
            "Reconcile passes by kind and outcome",
            m.reconciles.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Failed reconcile passes by kind and error category",
            m.reconcile_errors.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Wall time of one reconcile pass",
            m.reconcile_duration.clone(),
        );
        registry.register(
            "drift_corrections",
            "Owned objects rewritten because they differed from the desired state",
            m.drift_corrections.clone(),
        );
        registry.register(
            "kube_writes",
            "Writes to the Kubernetes API by written kind and verb",
            m.kube_writes.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader Lease",
            m.leader.clone(),
        );
        registry.register(
            "event_publish_failures",
            "Kubernetes Events that could not be published",
            m.event_failures.clone(),
        );
        registry.register(
            "reconcile_passes_waiting",
            "Passes queued for a slot of --max-concurrent-reconciles",
            m.passes_waiting.clone(),
        );
        registry.register(
            "reconcile_passes_running",
            "Passes holding a slot of --max-concurrent-reconciles",
            m.passes_running.clone(),
        );
        registry.register(
            "parent_call_duration_seconds",
            "How long a team or alert-source pass waited for its TerdutServer actor's answer",
            m.parent_calls.clone(),
        );
        registry.register(
            "objects",
            "Objects in the leader's caches by kind and by the status and reason of their Ready condition",
            m.objects.clone(),
        );
        m
    }

    /// Sets `objects` to `counts`; a label set counted before and absent now goes to 0, and is
    /// removed once it has been absent for [`EMPTY_CENSUSES_KEPT`] censuses.
    pub fn set_objects(&self, counts: &BTreeMap<ObjectLabels, i64>) {
        let mut seen = self
            .objects_seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for labels in counts.keys() {
            seen.insert(labels.clone(), 0);
        }
        seen.retain(|labels, empty| match counts.get(labels) {
            Some(n) => {
                self.objects.get_or_create(labels).set(*n);
                true
            }
            None => {
                *empty += 1;
                if *empty > EMPTY_CENSUSES_KEPT {
                    self.objects.remove(labels);
                    false
                } else {
                    self.objects.get_or_create(labels).set(0);
                    true
                }
            }
        });
    }

    /// A child's question to its server actor took `took`.
    pub fn parent_call(&self, question: &str, took: Duration) {
        self.parent_calls
            .get_or_create(&QuestionLabel {
                question: question.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// One finished reconcile pass: counts it by `outcome` and records its duration.
    pub fn reconciled(&self, kind: &str, outcome: &str, took: Duration) {
        self.reconciles
            .get_or_create(&OutcomeLabels {
                kind: kind.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
        let label = KindLabel {
            kind: kind.to_owned(),
        };
        self.passes_by_kind.get_or_create(&label).inc();
        self.reconcile_duration
            .get_or_create(&label)
            .observe(took.as_secs_f64());
    }

    /// A failed reconcile pass, by the error's category.
    pub fn reconcile_error(&self, kind: &str, category: &str) {
        self.reconcile_errors
            .get_or_create(&CategoryLabels {
                kind: kind.to_owned(),
                category: category.to_owned(),
            })
            .inc();
    }

    /// An owned object that drifted and was put back.
    pub fn drift_corrected(&self, kind: &str) {
        self.drift_corrections
            .get_or_create(&KindLabel {
                kind: kind.to_owned(),
            })
            .inc();
    }

    /// One write to the API server; call it at every write site.
    pub fn kube_write(&self, kind: &str, verb: &str) {
        self.kube_writes
            .get_or_create(&WriteLabels {
                kind: kind.to_owned(),
                verb: verb.to_owned(),
            })
            .inc();
        self.kube_writes_sum.inc();
    }

    /// Passes of `kind` finished so far, whatever their outcome: one lookup and an atomic read,
    /// cheap enough to poll every millisecond without disturbing what is measured (`just
    /// bench`'s dispatch step; encoding the registry that often took a worker thread from the
    /// operator's runtime, docs/performance.md run 22).
    pub fn passes(&self, kind: &str) -> u64 {
        let label = KindLabel {
            kind: kind.to_owned(),
        };
        self.passes_by_kind.get(&label).map_or(0, |c| c.get())
    }

    /// Writes so far of one kind and verb.
    pub fn kube_writes(&self, kind: &str, verb: &str) -> u64 {
        self.kube_writes
            .get_or_create(&WriteLabels {
                kind: kind.to_owned(),
                verb: verb.to_owned(),
            })
            .get()
    }

    /// Writes so far across all kinds and verbs: snapshot before and after a resync.
    pub fn kube_writes_total(&self) -> u64 {
        self.kube_writes_sum.get()
    }

    /// Sets the `leader` gauge.
    pub fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    /// `reconcile_passes_waiting{kind}` and `reconcile_passes_running{kind}`, for the
    /// [`PassLimit`](crate::pass_limit::PassLimit) of `kind`.
    pub fn pass_gauges(&self, kind: &str) -> (Gauge, Gauge) {
        let label = KindLabel {
            kind: kind.to_owned(),
        };
        (
            self.passes_waiting.get_or_create(&label).clone(),
            self.passes_running.get_or_create(&label).clone(),
        )
    }

    /// The failure counter the [`EventPublisher`](super::events::EventPublisher) increments.
    pub fn event_failures(&self) -> Counter {
        self.event_failures.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::OperatorMetrics;
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;
    use std::time::Duration;

    #[test]
    fn exposes_every_family_with_its_labels() {
        let mut registry = Registry::default();
        let m = OperatorMetrics::register(&mut registry);
        m.reconciled("server", "changed", Duration::from_millis(30));
        m.reconcile_error("server", "kube");
        m.drift_corrected("server");
        m.kube_write("Deployment", "apply");
        m.kube_write("Secret", "create");
        m.set_leader(true);
        m.event_failures().inc();
        let (waiting, running) = m.pass_gauges("team");
        waiting.set(3);
        running.set(2);

        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        for line in [
            r#"reconciles_total{kind="server",outcome="changed"} 1"#,
            r#"reconcile_errors_total{kind="server",category="kube"} 1"#,
            r#"reconcile_duration_seconds_count{kind="server"} 1"#,
            r#"reconcile_duration_seconds_bucket{le="0.04",kind="server"} 1"#,
            r#"drift_corrections_total{kind="server"} 1"#,
            r#"kube_writes_total{kind="Deployment",verb="apply"} 1"#,
            "leader 1",
            "event_publish_failures_total 1",
            r#"reconcile_passes_waiting{kind="team"} 3"#,
            r#"reconcile_passes_running{kind="team"} 2"#,
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        assert_eq!(m.kube_writes("Deployment", "apply"), 1);
        assert_eq!(m.kube_writes("Deployment", "delete"), 0);
        assert_eq!(m.kube_writes_total(), 2);
    }

    #[test]
    fn passes_count_every_outcome_of_one_kind_as_reconciles_total_does() {
        let mut registry = Registry::default();
        let m = OperatorMetrics::register(&mut registry);
        assert_eq!(m.passes("team"), 0, "none yet");
        for outcome in ["ok", "error", "waiting"] {
            m.reconciled("team", outcome, Duration::from_millis(5));
        }
        m.reconciled("source", "ok", Duration::from_millis(5));
        assert_eq!(m.passes("team"), 3);
        assert_eq!(m.passes("source"), 1);
        assert_eq!(m.passes("server"), 0);
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        let exposed: u64 = text
            .lines()
            .filter(|l| l.starts_with(r#"reconciles_total{kind="team","#))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum();
        assert_eq!(exposed, m.passes("team"), "{text}");
    }

    #[test]
    fn an_emptied_object_series_goes_to_zero() {
        use super::ObjectLabels;
        use std::collections::BTreeMap;
        let mut registry = Registry::default();
        let m = OperatorMetrics::register(&mut registry);
        let labels = |ready: &str, reason: &str| ObjectLabels {
            kind: "team".into(),
            ready: ready.into(),
            reason: reason.into(),
        };
        m.set_objects(&BTreeMap::from([
            (labels("False", "UnknownUser"), 3),
            (labels("True", "Ready"), 40),
        ]));
        m.set_objects(&BTreeMap::from([(labels("True", "Ready"), 43)]));
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        for line in [
            r#"objects{kind="team",ready="False",reason="UnknownUser"} 0"#,
            r#"objects{kind="team",ready="True",reason="Ready"} 43"#,
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }

    #[test]
    fn a_series_that_stays_empty_is_dropped() {
        use super::{EMPTY_CENSUSES_KEPT, ObjectLabels};
        use std::collections::BTreeMap;
        let mut registry = Registry::default();
        let m = OperatorMetrics::register(&mut registry);
        let labels = |reason: &str| ObjectLabels {
            kind: "team".into(),
            ready: "False".into(),
            reason: reason.into(),
        };
        let text = |registry: &Registry| {
            let mut text = String::new();
            encode(&mut text, registry).expect("encodes");
            text
        };
        m.set_objects(&BTreeMap::from([(labels("UnknownUser"), 1)]));
        for _ in 0..EMPTY_CENSUSES_KEPT {
            m.set_objects(&BTreeMap::new());
            assert!(
                text(&registry).contains(r#"reason="UnknownUser"} 0"#),
                "kept at 0 for a while"
            );
        }
        m.set_objects(&BTreeMap::from([(labels("InvalidSpec"), 2)]));
        let now = text(&registry);
        assert!(!now.contains("UnknownUser"), "dropped:\n{now}");
        assert!(now.contains(r#"reason="InvalidSpec"} 2"#), "{now}");
        // Counted again, it is back.
        m.set_objects(&BTreeMap::from([(labels("UnknownUser"), 1)]));
        assert!(text(&registry).contains(r#"reason="UnknownUser"} 1"#));
    }
}
