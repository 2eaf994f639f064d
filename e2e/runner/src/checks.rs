//! The verdicts of a run: each check is logged as it is made (`ok` or `FAIL` and why), and the
//! run fails when any did. A check never prints a key or token: details are about shapes.

use std::sync::atomic::{AtomicU32, Ordering};

#[derive(Debug, Default)]
pub struct Checks {
    passed: AtomicU32,
    failed: AtomicU32,
}

impl Checks {
    /// Records one verdict; `detail` is shown only when it failed.
    pub fn check(&self, name: &str, ok: bool, detail: impl std::fmt::Display) {
        if ok {
            self.passed.fetch_add(1, Ordering::Relaxed);
            log(&format!("ok   {name}"));
        } else {
            self.failed.fetch_add(1, Ordering::Relaxed);
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

    pub fn failed(&self) -> u32 {
        self.failed.load(Ordering::Relaxed)
    }

    pub fn summary(&self) -> String {
        format!(
            "{} passed, {} failed",
            self.passed.load(Ordering::Relaxed),
            self.failed()
        )
    }
}

/// One line of the run's narrative, on stdout.
pub fn log(msg: &str) {
    println!("[e2e] {msg}");
}
