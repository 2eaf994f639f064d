//! The leader storm: the single operator makes way for two replicas (`crate::pair::Pair`); the current
//! leader is SIGKILLed (a crash) or SIGTERMed (voluntary: it releases the Lease on its way
//! out) in a shuffled order, with changes landing just before and during each failover, then
//! started again as the standby.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::chaos::Chaos;
use crate::counts::bump;
use crate::report::log;
use crate::workload::Allow;

/// Failover times of one kind: (Lease taken over, new leader reconciling), seconds.
#[derive(Debug, Default)]
pub struct Times {
    pub crash: Vec<(f64, f64)>,
    pub voluntary: Vec<(f64, f64)>,
}

/// `crashes` SIGKILLs and `voluntary` SIGTERMs of the leader, interleaved.
pub async fn storm(c: &mut Chaos) -> anyhow::Result<(BTreeSet<String>, Times)> {
    let (mut kind_changed, mut times) = (BTreeSet::new(), Times::default());
    let mut plan: Vec<bool> = std::iter::repeat_n(false, c.plan.leader_kills as usize)
        .chain(std::iter::repeat_n(true, c.plan.leader_stepdowns as usize))
        .collect();
    c.kill_rng.shuffle(&mut plan);
    for graceful in plan {
        let mut changes = c.model.mutate(0.08, Allow::ALL);
        kind_changed.extend(changes.kind_changed.iter().cloned());
        changes.apply.extend(c.model.new_pair());
        c.kube.apply(&changes.apply).await?;
        c.kube.delete(&changes.delete, false).await?;
        tokio::time::sleep(Duration::from_secs_f64(c.kill_rng.uniform(0.5, 1.5))).await;
        let (lease_s, ready_s) = c.pair.failover(&c.kube, &c.http, graceful).await?;
        let how = if graceful {
            times.voluntary.push((lease_s, ready_s));
            bump(&c.counts.leader_stepdowns, 1);
            "voluntary"
        } else {
            times.crash.push((lease_s, ready_s));
            bump(&c.counts.leader_kills, 1);
            "crash"
        };
        log(&format!(
            "leader {how}: lease taken over after {lease_s:.1}s, reconciling after {ready_s:.1}s"
        ));
        // Changes while the replica just restarted is still coming up as standby.
        let changes = c.model.mutate(0.05, Allow::EDITS);
        c.kube.apply(&changes.apply).await?;
        tokio::time::sleep(Duration::from_secs_f64(c.kill_rng.uniform(1.0, 2.0))).await;
    }
    Ok((kind_changed, times))
}
