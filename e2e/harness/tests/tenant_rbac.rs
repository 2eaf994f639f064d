//! The chart's tenant roles (`rbac.tenantRoles`, on by default) against a real kube-apiserver
//! and kube-controller-manager: `terdut-view` and `terdut-edit` are aggregated into Kubernetes'
//! own `view`, `edit` and `admin`, so a user bound to `edit` in a namespace creates a
//! TerdutTeam and a TerdutAlertSource there, and cannot write their status (the operator's);
//! one bound to `view` reads them and writes nothing. Users are impersonated with kubectl's
//! `--as`, as an admin checks a binding by hand.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use terdut_testenv::{ControlPlane, tool};

fn chart() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../chart/terdut-operator")
}

fn render_tenant_roles() -> String {
    let out = Command::new(tool("helm").unwrap())
        .args(["template", "terdut-operator"])
        .arg(chart())
        .args([
            "--namespace",
            "terdut-system",
            "--kube-version",
            "1.37.2",
            "--show-only",
            "templates/tenant-rbac.yaml",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn kubectl(cp: &ControlPlane, args: &[&str]) -> (bool, String) {
    cp.kubectl(args).unwrap()
}

fn kubectl_file(cp: &ControlPlane, args: &[&str], name: &str, yaml: &str) -> (bool, String) {
    let path = cp.dir().join(name);
    std::fs::write(&path, yaml).unwrap();
    let mut all = args.to_vec();
    all.extend(["-f", path.to_str().unwrap()]);
    kubectl(cp, &all)
}

/// `kubectl auth can-i` as `user`: the aggregation controller fills `edit` a moment after the
/// roles appear, so callers poll.
fn can(cp: &ControlPlane, user: &str, ns: &str, verb: &str, resource: &str) -> bool {
    // `kind/status` would be a kind and an object name to can-i: the subresource is a flag.
    let (resource, sub) = resource.split_once('/').unwrap_or((resource, ""));
    let sub = format!("--subresource={sub}");
    let mut args = vec!["auth", "can-i", verb, resource, "-n", ns, "--as", user];
    if sub != "--subresource=" {
        args.push(&sub);
    }
    let (_, out) = kubectl(cp, &args);
    out.trim() == "yes"
}

fn eventually_can(cp: &ControlPlane, user: &str, ns: &str, verb: &str, resource: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !can(cp, user, ns, verb, resource) {
        assert!(
            Instant::now() < deadline,
            "{user} still cannot {verb} {resource} in {ns} after 60 s"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[tokio::test]
async fn a_namespace_editor_creates_teams_and_sources_but_never_their_status() {
    let cp = ControlPlane::shared().await.unwrap();
    let client = cp.client().await.unwrap();
    let ns = cp.namespace(&client, "tenant").await.unwrap();
    let (ok, out) = kubectl_file(cp, &["apply"], "tenant-roles.yaml", &render_tenant_roles());
    assert!(ok, "{out}");
    for (user, role) in [("dev", "edit"), ("auditor", "view")] {
        let (ok, out) = kubectl(
            cp,
            &[
                "create",
                "rolebinding",
                &format!("{user}-{role}"),
                &format!("--clusterrole={role}"),
                &format!("--user={user}"),
                "-n",
                &ns,
            ],
        );
        assert!(ok, "{out}");
    }
    eventually_can(cp, "dev", &ns, "create", "terdutteams.terdut.ryuvia.com");
    eventually_can(
        cp,
        "auditor",
        &ns,
        "list",
        "terdutalertsources.terdut.ryuvia.com",
    );

    // The developer applies a team and an alert source, as docs/examples has them.
    let objects = format!(
        "apiVersion: terdut.ryuvia.com/v1alpha1
kind: TerdutTeam
metadata: {{name: payments, namespace: {ns}}}
spec:
  serverRef: {{name: terdut, namespace: platform-oncall}}
  displayName: Payments
---
apiVersion: terdut.ryuvia.com/v1alpha1
kind: TerdutAlertSource
metadata: {{name: payments-grafana, namespace: {ns}}}
spec:
  teamRef: {{name: payments}}
  kind: grafana
  name: payments-grafana
"
    );
    let (ok, out) = kubectl_file(cp, &["apply", "--as", "dev"], "dev-objects.yaml", &objects);
    assert!(ok, "the editor could not apply a team and a source: {out}");
    assert!(
        out.contains("terdutteam.terdut.ryuvia.com/payments created")
            && out.contains("terdutalertsource.terdut.ryuvia.com/payments-grafana created"),
        "{out}"
    );
    let (ok, out) = kubectl(
        cp,
        &[
            "get",
            "terdutteams,terdutalertsources",
            "-n",
            &ns,
            "--as",
            "dev",
        ],
    );
    assert!(ok && out.contains("payments-grafana"), "{out}");

    // Status is the operator's: a forged teamID or Ready is refused.
    for (kind, name) in [
        ("terdutteam", "payments"),
        ("terdutalertsource", "payments-grafana"),
    ] {
        let (ok, out) = kubectl(
            cp,
            &[
                "patch",
                kind,
                name,
                "-n",
                &ns,
                "--as",
                "dev",
                "--subresource=status",
                "--type=merge",
                "-p",
                r#"{"status":{"observedGeneration":1}}"#,
            ],
        );
        assert!(
            !ok && out.contains("Forbidden"),
            "the editor wrote the status of {kind}/{name}: {out}"
        );
    }
    assert!(!can(
        cp,
        "dev",
        &ns,
        "patch",
        "terdutteams.terdut.ryuvia.com/status"
    ));
    // Only in the namespace of the binding.
    assert!(!can(
        cp,
        "dev",
        "default",
        "create",
        "terdutteams.terdut.ryuvia.com"
    ));

    // The viewer reads and writes nothing.
    let (ok, out) = kubectl(cp, &["get", "terdutteams", "-n", &ns, "--as", "auditor"]);
    assert!(ok && out.contains("payments"), "{out}");
    let (ok, out) = kubectl(
        cp,
        &[
            "delete",
            "terdutteam",
            "payments",
            "-n",
            &ns,
            "--as",
            "auditor",
        ],
    );
    assert!(!ok && out.contains("Forbidden"), "{out}");
    // admin has what edit has.
    assert!(can(
        cp,
        "dev",
        &ns,
        "delete",
        "terdutalertsources.terdut.ryuvia.com"
    ));
    let (ok, out) = kubectl(
        cp,
        &[
            "get",
            "clusterrole",
            "admin",
            "-o",
            "jsonpath={.rules[?(@.apiGroups[0]==\"terdut.ryuvia.com\")].verbs}",
        ],
    );
    assert!(
        ok && out.contains("create") && out.contains("watch"),
        "{out}"
    );
}
