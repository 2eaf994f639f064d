//! The run's tallies, printed at the end; the killer tasks add to them while the run goes on.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Counts {
    pub kills: AtomicU64,
    pub standin_restarts: AtomicU64,
    pub iterations: AtomicU64,
    /// Operator processes found dead that nobody signalled: a bug, not chaos.
    pub operator_exits: AtomicU64,
    pub apiserver_restarts: AtomicU64,
    pub leader_kills: AtomicU64,
    pub leader_stepdowns: AtomicU64,
    /// Stand-in calls its fault rules reset or failed.
    pub faults: AtomicU64,
}

pub fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

pub fn get(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

impl Counts {
    /// The summary line's counts.
    pub fn describe(&self) -> String {
        format!(
            "kills {}, stand-in restarts {}, injected stand-in faults {}, kube-apiserver restarts \
             {}, leader kills {}, leader step-downs {}, iterations {}",
            get(&self.kills),
            get(&self.standin_restarts),
            get(&self.faults),
            get(&self.apiserver_restarts),
            get(&self.leader_kills),
            get(&self.leader_stepdowns),
            get(&self.iterations)
        )
    }
}
