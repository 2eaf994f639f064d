//! The pass/fail counter behind a run's verdict (`N passed, M failed`): the e2e runner's
//! `Checks` and the chaos runner's `Report` count with it and print their own lines.

use std::sync::atomic::{AtomicU32, Ordering};

#[derive(Debug, Default)]
pub struct Tally {
    passed: AtomicU32,
    failed: AtomicU32,
}

impl Tally {
    /// Counts one verdict; returns `ok`, for the caller's line.
    pub fn count(&self, ok: bool) -> bool {
        let counter = if ok { &self.passed } else { &self.failed };
        counter.fetch_add(1, Ordering::Relaxed);
        ok
    }

    pub fn passed(&self) -> u32 {
        self.passed.load(Ordering::Relaxed)
    }

    pub fn failed(&self) -> u32 {
        self.failed.load(Ordering::Relaxed)
    }

    /// `N passed, M failed`.
    pub fn summary(&self) -> String {
        format!("{} passed, {} failed", self.passed(), self.failed())
    }
}

#[cfg(test)]
mod tests {
    use super::Tally;

    #[test]
    fn counts_each_verdict_once() {
        let t = Tally::default();
        assert!(t.count(true));
        assert!(!t.count(false));
        t.count(true);
        assert_eq!((t.passed(), t.failed()), (2, 1));
        assert_eq!(t.summary(), "2 passed, 1 failed");
    }
}
