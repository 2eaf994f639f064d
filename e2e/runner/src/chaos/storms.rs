//! The storms of operator SIGKILLs and stand-in restarts (docs/reliability.md "`just chaos`"):
//! the create storm, the change storm (per round) and the stand-in storm (per round). Each
//! returns the sources whose kind changed, the only keys allowed to rotate.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::chaos::Chaos;
use crate::counts::bump;
use crate::killer;
use crate::report::log;
use crate::workload::Allow;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// K teams and K sources created in batches while the operator is killed.
pub async fn create(c: &mut Chaos) -> anyhow::Result<BTreeSet<String>> {
    let (k, kills) = (c.plan.pairs, c.plan.kills);
    let killer = killer::spawn(
        c.operator.clone(),
        kills,
        (2.0, 6.0),
        &mut c.kill_rng,
        c.counts.clone(),
    );
    let batch = (k / 10).max(2);
    let mut made = 0;
    while made < k {
        let n = batch.min(k - made);
        let manifests: Vec<_> = (0..n).flat_map(|_| c.model.new_pair()).collect();
        c.kube.apply(&manifests).await?;
        made += n;
        tokio::time::sleep(secs(c.kill_rng.uniform(0.3, 1.5))).await;
    }
    log(&format!(
        "created {k} teams and {k} sources; waiting for the last of {kills} kills"
    ));
    killer.await?;
    Ok(BTreeSet::new())
}

/// Renames, ladder edits, switch churn, kind changes, deletions and a few new (hook-tagged)
/// pairs, in three waves, while the operator is killed.
pub async fn change(c: &mut Chaos) -> anyhow::Result<BTreeSet<String>> {
    const WAVES: usize = 3;
    let killer = killer::spawn(
        c.operator.clone(),
        c.plan.kills,
        (2.0, 6.0),
        &mut c.kill_rng,
        c.counts.clone(),
    );
    let mut kind_changed = BTreeSet::new();
    for _ in 0..WAVES {
        let changes = c.model.wave(|teams| (teams / 40).max(1));
        kind_changed.extend(changes.kind_changed.iter().cloned());
        c.kube.send(&changes).await?;
        log(&format!("wave: {}", changes.summary()));
        tokio::time::sleep(secs(c.kill_rng.uniform(2.0, 5.0))).await;
    }
    killer.await?;
    Ok(kind_changed)
}

/// The stand-in SIGKILLed and restarted on its data file while renames and ladder edits land;
/// no kind change, so no key may rotate.
pub async fn standin(c: &mut Chaos) -> anyhow::Result<BTreeSet<String>> {
    for _ in 0..c.plan.standin_restarts {
        tokio::time::sleep(secs(c.model.rng().uniform(0.5, 2.0))).await;
        c.standin_proc()?.kill();
        let changes = c.model.mutate(0.1, Allow::EDITS);
        c.kube.apply(&changes.apply).await?;
        tokio::time::sleep(secs(c.model.rng().uniform(1.0, 3.0))).await;
        c.standin_proc()?.start()?;
        bump(&c.counts.standin_restarts, 1);
        c.wait_standin().await?;
        log(&format!(
            "stand-in restarted; {} objects changed while it was down",
            changes.apply.len()
        ));
    }
    Ok(BTreeSet::new())
}
