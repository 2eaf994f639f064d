//! The chart's Grafana dashboard against the real Prometheus of the node scenario: every
//! panel's every query, with the dashboard's variables filled in as Grafana would, must return
//! at least one series. A panel that shows "No data" on a healthy install is a defect a user
//! sees on day one (a renamed metric, a label that does not exist, a counter never touched).

use std::time::Duration;

use serde_json::Value;

use super::prometheus;
use crate::run::Run;
use crate::wait;

/// The dashboard the chart ships (`chart/terdut-operator/files/dashboard.json`).
const DASHBOARD: &str = include_str!("../../../../chart/terdut-operator/files/dashboard.json");

/// What `$job` resolves to: the scrape job of the chart's ServiceMonitor
/// (`label_values(terdut_operator_leader, job)` in the dashboard).
const JOB: &str = "serviceMonitor/.*terdut-operator.*";

/// What `$__rate_interval` resolves to: four scrapes of the scenario's 5 s interval and more,
/// so a rate has its two samples, as Grafana's own choice (≥ 4 × the scrape interval) does.
const RATE_INTERVAL: &str = "1m";

/// PURE: every (panel title, PromQL) of `dashboard`, variables filled in.
pub fn queries(dashboard: &str) -> anyhow::Result<Vec<(String, String)>> {
    let d: Value = serde_json::from_str(dashboard)?;
    let mut out = vec![];
    for panel in d["panels"].as_array().into_iter().flatten() {
        let title = panel["title"].as_str().unwrap_or("(untitled)");
        for target in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = target["expr"].as_str() {
                let expr = expr
                    .replace("$__rate_interval", RATE_INTERVAL)
                    .replace("$job", JOB);
                out.push((title.to_owned(), expr));
            }
        }
    }
    anyhow::ensure!(!out.is_empty(), "the dashboard has no queries");
    Ok(out)
}

/// Each query, waited for until it returns data (rates need their scrapes).
pub async fn check(run: &Run) -> anyhow::Result<()> {
    for (title, expr) in queries(DASHBOARD)? {
        let got = wait::until(
            &format!("panel {title:?} has data"),
            Duration::from_secs(90),
            || async {
                let series = prometheus::query(run, &expr).await?;
                Ok((!series.is_empty()).then_some(series.len()))
            },
        )
        .await;
        run.checks.check_result(
            &format!("dashboard panel {title:?} returns data: {expr}"),
            &got,
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_query_has_its_variables_filled_in() {
        let q = queries(DASHBOARD).unwrap();
        assert!(q.len() >= 10, "{q:?}");
        for (title, expr) in &q {
            assert!(!expr.contains('$'), "{title}: {expr}");
        }
        assert!(
            q.iter()
                .any(|(_, e)| e.contains(&format!("job=~\"{JOB}\"")))
        );
        assert!(q.iter().any(|(_, e)| e.contains("[1m]")));
    }
}
