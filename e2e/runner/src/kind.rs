//! `just e2e`: the same scenario on a kind cluster (e2e/e2e-kind.sh creates it and loads the
//! images), reached with `kubectl port-forward`; before its teardown, what only several nodes
//! show: the operator's replicas on different nodes (placement.rs) and a worker drained
//! (drain.rs). `--keep` stops after the golden path, as everywhere.

mod drain;
mod placement;
mod shared_data;

use std::path::PathBuf;

use crate::cluster::helm::Helm;
use crate::cluster::{self, Images};
use crate::kubectl::Kubectl;
use crate::reach::{Forwards, Reach};
use crate::run::{Mode, Run};

fn from_path(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var).map_or_else(|| default.into(), PathBuf::from)
}

pub async fn main(keep: bool) -> anyhow::Result<u32> {
    let kubectl = Kubectl {
        bin: from_path("KUBECTL", "kubectl"),
        kubeconfig: std::env::var_os("KUBECONFIG").map(PathBuf::from),
    };
    let helm = Helm {
        bin: from_path("HELM", "helm"),
        kubeconfig: kubectl.kubeconfig.clone(),
    };
    let mut run = Run::new(
        Mode::Kind,
        kube::Config::infer().await?,
        kubectl.clone(),
        Reach::PortForward(Forwards::new(kubectl)),
    )?;
    run.promtool = std::env::var_os("PROMTOOL")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from);
    let images = Images {
        chart: cluster::helm::ChartSource::Folder,
        operator: "terdut-operator:e2e".into(),
        standin: std::env::var("TERDUT_SERVER_IMAGE")
            .unwrap_or_else(|_| "terdut-standin:e2e".into()),
        prometheus: "terdut-prometheus:e2e".into(),
        pull_policy: "IfNotPresent".into(),
    };
    let result = cluster::scenario_with(&run, &helm, &images, keep, async |run| {
        placement::check_spread(run).await?;
        drain::check(run).await
    })
    .await;
    if result.is_err() || run.checks.failed() > 0 {
        let pods = run
            .kubectl
            .run(&["get", "pods", "-A", "-o", "wide"])
            .unwrap_or_else(|e| format!("{e:#}"));
        println!("--- pods\n{pods}");
        crate::node::operator_logs(&run.kubectl);
    }
    result?;
    println!("kind e2e: {}", run.checks.summary());
    Ok(run.checks.failed())
}
