//! What a storm cost the operator, for the `figure:` lines and the "logs proportionate"
//! checks: reconcile passes, failed passes by category and kube writes (its `/metrics`), and
//! the WARN/ERROR lines it logged meanwhile.

use std::collections::BTreeMap;
use std::path::Path;

use crate::measure::{self, LogWindow, Sample};

#[derive(Debug)]
pub struct Cost {
    url: String,
    before: Sample,
    window: LogWindow,
}

#[derive(Debug)]
pub struct Spent {
    pub reconciles: f64,
    pub errors: BTreeMap<String, f64>,
    pub error_total: f64,
    pub kube_writes: f64,
    pub warn: usize,
    pub error_lines: usize,
    pub top: Vec<(String, usize)>,
}

/// The operator's counters now; none while it is between incarnations.
async fn scrape(http: &reqwest::Client, url: &str) -> Sample {
    let text = async { http.get(url).send().await?.error_for_status()?.text().await };
    text.await
        .map(|t| measure::parse_metrics(&t))
        .unwrap_or_default()
}

impl Cost {
    pub async fn start(http: &reqwest::Client, url: &str, log: &Path) -> anyhow::Result<Self> {
        Ok(Self {
            url: url.to_owned(),
            before: scrape(http, url).await,
            window: LogWindow::open(log)?,
        })
    }

    pub async fn finish(self, http: &reqwest::Client) -> anyhow::Result<Spent> {
        let d = measure::delta(&self.before, &scrape(http, &self.url).await);
        let lines = self.window.lines()?;
        let (warn, error_lines) = measure::levels(&lines);
        Ok(Spent {
            reconciles: measure::total(&d, "reconciles"),
            errors: measure::by_label(&d, "reconcile_errors", "category"),
            error_total: measure::total(&d, "reconcile_errors"),
            kube_writes: measure::total(&d, "kube_writes"),
            warn,
            error_lines,
            top: measure::warn_messages(&lines, 5),
        })
    }
}

impl Spent {
    /// The `figure:` text of a storm's cost.
    pub fn describe(&self) -> String {
        let errs: Vec<String> = self
            .errors
            .iter()
            .filter(|(_, v)| **v != 0.0)
            .map(|(k, v)| format!("{k} {v:.0}"))
            .collect();
        let top: Vec<String> = self.top.iter().map(|(m, n)| format!("{n}x {m}")).collect();
        let or_none = |v: Vec<String>, sep: &str| {
            if v.is_empty() {
                "none".to_owned()
            } else {
                v.join(sep)
            }
        };
        format!(
            "{:.0} passes, {:.0} failed ({}), {:.0} kube writes, {} WARN + {} ERROR log lines; \
             most frequent: {}",
            self.reconciles,
            self.error_total,
            or_none(errs, ", "),
            self.kube_writes,
            self.warn,
            self.error_lines,
            or_none(top, "; ")
        )
    }
}
