//! kube-apiserver requests per client, read from the apiserver's audit log (the harness logs
//! every request of the operator identity at Metadata level, `terdut_testenv::audit`), not
//! from a peer's own counters. Each peer runs as that identity, one at a time, so the requests
//! of a window are the peer's. A request is logged when it completes, with the instant it was
//! received: a window counts the requests received in it (a watch opened in it is counted once
//! the watch ends, which is why windows are read after the peer stopped or later).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::{Value, json};

/// The audit log of the control plane this bench started.
#[derive(Clone, Debug)]
pub struct AuditLog {
    path: PathBuf,
}

/// Requests of the operator identity received in a window.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Requests {
    pub total: u64,
    /// `<verb> <resource>[/<subresource>]` → count.
    pub by_kind: BTreeMap<String, u64>,
    pub events: u64,
    pub writes: u64,
}

impl AuditLog {
    /// The newest `audit-*.log` in the collection directory (`$TERDUT_AUDIT_DIR`) or the control
    /// plane's own directory.
    pub fn find(cp_dir: &Path) -> anyhow::Result<Self> {
        let dir = terdut_testenv::audit::log_dir().unwrap_or_else(|| cp_dir.to_path_buf());
        let mut newest: Option<(SystemTime, PathBuf)> = None;
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("audit-") && name.ends_with(".log") {
                let at = entry.metadata()?.modified()?;
                if newest.as_ref().is_none_or(|(t, _)| at > *t) {
                    newest = Some((at, entry.path()));
                }
            }
        }
        let (_, path) =
            newest.ok_or_else(|| anyhow::anyhow!("no audit-*.log in {}", dir.display()))?;
        Ok(Self { path })
    }

    /// Bytes logged so far: grows with every audited request.
    pub fn size(&self) -> u64 {
        std::fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0)
    }

    /// The requests of the operator identity received in `[from, to)`.
    pub fn requests(&self, from: SystemTime, to: SystemTime) -> anyhow::Result<Requests> {
        let (from, to) = (rfc3339(from), rfc3339(to));
        let mut out = Requests::default();
        let file = std::fs::File::open(&self.path)?;
        for line in BufReader::new(file).lines() {
            let line = line?;
            // Cheap pre-filters before parsing: the identity and the completion stage.
            if !line.contains(terdut_testenv::audit::OPERATOR_USER) {
                continue;
            }
            let Ok(ev) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if ev["stage"] != "ResponseComplete"
                || ev["user"]["username"] != terdut_testenv::audit::OPERATOR_USER
            {
                continue;
            }
            let at = ev["requestReceivedTimestamp"].as_str().unwrap_or("");
            if at < from.as_str() || at >= to.as_str() {
                continue;
            }
            let verb = ev["verb"].as_str().unwrap_or("?");
            let resource = ev["objectRef"]["resource"].as_str().unwrap_or("-");
            let kind = match ev["objectRef"]["subresource"].as_str() {
                Some(sub) => format!("{verb} {resource}/{sub}"),
                None => format!("{verb} {resource}"),
            };
            out.total += 1;
            if resource == "events" {
                out.events += 1;
            }
            if !matches!(verb, "get" | "list" | "watch") {
                out.writes += 1;
            }
            *out.by_kind.entry(kind).or_insert(0) += 1;
        }
        Ok(out)
    }
}

impl Requests {
    pub fn json(&self) -> Value {
        json!(self)
    }
}

/// `2026-12-03T08:15:00.123456Z`, the audit log's format, so that instants compare as strings.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, day) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        d.subsec_micros()
    )
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian, UTC).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_as_the_audit_log_does() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_micros(1_796_300_100_123_456);
        assert_eq!(rfc3339(t), "2026-12-03T12:15:00.123456Z");
        assert_eq!(
            rfc3339(SystemTime::UNIX_EPOCH),
            "1970-01-01T00:00:00.000000Z"
        );
    }
}
