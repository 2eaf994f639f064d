//! Resident memory of this process from `/proc/self/status`. The operator runs inside the
//! bench process, so its memory is a difference of two readings (see `docs/performance.md`).

/// `VmRSS` (current) and `VmHWM` (peak since start), in KiB; `None` off Linux.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Rss {
    pub rss_kib: u64,
    pub peak_kib: u64,
}

impl Rss {
    pub fn now() -> Option<Self> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        };
        Some(Self {
            rss_kib: field("VmRSS:")?,
            peak_kib: field("VmHWM:")?,
        })
    }
}

/// KiB as MiB with one decimal.
pub fn mib(kib: i64) -> f64 {
    (kib as f64 / 1024.0 * 10.0).round() / 10.0
}

/// Resets `VmHWM` to the current RSS (`echo 5 > /proc/self/clear_refs`, Linux ≥ 4.0), so the
/// next reading's peak covers only what follows; `false` when that is not possible.
pub fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}
