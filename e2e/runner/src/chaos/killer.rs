//! The operator killer of the create and change storms: SIGKILLs the operator `kills` times,
//! `lo`..`hi` seconds apart, restarting it at once. The moments are random (its own seeded
//! generator), so over runs they land everywhere: startup, informer sync, between a POST and
//! the write that records it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use terdut_testenv::Restartable;
use tokio::task::JoinHandle;

use crate::counts::{Counts, bump};
use crate::pyrandom::PyRandom;
use crate::report::log;

/// Starts the killer; `seed_from` seeds its own generator (the caller's keeps drawing
/// meanwhile). Join the handle to wait for the last kill.
pub fn spawn(
    operator: Arc<Mutex<Restartable>>,
    kills: u32,
    (lo, hi): (f64, f64),
    seed_from: &mut PyRandom,
    counts: Arc<Counts>,
) -> JoinHandle<()> {
    let mut rng = PyRandom::new(i64::from(seed_from.getrandbits(32)));
    tokio::spawn(async move {
        for _ in 0..kills {
            tokio::time::sleep(Duration::from_secs_f64(rng.uniform(lo, hi))).await;
            let Ok(mut op) = operator.lock() else { return };
            if !op.running() {
                // It died on its own: a bug, not chaos; the check after the storm reports it.
                bump(&counts.operator_exits, 1);
            }
            op.kill();
            bump(&counts.kills, 1);
            if let Err(e) = op.start() {
                log(&format!("restarting the operator failed: {e:#}"));
            }
        }
    })
}
