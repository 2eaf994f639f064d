//! The first hour's examples hold against the real things they target:
//! - docs/examples/quickstart/ (CloudNativePG `Cluster`, TerdutServer on it, team, alert source,
//!   `AlertmanagerConfig`) passes a server-side dry run with strict validation against the
//!   real kube-apiserver, with prometheus-operator's own AlertmanagerConfig CRD (from its Go
//!   module, fetched through the Go module proxy at the version below). CloudNativePG's CRD is
//!   not on the proxy, so the `Cluster` is checked against a CRD that takes any spec: its group,
//!   version and kind, and the TerdutServer's reference to it.
//! - docs/examples/alertmanager/alertmanager.yml passes Alertmanager's own `amtool check-config`.
//! - the CR examples in the chart's Artifact Hub annotations pass the same dry run.
//!
//! Each check is shown to be live: a misspelt field fails it.

use std::path::{Path, PathBuf};
use std::process::Command;

use terdut_testenv::{ControlPlane, bin_dir};

/// prometheus-operator's release whose CRDs the examples are checked against.
const PROMETHEUS_OPERATOR: &str = "github.com/prometheus-operator/prometheus-operator@v0.85.0";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The module's folder in the Go module cache (`go mod download`, cached after the first run).
fn go_module_dir(module: &str) -> PathBuf {
    let out = Command::new("go")
        .args(["mod", "download", "-json", module])
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=mod")
        .output()
        .expect("go runs");
    assert!(
        out.status.success(),
        "go mod download {module}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    PathBuf::from(info["Dir"].as_str().expect("a Dir"))
}

fn kubectl(cp: &ControlPlane, args: &[&str]) -> (bool, String) {
    cp.kubectl(args).unwrap()
}

fn dry_run(cp: &ControlPlane, path: &Path) -> (bool, String) {
    kubectl(
        cp,
        &[
            "apply",
            "--dry-run=server",
            "--validate=strict",
            "-f",
            path.to_str().unwrap(),
        ],
    )
}

/// A CRD for `Cluster.postgresql.cnpg.io/v1` that accepts any spec.
const CNPG_CLUSTER_CRD: &str = r#"{
  "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "clusters.postgresql.cnpg.io"},
  "spec": {"group": "postgresql.cnpg.io", "scope": "Namespaced",
    "names": {"kind": "Cluster", "plural": "clusters", "singular": "cluster", "listKind": "ClusterList"},
    "versions": [{"name": "v1", "served": true, "storage": true,
      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
}"#;

async fn control_plane_with_the_crds() -> &'static ControlPlane {
    let cp = ControlPlane::shared().await.unwrap();
    let crd = go_module_dir(PROMETHEUS_OPERATOR)
        .join("example/prometheus-operator-crd/monitoring.coreos.com_alertmanagerconfigs.yaml");
    // 700 KB: too large for a client-side apply's annotation, as prometheus-operator says.
    let (ok, out) = kubectl(
        cp,
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            crd.to_str().unwrap(),
        ],
    );
    assert!(ok, "{out}");
    let cnpg = cp.dir().join("cnpg-crd.json");
    std::fs::write(&cnpg, CNPG_CLUSTER_CRD).unwrap();
    let (ok, out) = kubectl(cp, &["apply", "-f", cnpg.to_str().unwrap()]);
    assert!(ok, "{out}");
    for crd in [
        "alertmanagerconfigs.monitoring.coreos.com",
        "clusters.postgresql.cnpg.io",
    ] {
        let (ok, out) = kubectl(
            cp,
            &[
                "wait",
                "--for=condition=Established",
                &format!("crd/{crd}"),
                "--timeout=60s",
            ],
        );
        assert!(ok, "{out}");
    }
    cp
}

#[tokio::test]
async fn the_quickstart_passes_a_strict_server_side_dry_run() {
    let cp = control_plane_with_the_crds().await;
    let dir = repo().join("docs/examples/quickstart");
    // A dry run creates no namespace: the objects need theirs to exist.
    let (ok, out) = kubectl(
        cp,
        &[
            "apply",
            "-f",
            dir.join("00-namespace.yaml").to_str().unwrap(),
        ],
    );
    assert!(ok, "{out}");
    let (ok, out) = dry_run(cp, &dir);
    assert!(ok, "the apiserver refused the quickstart:\n{out}");
    for object in [
        "cluster.postgresql.cnpg.io/terdut-db",
        "terdutserver.terdut.ryuvia.com/terdut",
        "terdutteam.terdut.ryuvia.com/platform",
        "terdutalertsource.terdut.ryuvia.com/alertmanager",
        "alertmanagerconfig.monitoring.coreos.com/terdut-platform",
    ] {
        assert!(out.contains(object), "{object} not applied: {out}");
    }

    // The AlertmanagerConfig check is live: a misspelt field of its receiver is refused.
    let text = std::fs::read_to_string(dir.join("50-alertmanagerconfig.yaml")).unwrap();
    let typo = cp.dir().join("typo-alertmanagerconfig.yaml");
    std::fs::write(&typo, text.replace("urlSecret:", "urlSecrets:")).unwrap();
    let (ok, out) = dry_run(cp, &typo);
    assert!(
        !ok && out.contains("urlSecrets"),
        "a misspelt field passed: {out}"
    );
    // And it reads the Secret the alert source writes: `<source>-terdut-webhook`, keys url, key.
    assert!(text.contains("name: alertmanager-terdut-webhook") && text.contains("key: url"));
    assert!(text.contains("key: key"));
}

#[tokio::test]
async fn the_artifact_hub_examples_pass_a_strict_server_side_dry_run() {
    let cp = control_plane_with_the_crds().await;
    let chart: serde_json::Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(repo().join("chart/terdut-operator/Chart.yaml")).unwrap(),
    )
    .unwrap();
    let examples = chart["annotations"]["artifacthub.io/crdsExamples"]
        .as_str()
        .unwrap();
    let list: Vec<serde_json::Value> = serde_yaml_ng::from_str(examples).unwrap();
    assert_eq!(list.len(), 3);
    let (ok, out) = kubectl(cp, &["create", "namespace", "platform-oncall"]);
    assert!(ok || out.contains("AlreadyExists"), "{out}");
    let path = cp.dir().join("artifacthub-examples.json");
    std::fs::write(
        &path,
        serde_json::json!({"apiVersion": "v1", "kind": "List", "items": list}).to_string(),
    )
    .unwrap();
    let (ok, out) = dry_run(cp, &path);
    assert!(ok, "{out}");
}

#[test]
fn the_plain_alertmanager_snippet_passes_amtool() {
    let amtool = bin_dir().join("amtool");
    assert!(
        amtool.is_file(),
        "{} is missing: bash e2e/control-plane/release-tools.sh amtool",
        amtool.display()
    );
    let snippet = repo().join("docs/examples/alertmanager/alertmanager.yml");
    let check = |path: &Path| {
        let out = Command::new(&amtool)
            .args(["check-config"])
            .arg(path)
            .output()
            .unwrap();
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    let (ok, out) = check(&snippet);
    assert!(ok, "{out}");
    let text = std::fs::read_to_string(&snippet).unwrap();
    assert!(text.contains("/etc/alertmanager/terdut/url") && text.contains("credentials_file"));
    let typo = std::env::temp_dir().join(format!("alertmanager-typo-{}.yml", std::process::id()));
    std::fs::write(&typo, text.replace("url_file:", "url_files:")).unwrap();
    let (ok, out) = check(&typo);
    let _ = std::fs::remove_file(&typo);
    assert!(!ok, "a misspelt field passed amtool: {out}");
}
