//! The two text formats of `/metrics`. prometheus-client writes OpenMetrics, which Prometheus
//! asks for by `Accept` header; everything else (curl, `promtool check metrics`, older
//! scrapers) gets the classic Prometheus text format 0.0.4, as client_golang does.
//!
//! The formats differ where this operator's metrics are concerned only in counters (OpenMetrics
//! names the family `foo` and the sample `foo_total`, the classic format names both
//! `foo_total`, and has no `foo_created`), in `# UNIT` lines and in the closing `# EOF`.

use std::collections::HashSet;

/// The classic format's content type.
pub const PROMETHEUS_TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// True when the `Accept` header asks for OpenMetrics.
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| a.contains("application/openmetrics-text"))
}

/// Rewrites OpenMetrics text into the classic Prometheus text format.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let counters: HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = line
            .strip_prefix("# HELP ")
            .map(|r| ("# HELP ", r))
            .or_else(|| line.strip_prefix("# TYPE ").map(|r| ("# TYPE ", r)));
        if let Some((prefix, rest)) = meta {
            let name = rest.split(' ').next().unwrap_or_default();
            if counters.contains(name) {
                out.push_str(prefix);
                out.push_str(name);
                out.push_str("_total");
                out.push_str(&rest[name.len()..]);
                out.push('\n');
                continue;
            }
        } else {
            let sample = line.split(['{', ' ']).next().unwrap_or_default();
            if let Some(family) = sample.strip_suffix("_created")
                && counters.contains(family)
            {
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const OM: &str = "# HELP reconciles Reconcile passes.\n# TYPE reconciles counter\n\
reconciles_total{kind=\"server\"} 3\nreconciles_created{kind=\"server\"} 1.7e9\n\
# HELP leader 1 while leading.\n# TYPE leader gauge\nleader 1\n\
# HELP d Duration.\n# TYPE d histogram\n# UNIT d seconds\nd_bucket{le=\"+Inf\"} 1\nd_sum 0.5\nd_count 1\n# EOF\n";

    #[test]
    fn counters_take_the_total_name_and_lose_created() {
        let t = to_prometheus_text(OM);
        assert!(t.contains(
            "# HELP reconciles_total Reconcile passes.\n# TYPE reconciles_total counter\n"
        ));
        assert!(t.contains("reconciles_total{kind=\"server\"} 3\n"));
        assert!(!t.contains("_created"));
    }

    #[test]
    fn gauges_and_histograms_pass_through_without_eof_or_unit() {
        let t = to_prometheus_text(OM);
        assert!(t.contains("# TYPE leader gauge\nleader 1\n"));
        assert!(t.contains("d_bucket{le=\"+Inf\"} 1\nd_sum 0.5\nd_count 1\n"));
        assert!(!t.contains("# EOF") && !t.contains("# UNIT"));
    }

    #[test]
    fn negotiation() {
        assert!(wants_openmetrics(Some(
            "application/openmetrics-text;version=1.0.0,text/plain;q=0.5"
        )));
        assert!(!wants_openmetrics(Some("text/plain")));
        assert!(!wants_openmetrics(None));
    }
}
