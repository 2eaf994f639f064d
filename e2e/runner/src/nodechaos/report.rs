//! The figures of a node chaos run: one row per fault, printed as it ends (`figure:` lines)
//! and as a Markdown table at the end, the table docs/reliability.md carries.

use std::time::Duration;

#[derive(Debug)]
pub struct Row {
    pub fault: &'static str,
    /// From the fault's start to its end.
    pub lasted: Duration,
    /// From the fault's end to everything converged; `None`: not within the limit.
    pub ready_after: Option<Duration>,
    /// Lease transitions (another replica taking the Lease).
    pub handovers: i32,
    /// Container restarts of the operator's and the server's pods.
    pub restarts: i32,
    /// Calls the server received during the fault and the convergence after it.
    pub server_calls: Option<u64>,
    pub notes: Vec<String>,
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

impl Row {
    pub fn line(&self) -> String {
        format!(
            "{}: lasted {}, Ready {} after it ended, {} handover(s), {} container restart(s), {} server calls; {}",
            self.fault,
            secs(self.lasted),
            self.ready_after.map_or_else(|| "NOT".to_owned(), secs),
            self.handovers,
            self.restarts,
            self.server_calls
                .map_or_else(|| "-".to_owned(), |n| n.to_string()),
            self.notes.join("; ")
        )
    }
}

pub fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| Fault | Lasted | Ready after it ended | Leader handovers | Container restarts | Server calls | Seen |\n|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            r.fault,
            secs(r.lasted),
            r.ready_after
                .map_or_else(|| "**not within the limit**".to_owned(), secs),
            r.handovers,
            r.restarts,
            r.server_calls
                .map_or_else(|| "-".to_owned(), |n| n.to_string()),
            r.notes.join("; ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_that_did_not_converge_says_so() {
        let r = Row {
            fault: "coredns",
            lasted: Duration::from_secs(60),
            ready_after: None,
            handovers: 0,
            restarts: 0,
            server_calls: Some(12),
            notes: vec!["x".into()],
        };
        assert!(r.line().contains("Ready NOT after"));
        let t = table(&[r]);
        assert!(t.contains("| coredns | 60.0 s | **not within the limit** | 0 | 0 | 12 | x |"));
    }
}
