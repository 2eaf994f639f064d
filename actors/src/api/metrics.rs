//! Request metrics of the terdut-server API client: a counter and a duration histogram per
//! endpoint and outcome. The endpoint label is a route template (`PUT /api/v1/teams/{id}/name`),
//! never an id, so the label set stays bounded; the outcome is `ok` when the call did what was
//! asked (a 404 on DELETE is `ok`: already gone) or an
//! [`ApiError::category`](super::ApiError::category).

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The labels of both metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub endpoint: &'static str,
    pub outcome: &'static str,
}

fn new_histogram() -> Histogram {
    // 5ms .. ~20s: a healthy in-cluster call sits in the first buckets, a timeout in the last.
    Histogram::new(exponential_buckets(0.005, 2.0, 13))
}

/// The client's metrics. Cheap to clone (shared handles): one instance is registered once and
/// given to every [`TerdutClient`](super::TerdutClient).
#[derive(Clone, Debug)]
pub struct ApiMetrics {
    requests: Family<RequestLabels, Counter>,
    duration: Family<RequestLabels, Histogram, fn() -> Histogram>,
}

impl Default for ApiMetrics {
    /// Unregistered metrics: counted, but exported nowhere. Tests use it; production calls
    /// [`register`](Self::register).
    fn default() -> Self {
        Self {
            requests: Family::default(),
            duration: Family::new_with_constructor(new_histogram as fn() -> Histogram),
        }
    }
}

impl ApiMetrics {
    /// Creates the metrics and registers them as `terdut_api_requests_total`,
    /// `terdut_api_request_duration_seconds` and `terdut_api_answer_bytes` (the process's
    /// [`AnswerBudget`](super::AnswerBudget) held now).
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "terdut_api_answer_bytes",
            "Bytes of terdut-server answers being read or decoded now, process-wide",
            super::AnswerBudget::process().held_gauge(),
        );
        registry.register(
            "terdut_api_requests",
            "Requests to terdut-server by endpoint and outcome",
            metrics.requests.clone(),
        );
        registry.register(
            "terdut_api_request_duration_seconds",
            "Duration of requests to terdut-server by endpoint and outcome",
            metrics.duration.clone(),
        );
        metrics
    }

    pub(crate) fn observe(&self, endpoint: &'static str, outcome: &'static str, took: Duration) {
        let labels = RequestLabels { endpoint, outcome };
        self.requests.get_or_create(&labels).inc();
        self.duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    /// How many requests were counted with these labels (for tests and debugging).
    pub fn count(&self, endpoint: &'static str, outcome: &'static str) -> u64 {
        self.requests
            .get_or_create(&RequestLabels { endpoint, outcome })
            .get()
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;

    use super::*;

    #[test]
    fn exports_by_route_template_and_outcome() {
        let mut registry = Registry::default();
        let m = ApiMetrics::register(&mut registry);
        m.observe("POST /api/v1/teams", "ok", Duration::from_millis(12));
        m.clone()
            .observe("POST /api/v1/teams", "transient", Duration::from_millis(3));
        let mut out = String::new();
        encode(&mut out, &registry).unwrap();
        assert!(
            out.contains(
                r#"terdut_api_requests_total{endpoint="POST /api/v1/teams",outcome="ok"} 1"#
            ),
            "{out}"
        );
        assert!(out.contains("terdut_api_request_duration_seconds_bucket"));
        assert_eq!(m.count("POST /api/v1/teams", "transient"), 1);
    }
}
