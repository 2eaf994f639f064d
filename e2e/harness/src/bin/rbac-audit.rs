//! `rbac-audit [DIR]`: the least-privilege check of `just test` (docs/security.md). Reads the
//! audit logs the control planes of the run wrote (`DIR`, default `$TERDUT_AUDIT_DIR`), lists
//! every verb and resource the operator's identities used, renders the chart's RBAC with its
//! default values, and fails unless the chart grants exactly that set (plus the grants
//! `terdut_testenv::rbac_audit::IMPLIED` explains).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};
use serde::Deserialize as _;
use terdut_testenv::audit::{RELEASE_NAMESPACE, log_dir};
use terdut_testenv::rbac_audit::{IMPLIED, Request, compare, grants, parse_event};
use terdut_testenv::tool;

fn main() -> anyhow::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .or_else(log_dir)
        .context("usage: rbac-audit DIR (or set TERDUT_AUDIT_DIR)")?;
    let (requests, files) = read_logs(&dir)?;
    if requests.is_empty() {
        bail!(
            "no audited request of the operator in {} ({files} logs): was the run audited?",
            dir.display()
        );
    }
    let rules = chart_rules()?;
    let verdict = compare(&requests, &rules);

    println!(
        "rbac-audit: {} requests of the operator's identities in {files} audit logs",
        requests.len()
    );
    println!("used (requests):");
    for (p, n) in &verdict.used {
        println!("  {p:<60} {n}");
    }
    println!("granted for admission checks, not requests:");
    for (g, r, v, why) in IMPLIED {
        println!(
            "  {:<60} {why}",
            terdut_testenv::rbac_audit::Permission::new(g, r, v)
        );
    }
    let list = |title: &str, items: Vec<String>| {
        if !items.is_empty() {
            println!("{title}:");
            for i in items {
                println!("  {i}");
            }
        }
    };
    list(
        "USED BUT NOT GRANTED (the chart would break the operator)",
        verdict.missing.iter().map(ToString::to_string).collect(),
    );
    list(
        "REFUSED (403)",
        verdict.refused.iter().map(ToString::to_string).collect(),
    );
    list(
        "refused while granted (an authorizer catching up after a restart; not a finding)",
        verdict.transient.iter().map(ToString::to_string).collect(),
    );
    list(
        "GRANTED BUT NEVER USED (wider than needed)",
        verdict.unused.iter().map(ToString::to_string).collect(),
    );
    list(
        "USED OUTSIDE THE RULE'S resourceNames",
        verdict
            .outside_names
            .iter()
            .map(|(p, n)| format!("{p} ({n})"))
            .collect(),
    );
    if !verdict.is_exact() {
        bail!("the chart's RBAC is not the audited set");
    }
    println!("rbac-audit: the chart grants exactly what the operator used");
    Ok(())
}

fn read_logs(dir: &Path) -> anyhow::Result<(Vec<Request>, usize)> {
    let mut requests = vec![];
    let mut files = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "log") {
            files += 1;
            let text = std::fs::read_to_string(&path)?;
            requests.extend(text.lines().filter_map(parse_event));
        }
    }
    Ok((requests, files))
}

/// Every rule of the Roles and ClusterRoles the chart renders with its default values.
fn chart_rules() -> anyhow::Result<Vec<terdut_testenv::rbac_audit::Grant>> {
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../chart/terdut-operator");
    let out = Command::new(tool("helm")?)
        .args(["template", "terdut"])
        .arg(&chart)
        .args([
            "--namespace",
            RELEASE_NAMESPACE,
            "--kube-version",
            "1.37.2",
            "--show-only",
            "templates/rbac.yaml",
        ])
        .output()
        .context("running helm")?;
    if !out.status.success() {
        bail!("helm template: {}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8(out.stdout)?;
    let mut rules = vec![];
    let kinds: BTreeSet<&str> = ["Role", "ClusterRole"].into();
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let v = serde_json::Value::deserialize(doc)?;
        if v.get("kind")
            .and_then(|k| k.as_str())
            .is_some_and(|k| kinds.contains(k))
            && let Some(r) = v.get("rules")
        {
            rules.extend(grants(r));
        }
    }
    Ok(rules)
}
