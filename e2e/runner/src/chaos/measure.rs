//! Reading what a storm cost: the operator's counters from its `/metrics` text, the WARN and
//! ERROR lines of its log (text format), and the kube-apiserver's own 409 answers.

use std::collections::BTreeMap;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

/// One counter: family (without `terdut_operator_` and `_total`) and its sorted labels.
pub type Series = (String, Vec<(String, String)>);
pub type Sample = BTreeMap<Series, f64>;

static SERIES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^terdut_operator_([a-z_]+?)(?:_total)?\{([^}]*)\}\s+([0-9.eE+-]+)$")
        .expect("a valid pattern")
});
static ANSI: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\x1b\[[0-9;]*m").expect("a valid pattern"));
static LEVEL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\S+\s+(WARN|ERROR)\s").expect("a valid pattern"));
static FIELD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\s\w+=").expect("a valid pattern"));
static RESOURCE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"resource="([^"]*)""#).expect("a valid pattern"));

/// The labelled `terdut_operator_*` series of an exposition text.
pub fn parse_metrics(text: &str) -> Sample {
    let mut out = Sample::new();
    for line in text.lines() {
        let Some(c) = SERIES.captures(line) else {
            continue;
        };
        let Ok(value) = c[3].parse::<f64>() else {
            continue;
        };
        let mut labels: Vec<(String, String)> = c[2]
            .replace('"', "")
            .split(',')
            .filter(|kv| !kv.is_empty())
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                (k.to_owned(), v.to_owned())
            })
            .collect();
        labels.sort();
        out.insert((c[1].to_owned(), labels), value);
    }
    out
}

/// Counter increases; a restarted process starts at 0, so a value below the old one is all
/// increase.
pub fn delta(before: &Sample, after: &Sample) -> Sample {
    after
        .iter()
        .map(|(k, v)| {
            let old = before.get(k).copied().unwrap_or(0.0);
            (k.clone(), if *v >= old { v - old } else { *v })
        })
        .collect()
}

pub fn total(sample: &Sample, family: &str) -> f64 {
    sample
        .iter()
        .filter(|((f, _), _)| f == family)
        .map(|(_, v)| v)
        .sum()
}

/// Sums of `family` per value of `label` ("" where it is absent).
pub fn by_label(sample: &Sample, family: &str, label: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for ((f, labels), v) in sample {
        if f != family {
            continue;
        }
        let key = labels
            .iter()
            .find(|(k, _)| k == label)
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        *out.entry(key).or_insert(0.0) += v;
    }
    out
}

/// The lines appended to a log between [`open`](Self::open) and [`lines`](Self::lines).
#[derive(Debug)]
pub struct LogWindow {
    path: PathBuf,
    offset: u64,
}

impl LogWindow {
    pub fn open(path: &Path) -> std::io::Result<Self> {
        Ok(Self {
            path: path.to_owned(),
            offset: std::fs::metadata(path)?.len(),
        })
    }

    pub fn lines(&self) -> std::io::Result<Vec<String>> {
        let mut f = std::fs::File::open(&self.path)?;
        f.seek(SeekFrom::Start(self.offset))?;
        let mut bytes = vec![];
        f.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes)
            .lines()
            .map(str::to_owned)
            .collect())
    }
}

/// Not the operator's doing: kube-client warns once per client built from a kubeconfig with
/// insecure-skip-tls-verify (the local control plane's), and the supervisor warns when the
/// crash-window test hook (`--test-hooks`) panics an actor on purpose.
const SETUP_NOISE: [&str; 2] = ["Server cert bypassed", "injected fault on "];

fn noise(line: &str) -> bool {
    SETUP_NOISE.iter().any(|n| line.contains(n))
}

/// `(level, rest of the line)` of a WARN or ERROR line that is not set-up noise, colour codes
/// stripped.
fn warning(line: &str) -> Option<(String, String)> {
    let plain = ANSI.replace_all(line, "");
    if noise(&plain) {
        return None;
    }
    let c = LEVEL.captures(&plain)?;
    let end = c.get(0).map_or(0, |m| m.end());
    Some((c[1].to_owned(), plain[end..].to_owned()))
}

