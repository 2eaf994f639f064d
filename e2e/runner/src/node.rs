//! `just e2e-node`: the scenario on this machine's single-node cluster (docs/node.md), with
//! the images e2e/images/build.sh saved, imported into the node's containerd, and with a
//! release (`--release`, what `just release` wrote): pushed to the OCI registry beside the node
//! with release/publish.sh, then installed from there as users install it.

use std::path::Path;

use anyhow::Context as _;
use terdut_testenv::{NodeCluster, NodeComponent, tool};

use crate::checks::log;
use crate::cluster::helm::{ChartSource, NAMESPACE};
use crate::cluster::{self, Images};
use crate::kubectl::Kubectl;
use crate::run::Mode;

/// The release's version and image digest (release.json of `just release`).
fn release_of(dir: &Path) -> anyhow::Result<(String, String)> {
    let text = std::fs::read_to_string(dir.join("release.json")).with_context(|| {
        format!(
            "reading {}/release.json (run `just release`)",
            dir.display()
        )
    })?;
    let r: serde_json::Value = serde_json::from_str(&text)?;
    let field = |v: &serde_json::Value| v.as_str().map(str::to_owned);
    Ok((
        field(&r["version"]).context("release.json has no version")?,
        field(&r["image"]["digest"]).context("release.json has no image digest")?,
    ))
}

/// release/publish.sh to the registry beside the node: the chart's source for the install.
fn publish(dir: &Path, registry: &terdut_testenv::Registry) -> anyhow::Result<ChartSource> {
    let (version, digest) = release_of(dir)?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::process::Command::new("bash")
        .arg(root.join("release/publish.sh"))
        .arg(dir)
        .arg(&registry.host)
        .arg("--ca-file")
        .arg(&registry.ca_file)
        .output()
        .context("running release/publish.sh")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        anyhow::bail!("release/publish.sh failed: {}", stderr.trim());
    }
    log(&format!(
        "release {version} pushed to the registry at {}:\n{}",
        registry.host,
        stderr.trim()
    ));
    Ok(ChartSource::Oci {
        url: format!("oci://{}/charts/terdut-operator", registry.host),
        version,
        ca_file: registry.ca_file.clone(),
        repository: format!("{}/terdut-operator", registry.host),
        digest,
    })
}

pub async fn main(images_dir: &Path, release: Option<&Path>, keep: bool) -> anyhow::Result<u32> {
    let started = std::time::Instant::now();
    let (cluster, mut run, helm) =
        crate::fleet::node::start(Mode::Node, images_dir, &[], release.is_some()).await?;
    let kubectl = run.kubectl.clone();
    let kubeconfig = cluster.control_plane().kubeconfig().to_path_buf();
    run.promtool = tool("promtool").ok();
    let chart = match (release, cluster.registry()) {
        (Some(dir), Some(registry)) => match publish(dir, registry) {
            Ok(source) => source,
            Err(e) => {
                cluster.stop();
                return Err(e);
            }
        },
        _ => ChartSource::Folder,
    };
    let images = Images {
        chart,
        operator: "terdut-operator:e2e".into(),
        standin: "terdut-standin:e2e".into(),
        prometheus: "terdut-prometheus:e2e".into(),
        pull_policy: "Never".into(),
    };
    let result = cluster::scenario(&run, &helm, &images, keep).await;
    if result.is_err() || run.checks.failed() > 0 {
        operator_logs(&kubectl);
        node_diagnostics(&kubectl, &cluster);
    }
    // Debugging a failure: E2E_HOLD=1 keeps the cluster up until Ctrl-C.
    let hold =
        std::env::var_os("E2E_HOLD").is_some() && (result.is_err() || run.checks.failed() > 0);
    if hold || (keep && result.is_ok()) {
        look_around(&cluster, &kubeconfig);
        tokio::signal::ctrl_c().await?;
    }
    let failed = run.checks.failed();
    log(&format!(
        "node e2e: {} ({:.0?} in all)",
        run.checks.summary(),
        started.elapsed()
    ));
    cluster.stop();
    result.map(|()| failed)
}

/// The operator pods' last lines, for a failed run.
pub fn operator_logs(kubectl: &Kubectl) {
    let out = kubectl.run(&[
        "logs",
        "-n",
        NAMESPACE,
        "-l",
        "app.kubernetes.io/name=terdut-operator",
        "--prefix",
        "--tail=40",
    ]);
    let text = out.unwrap_or_else(|e| format!("{e:#}"));
    let text = if text.trim().is_empty() {
        "(no operator pod left: the scenario ran to `helm uninstall`; a failed check prints its own diagnostics above)".to_owned()
    } else {
        text
    };
    println!("--- operator pods' logs (tail)\n{text}");
}

/// What a failed run needs to be read after its node is gone (CI keeps only this output):
/// the pods and the recent Events of every namespace, the TerdutServers' conditions, and the
/// last lines of containerd's and the kubelet's logs with whether each still runs (a container
/// runtime that died shows as pods that never start and logs the kubelet cannot fetch).
fn node_diagnostics(kubectl: &Kubectl, cluster: &NodeCluster) {
    let show = |title: &str, args: &[&str]| {
        let out = kubectl.run(args).unwrap_or_else(|e| format!("{e:#}"));
        println!("--- {title}\n{}", out.trim_end());
    };
    show("pods", &["get", "pods", "-A", "-o", "wide"]);
    show(
        "TerdutServers' conditions",
        &[
            "get",
            "terdutservers",
            "-A",
            "-o",
            "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}: {range .status.conditions[*]}{.type}={.status} {.reason}: {.message}; {end}{\"\\n\"}{end}",
        ],
    );
    let events = kubectl
        .run(&["get", "events", "-A", "--sort-by=.lastTimestamp"])
        .unwrap_or_else(|e| format!("{e:#}"));
    println!("--- Events (last 40)\n{}", last_lines(&events, 40));
    for component in [NodeComponent::Containerd, NodeComponent::Kubelet] {
        let running = match cluster.pid_of(component) {
            Ok(Some(_)) => "running".to_owned(),
            Ok(None) => "NOT running".to_owned(),
            Err(e) => format!("unknown: {e:#}"),
        };
        let name = component.name();
        let log = cluster.dir().join(format!("logs/{name}.log"));
        let text = std::fs::read_to_string(&log).unwrap_or_else(|e| format!("{e}"));
        println!(
            "--- {name} ({running}), last 25 lines of {}\n{}",
            log.display(),
            last_lines(&text, 25)
        );
    }
}

/// The last `n` lines of `text`.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn look_around(cluster: &NodeCluster, kubeconfig: &Path) {
    let kubectl = tool("kubectl")
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let l = cluster.layout();
    println!(
        "\nThe operator runs in pods on node {node} ({ip}); everything above is live. Look around:
  export KUBECONFIG={kc}
  {kubectl} get pods -A -o wide
  {kubectl} get terdut -A
  {kubectl} -n terdut-system logs -l app.kubernetes.io/name=terdut-operator --prefix --tail=20
  curl -s http://$({kubectl} -n platform-oncall get svc terdut -o jsonpath='{{.spec.clusterIP}}'):8080/admin/state
Pods are in {pods}, Services in {svcs} (routed from this host); node logs: {logs}
Stop: press Ctrl-C.",
        node = terdut_testenv::NODE_NAME,
        ip = l.node_ip,
        kc = kubeconfig.display(),
        pods = l.pod_cidr,
        svcs = l.service_cidr,
        logs = cluster.dir().join("logs").display(),
    );
}
