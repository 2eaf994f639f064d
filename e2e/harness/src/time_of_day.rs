//! The wall-clock time of day for log lines, in UTC (no time-zone database needed; the
//! control plane's own logs are in UTC too).

use std::time::{SystemTime, UNIX_EPOCH};

/// `HH:MM:SS` now, UTC.
pub fn hms_utc() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let day = secs % 86_400;
    format!("{:02}:{:02}:{:02}", day / 3600, day % 3600 / 60, day % 60)
}
