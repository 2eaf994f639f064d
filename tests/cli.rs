//! The binary refuses settings it must not run with before it connects to anything.

use std::process::Command;

fn operator(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_terdut-operator"))
        .args(args)
        // No cluster to reach: a refusal must come before any connection is tried.
        .env("KUBECONFIG", "/nonexistent")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .expect("the operator binary runs");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

#[test]
fn a_server_url_the_dns_search_path_could_complete_is_refused_at_start() {
    let (ok, out) = operator(&[
        "--leader-elect=false",
        "--server-url-template",
        "http://{name}.{namespace}.svc:{port}",
    ]);
    assert!(!ok, "{out}");
    assert!(out.contains("does not end with a dot"), "{out}");
    assert!(out.contains("search domains"), "{out}");
}

#[test]
fn a_bad_cluster_domain_is_refused_at_start() {
    let (ok, out) = operator(&["--leader-elect=false", "--cluster-domain", "cluster.local."]);
    assert!(!ok, "{out}");
    assert!(out.contains("--cluster-domain"), "{out}");
}

#[test]
fn a_wake_budget_of_zero_is_refused_at_start() {
    // No start could ever run: every object would wait for a place for ever.
    let (ok, out) = operator(&["--leader-elect=false", "--wake-budget", "0"]);
    assert!(!ok, "{out}");
    assert!(out.contains("--wake-budget"), "{out}");
}
