//! The kube-apiserver storm: `local-cluster` restarts its kube-apiserver in place (SIGKILL and
//! SIGTERM alternately, `terdut_testenv::local_cluster`) with renames, ladder edits, kind
//! changes, deletions and a new pair landing just before each restart and a wave right after
//! the last, so before the operator's watches have reconnected.

use std::collections::BTreeSet;
use std::time::Duration;

use terdut_testenv::StopMode;

use crate::chaos::Chaos;
use crate::counts::bump;
use crate::report::log;
use crate::workload::Allow;

/// How long a restart may take before the run gives up on the control plane.
const RESTART_LIMIT: Duration = Duration::from_secs(60);

/// Returns the sources whose kind changed and each restart's time from signal to ready.
pub async fn storm(c: &mut Chaos) -> anyhow::Result<(BTreeSet<String>, Vec<f64>)> {
    let Some(cluster) = c.cluster.clone() else {
        anyhow::bail!("LOCAL_CLUSTER_PID is not set");
    };
    let (mut kind_changed, mut downtimes) = (BTreeSet::new(), vec![]);
    for i in 0..c.plan.apiserver_restarts {
        let mut changes = c.model.mutate(0.08, Allow::ALL);
        changes.apply.extend(c.model.new_pair());
        kind_changed.extend(changes.kind_changed.iter().cloned());
        c.kube
            .apply_retrying(&changes.apply, &changes.delete)
            .await?;
        tokio::time::sleep(Duration::from_secs_f64(c.model.rng().uniform(0.5, 2.0))).await;
        let mode = if i % 2 == 1 {
            StopMode::Graceful
        } else {
            StopMode::Kill
        };
        let took = cluster.restart(mode, RESTART_LIMIT).await?.as_secs_f64();
        downtimes.push(took);
        bump(&c.counts.apiserver_restarts, 1);
        log(&format!(
            "kube-apiserver {}ed and back in {took:.1}s; {} applied, {} deleted just before",
            if mode == StopMode::Graceful {
                "SIGTERM"
            } else {
                "SIGKILL"
            },
            changes.apply.len(),
            changes.delete.len()
        ));
    }
    // One more wave right after the last restart, while the watches are still reconnecting.
    let changes = c.model.mutate(
        0.05,
        Allow {
            kind_change: false,
            delete: true,
        },
    );
    kind_changed.extend(changes.kind_changed.iter().cloned());
    c.kube
        .apply_retrying(&changes.apply, &changes.delete)
        .await?;
    Ok((kind_changed, downtimes))
}
