//! Reading the operator's own counters the way Prometheus would: encode the registry to text
//! and parse the samples. `OperatorMetrics` exposes only the write total as a getter; going
//! through the exposition format means the bench reports exactly what `/metrics` shows.

use std::collections::BTreeMap;

use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;

/// One encoded sample: metric name, labels, value.
#[derive(Clone, Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Every sample of the registry at one instant.
#[derive(Clone, Debug, Default)]
pub struct Scrape(Vec<Sample>);

impl Scrape {
    /// Encodes `registry` and parses it: every series of every family, a few hundred
    /// microseconds of one worker thread, so not something to poll every millisecond while a
    /// latency is measured (docs/performance.md run 22).
    pub fn take(registry: &Registry) -> Self {
        let mut text = String::new();
        // Encoding into a String cannot fail for the metric types the operator registers.
        let _ = encode(&mut text, registry);
        Self(text.lines().filter_map(parse_line).collect())
    }

    /// Sum of `name` over the series whose labels include every `(label, value)` of `filter`.
    pub fn sum(&self, name: &str, filter: &[(&str, &str)]) -> f64 {
        self.0
            .iter()
            .filter(|s| s.name == name)
            .filter(|s| {
                filter
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|s| s.value)
            .sum()
    }

    /// `name` summed by the values of `label`.
    pub fn by_label(&self, name: &str, label: &str) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for s in self.0.iter().filter(|s| s.name == name) {
            let key = s.labels.get(label).cloned().unwrap_or_default();
            *out.entry(key).or_insert(0.0) += s.value;
        }
        out
    }
}

impl Scrape {
    /// The `q` quantile of histogram `name` over what was observed since `before`, as the
    /// upper bound of the bucket it falls in (seconds), over the series matching `filter`;
    /// `None` when nothing was observed. An upper bound, as Prometheus' `histogram_quantile`
    /// without its interpolation: "p99 ≤ this".
    pub fn quantile_since(
        &self,
        before: &Scrape,
        name: &str,
        filter: &[(&str, &str)],
        q: f64,
    ) -> Option<f64> {
        let bucket = format!("{name}_bucket");
        let cumulative = |s: &Scrape| -> BTreeMap<String, f64> {
            let mut out = BTreeMap::new();
            for sample in s.0.iter().filter(|x| x.name == bucket) {
                let matches = filter
                    .iter()
                    .all(|(k, v)| sample.labels.get(*k).map(String::as_str) == Some(*v));
                if let (true, Some(le)) = (matches, sample.labels.get("le")) {
                    *out.entry(le.clone()).or_insert(0.0) += sample.value;
                }
            }
            out
        };
        let (now, then) = (cumulative(self), cumulative(before));
        let mut bounds: Vec<(f64, f64)> = now
            .iter()
            .map(|(le, n)| {
                let bound = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().unwrap_or(f64::INFINITY)
                };
                (bound, n - then.get(le).copied().unwrap_or(0.0))
            })
            .collect();
        bounds.sort_by(|a, b| a.0.total_cmp(&b.0));
        let total = bounds.last()?.1;
        if total <= 0.0 {
            return None;
        }
        bounds
            .iter()
            .find(|(_, n)| *n >= q * total)
            .map(|(bound, _)| *bound)
    }

    /// How many observations histogram `name` got since `before`.
    pub fn count_since(&self, before: &Scrape, name: &str, filter: &[(&str, &str)]) -> f64 {
        let count = format!("{name}_count");
        self.sum(&count, filter) - before.sum(&count, filter)
    }
}

/// `name{k="v",...} value` or `name value`; comments and `# EOF` are skipped.
fn parse_line(line: &str) -> Option<Sample> {
    if line.starts_with('#') || line.trim().is_empty() {
        return None;
    }
    let (head, value) = line.rsplit_once(' ')?;
    let value: f64 = value.parse().ok()?;
    let (name, labels) = match head.split_once('{') {
        Some((name, rest)) => (name, parse_labels(rest.strip_suffix('}')?)),
        None => (head, BTreeMap::new()),
    };
    Some(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// `k="v",k2="v2"`; values are label values the operator chose (no escaped quotes), but an
/// escaped quote is still skipped over correctly.
fn parse_labels(s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = s;
    while let Some((key, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, n)) = chars.next() {
                        value.push(n);
                    }
                }
                '"' => {
                    end = i + 1;
                    break;
                }
                c => value.push(c),
            }
        }
        out.insert(key.trim_start_matches(',').to_owned(), value);
        rest = &after[end.min(after.len())..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_counters_and_histogram_sums() {
        let text = "# HELP x y\nreconciles_total{kind=\"team\",outcome=\"ok\"} 5\n\
                    reconciles_total{kind=\"team\",outcome=\"error\"} 2\n\
                    reconciles_total{kind=\"source\",outcome=\"ok\"} 1\n\
                    reconcile_duration_seconds_sum{kind=\"team\"} 0.25\nleader 1\n# EOF\n";
        let s = Scrape(text.lines().filter_map(parse_line).collect());
        assert_eq!(s.sum("reconciles_total", &[("kind", "team")]), 7.0);
        assert_eq!(s.sum("reconciles_total", &[]), 8.0);
        assert_eq!(
            s.sum("reconcile_duration_seconds_sum", &[("kind", "team")]),
            0.25
        );
        assert_eq!(s.sum("leader", &[]), 1.0);
        let by = s.by_label("reconciles_total", "kind");
        assert_eq!(by["team"], 7.0);
        assert_eq!(by["source"], 1.0);
    }

    #[test]
    fn a_quantile_is_the_bound_of_the_bucket_it_falls_in_counting_only_new_observations() {
        let scrape = |counts: [u32; 3]| {
            let text = format!(
                "d_bucket{{kind=\"team\",le=\"0.001\"}} {}\n\
                 d_bucket{{kind=\"team\",le=\"0.01\"}} {}\n\
                 d_bucket{{kind=\"team\",le=\"+Inf\"}} {}\nd_count{{kind=\"team\"}} {}\n",
                counts[0], counts[1], counts[2], counts[2]
            );
            Scrape(text.lines().filter_map(parse_line).collect())
        };
        let before = scrape([10, 10, 10]);
        // 100 new observations: 98 under 1 ms, 2 under 10 ms.
        let after = scrape([108, 110, 110]);
        let f = [("kind", "team")];
        assert_eq!(after.quantile_since(&before, "d", &f, 0.5), Some(0.001));
        assert_eq!(after.quantile_since(&before, "d", &f, 0.99), Some(0.01));
        assert_eq!(after.count_since(&before, "d", &f), 100.0);
        assert_eq!(before.quantile_since(&before, "d", &f, 0.99), None);
    }
}