/// `(WARN lines, ERROR lines)`.
pub fn levels(lines: &[String]) -> (usize, usize) {
    let found: Vec<String> = lines
        .iter()
        .filter_map(|l| warning(l))
        .map(|(l, _)| l)
        .collect();
    let warn = found.iter().filter(|l| *l == "WARN").count();
    (warn, found.len() - warn)
}

/// The `top` most frequent WARN/ERROR messages (target and fields dropped), most frequent
/// first, ties in the order first seen.
pub fn warn_messages(lines: &[String], top: usize) -> Vec<(String, usize)> {
    let mut counts: Vec<(String, usize)> = vec![];
    for (_, rest) in lines.iter().filter_map(|l| warning(l)) {
        let msg = rest.split_once(": ").map_or(rest.as_str(), |(_, m)| m);
        let msg = FIELD.splitn(msg, 2).next().unwrap_or_default().trim();
        let msg: String = msg.chars().take(80).collect();
        match counts.iter_mut().find(|(m, _)| *m == msg) {
            Some((_, n)) => *n += 1,
            None => counts.push((msg, 1)),
        }
    }
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    counts.truncate(top);
    counts
}

/// `{resource: count}` of the 409 answers in the kube-apiserver's `/metrics`
/// (`apiserver_request_total{code="409"}`, since it started).
pub fn apiserver_409s(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        if !line.starts_with("apiserver_request_total{") || !line.contains(r#"code="409""#) {
            continue;
        }
        let resource = RESOURCE
            .captures(line)
            .map(|c| c[1].to_owned())
            .unwrap_or_default();
        let value = line
            .rsplit_once(' ')
            .and_then(|(_, v)| v.parse::<f64>().ok())
            .unwrap_or(0.0);
        *out.entry(resource).or_insert(0.0) += value;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_read_by_family_and_label() {
        let text = "# HELP x\n\
            terdut_operator_reconciles_total{kind=\"team\"} 7\n\
            terdut_operator_reconcile_errors_total{kind=\"team\",category=\"transient\"} 2\n\
            terdut_operator_reconcile_errors_total{kind=\"source\",category=\"waiting\"} 3\n\
            terdut_operator_build_info 1\n";
        let s = parse_metrics(text);
        assert_eq!(total(&s, "reconciles"), 7.0);
        assert_eq!(total(&s, "reconcile_errors"), 5.0);
        let by = by_label(&s, "reconcile_errors", "category");
        assert_eq!((by["transient"], by["waiting"]), (2.0, 3.0));
        let restarted = parse_metrics("terdut_operator_reconciles_total{kind=\"team\"} 3\n");
        assert_eq!(total(&delta(&s, &restarted), "reconciles"), 3.0);
    }

    #[test]
    fn warnings_are_counted_without_noise_and_grouped_by_message() {
        let lines: Vec<String> = [
            "2026-12-01T10:00:00Z  WARN terdut_actors::pipeline::driver: reconcile failed kind=team name=a",
            "\x1b[2m2026-12-01T10:00:01Z\x1b[0m \x1b[33m WARN\x1b[0m kube_client: watch error (retrying with backoff) err=x",
            "2026-12-01T10:00:02Z  WARN terdut_actors::pipeline::driver: reconcile failed kind=team name=b",
            "2026-12-01T10:00:03Z ERROR kube: boom",
            "2026-12-01T10:00:04Z  WARN kube_client: Server cert bypassed",
            "2026-12-01T10:00:05Z  INFO terdut: fine",
        ]
        .map(str::to_owned)
        .into();
        assert_eq!(levels(&lines), (3, 1));
        let top = warn_messages(&lines, 5);
        assert_eq!(top[0], ("reconcile failed".to_owned(), 2));
        assert_eq!(
            top[1],
            ("watch error (retrying with backoff)".to_owned(), 1)
        );
    }

    #[test]
    fn conflicts_are_summed_per_resource() {
        let text = "apiserver_request_total{code=\"409\",resource=\"secrets\",verb=\"PUT\"} 2\n\
            apiserver_request_total{code=\"409\",resource=\"secrets\",verb=\"PATCH\"} 1\n\
            apiserver_request_total{code=\"200\",resource=\"secrets\",verb=\"PUT\"} 9\n";
        assert_eq!(apiserver_409s(text)["secrets"], 3.0);
    }
}
