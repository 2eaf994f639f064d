//! Ages the way `kubectl get` prints them (apimachinery's `duration.HumanDuration`), so the
//! tree reads like the rest of kubectl.

use k8s_openapi::jiff::Timestamp;

/// Age of `then` at `now`; `-` when unknown.
pub fn age(then: Option<Timestamp>, now: Timestamp) -> String {
    match then {
        Some(t) => human(now.as_second() - t.as_second()),
        None => "-".into(),
    }
}

/// `duration.HumanDuration` of whole seconds.
pub fn human(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    let secs = secs.max(0);
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{days}d")
        } else {
            format!("{days}d{h}h")
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if hours < 24 * 365 * 8 {
        let d = days % 365;
        return if d == 0 {
            format!("{years}y")
        } else {
            format!("{years}y{d}d")
        };
    }
    format!("{years}y")
}

#[cfg(test)]
mod tests {
    use super::human;

    #[test]
    fn matches_kubectl() {
        for (secs, want) in [
            (-5, "<invalid>"),
            (-1, "0s"),
            (59, "59s"),
            (119, "119s"),
            (120, "2m"),
            (125, "2m5s"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60, "3h1m"),
            (47 * 3600, "47h"),
            (2 * 86400 + 3600, "2d1h"),
            (8 * 86400, "8d"),
            (3 * 365 * 86400 + 86400, "3y1d"),
            (9 * 365 * 86400, "9y"),
        ] {
            assert_eq!(human(secs), want, "{secs}");
        }
    }
}
