//! The chart as a dependency of a parent chart (e2e/chart/parent): Helm hands a subchart the
//! parent's `global` values, which values.schema.json must accept. `helm install` of the parent
//! against a real kube-apiserver, with an empty values file and with the parent's own values
//! (globals and the subchart's section), then `helm uninstall`.

use std::path::{Path, PathBuf};
use std::process::Command;

use terdut_testenv::{ControlPlane, tool};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn helm(cp: &ControlPlane, args: &[&str]) -> (bool, String) {
    let out = Command::new(tool("helm").unwrap())
        .arg("--kubeconfig")
        .arg(cp.kubeconfig())
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The parent chart copied into `dir`, its dependency on this repository's chart built.
fn parent_chart(cp: &ControlPlane, dir: &Path) -> PathBuf {
    let parent = dir.join("platform-umbrella");
    std::fs::create_dir_all(&parent).unwrap();
    let chart = repo().join("chart/terdut-operator").canonicalize().unwrap();
    let fixture = repo().join("e2e/chart/parent");
    let manifest = std::fs::read_to_string(fixture.join("Chart.yaml"))
        .unwrap()
        .replace("CHART_PATH", chart.to_str().unwrap());
    std::fs::write(parent.join("Chart.yaml"), manifest).unwrap();
    std::fs::copy(fixture.join("values.yaml"), parent.join("values.yaml")).unwrap();
    let (ok, out) = helm(cp, &["dependency", "build", parent.to_str().unwrap()]);
    assert!(ok, "{out}");
    parent
}

#[tokio::test]
async fn installs_as_a_subchart_with_global_values() {
    let cp = ControlPlane::shared().await.unwrap();
    let client = cp.client().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let parent = parent_chart(cp, dir.path());
    let parent = parent.to_str().unwrap();

    // An empty values file: the parent's values.yaml (globals included) apply.
    let empty = dir.path().join("empty.yaml");
    std::fs::write(&empty, "").unwrap();
    let ns = cp.namespace(&client, "umbrella").await.unwrap();
    let (ok, out) = helm(
        cp,
        &[
            "template",
            "platform",
            parent,
            "-n",
            &ns,
            "-f",
            empty.to_str().unwrap(),
        ],
    );
    assert!(ok, "helm template of the parent chart failed: {out}");
    assert!(out.contains("name: platform-terdut-operator"), "{out}");

    // A real install, with more globals on the command line, and the subchart's own section.
    // The tenant roles are cluster-wide names another test binary may hold: off here.
    let (ok, out) = helm(
        cp,
        &[
            "install",
            "platform",
            parent,
            "-n",
            &ns,
            "-f",
            empty.to_str().unwrap(),
            "--set",
            "global.labels.team=platform",
            "--set",
            "terdut-operator.rbac.tenantRoles=false",
            "--skip-crds",
        ],
    );
    assert!(ok, "helm install of the parent chart failed: {out}");
    let (ok, out) = cp
        .kubectl(&[
            "get",
            "deployment",
            "platform-terdut-operator",
            "-n",
            &ns,
            "-o",
            "jsonpath={.spec.replicas}",
        ])
        .unwrap();
    assert!(
        ok && out.trim() == "1",
        "the parent's values did not reach the subchart: {out}"
    );
    let (ok, out) = helm(cp, &["uninstall", "platform", "-n", &ns]);
    assert!(ok, "{out}");

    // And the schema still refuses a typo under the subchart's key.
    let (ok, out) = helm(
        cp,
        &[
            "template",
            "platform",
            parent,
            "--set",
            "terdut-operator.replicaCout=2",
        ],
    );
    assert!(!ok && out.contains("replicaCout"), "{out}");
}
