//! The verdicts of a run: each check is logged as it is made (`ok` or `FAIL` and why), and the
//! run fails when any did. A check never prints a key or token: details are about shapes.

use terdut_e2e::tally::Tally;

#[derive(Debug, Default)]
pub struct Checks {
    tally: Tally,
}

impl Checks {
    /// Records one verdict; `detail` is shown only when it failed.
    pub fn check(&self, name: &str, ok: bool, detail: impl std::fmt::Display) {
        if self.tally.count(ok) {
            log(&format!("ok   {name}"));
        } else {
            log(&format!("FAIL {name}: {detail}"));
        }
    }

    /// A check whose outcome is a `Result`: the error is the detail.
    pub fn check_result<T>(&self, name: &str, result: &anyhow::Result<T>) {
        match result {
            Ok(_) => self.check(name, true, ""),
            Err(e) => self.check(name, false, format!("{e:#}")),
        }
    }

    /// Ends a run: one that broke off is one more failure (`completed`, with the error), then
    /// the verdict line `<what>: N passed, M failed (<time> in all)`. Returns how many failed.
    pub fn finish<T>(
        &self,
        completed: &str,
        what: &str,
        result: &anyhow::Result<T>,
        started: std::time::Instant,
    ) -> u32 {
        if let Err(e) = result {
            self.check(completed, false, format!("{e:#}"));
        }
        let failed = self.failed();
        log(&format!(
            "{what}: {} ({:.0?} in all)",
            self.summary(),
            started.elapsed()
        ));
        failed
    }

    pub fn failed(&self) -> u32 {
        self.tally.failed()
    }

    pub fn summary(&self) -> String {
        self.tally.summary()
    }
}

/// One line of the run's narrative, on stdout.
pub fn log(msg: &str) {
    println!("[e2e] {msg}");
}
