//! When an upgrade is over: both replicas of the new version Ready, the leader running the
//! expected image, and the leader through a pass of every object (its `reconciles_total` at
//! least the number of objects: a new leader's first list nudges every one) with no pass
//! running or waiting, still so after a quiet window. Whatever the new version would write,
//! it has written by then.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;

use crate::cluster::helm::{NAMESPACE, RELEASE};
use crate::cluster::leader;
use crate::run::Run;
use crate::wait;

/// The quiet window after the leader looks idle.
const QUIET: Duration = Duration::from_secs(10);

/// Sums the samples of `metric` (every label set) in an exposition text.
fn sum(text: &str, metric: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(metric) && l[metric.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Whether the text shows a leader through `objects` passes with nothing running or waiting.
fn idle(text: &str, objects: usize) -> bool {
    let passes = sum(text, "terdut_operator_reconciles_total");
    let busy = sum(text, "terdut_operator_reconcile_passes_running")
        + sum(text, "terdut_operator_reconcile_passes_waiting");
    passes >= objects as f64 && busy == 0.0
}

async fn leader_idle_now(run: &Run, image: &str, objects: usize) -> anyhow::Result<bool> {
    let holder = leader::holder(run).await?;
    let pod = Api::<Pod>::namespaced(run.client.clone(), NAMESPACE)
        .get(&holder)
        .await?;
    let runs = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.as_deref())
        == Some(image);
    if !runs {
        return Ok(false);
    }
    let url = format!(
        "{}/metrics",
        run.reach.pod(&run.client, NAMESPACE, &holder, 8080).await?
    );
    let text = run.http.get(&url).send().await?.text().await?;
    Ok(idle(&text, objects))
}

pub async fn leader_idle(run: &Run, image: &str, objects: usize) -> anyhow::Result<()> {
    crate::cluster::deployment_available(run, NAMESPACE, RELEASE).await?;
    for _ in 0..2 {
        wait::until(
            &format!("the leader running {image} idle after a pass of every object"),
            Duration::from_secs(180),
            || async { Ok(leader_idle_now(run, image, objects).await?.then_some(())) },
        )
        .await?;
        tokio::time::sleep(QUIET).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_needs_every_object_passed_and_no_pass_busy() {
        let text = "terdut_operator_reconciles_total{kind=\"team\",outcome=\"ok\"} 4
terdut_operator_reconciles_total{kind=\"source\",outcome=\"ok\"} 3
terdut_operator_reconciles_total_created 1
terdut_operator_reconcile_passes_running{kind=\"team\"} 0
terdut_operator_reconcile_passes_waiting{kind=\"team\"} 0
";
        assert!((sum(text, "terdut_operator_reconciles_total") - 7.0).abs() < 1e-9);
        assert!(idle(text, 7));
        assert!(!idle(text, 8));
        assert!(!idle(
            &text.replace("running{kind=\"team\"} 0", "running{kind=\"team\"} 1"),
            7
        ));
    }
}
