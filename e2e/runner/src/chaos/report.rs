//! What the run prints: narrative lines (`[chaos HH:MM:SS] ...`, UTC), one line per check as it
//! is made (`ok` or `FAIL` and why), the `figure:` lines at the end and the verdict
//! `chaos: N passed, M failed`. Details never carry a key: checks compare fingerprints and
//! name objects.

use std::sync::Mutex;

use terdut_e2e::tally::Tally;

/// One line of the run's narrative, on stdout.
pub fn log(msg: &str) {
    println!("[chaos {}] {msg}", terdut_testenv::hms_utc());
}

/// A failure's detail is cut here: a list of 200 pending objects says enough in its first
/// lines.
const DETAIL_MAX: usize = 800;

#[derive(Debug, Default)]
pub struct Report {
    tally: Tally,
    figures: Mutex<Vec<(String, String)>>,
}

impl Report {
    /// Records one verdict; `detail` is shown only when it failed.
    pub fn check(&self, name: &str, ok: bool, detail: &str) {
        if self.tally.count(ok) {
            log(&format!("ok   {name}"));
        } else {
            let detail: String = detail.chars().take(DETAIL_MAX).collect();
            let sep = if detail.is_empty() { "" } else { ": " };
            log(&format!("FAIL {name}{sep}{detail}"));
        }
    }

    /// A measurement for the summary: `figure: <what> <text>`.
    pub fn figure(&self, what: impl Into<String>, text: impl Into<String>) {
        if let Ok(mut f) = self.figures.lock() {
            f.push((what.into(), text.into()));
        }
    }

    pub fn print_figures(&self) {
        if let Ok(f) = self.figures.lock() {
            for (what, text) in f.iter() {
                log(&format!("figure: {what} {text}"));
            }
        }
    }

    pub fn failed(&self) -> u32 {
        self.tally.failed()
    }

    /// `chaos: N passed, M failed`.
    pub fn verdict(&self) -> String {
        format!("chaos: {}", self.tally.summary())
    }
}

/// `min 1.0s, median 1.5s, max 2.0s (n=2)`, or `n/a`.
pub fn summary(values: &[f64]) -> String {
    if values.is_empty() {
        return "n/a".into();
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    format!(
        "min {:.1}s, median {median:.1}s, max {:.1}s (n={n})",
        v[0],
        v[n - 1]
    )
}

#[cfg(test)]
mod tests {
    use super::summary;

    #[test]
    fn summaries_name_min_median_max() {
        assert_eq!(summary(&[]), "n/a");
        assert_eq!(
            summary(&[3.0, 1.0]),
            "min 1.0s, median 2.0s, max 3.0s (n=2)"
        );
        assert_eq!(
            summary(&[5.0, 1.0, 2.0]),
            "min 1.0s, median 2.0s, max 5.0s (n=3)"
        );
    }
}
