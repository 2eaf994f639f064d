//! The kube-apiserver's audit log of the operator's own requests, for the least-privilege check
//! (`rbac-audit`, docs/security.md): every control plane logs, at Metadata level, each request
//! of the identities the operator runs as, so the verbs and resources it really uses can be
//! listed and compared with what the chart grants.
//!
//! The identities: the operator of the integration tests (a token user in [`OPERATOR_GROUP`],
//! also in `system:masters`, see [`operator_token_line`]) and the chart's ServiceAccount in
//! `terdut-system` (`just e2e-local`, `just chaos`, the node cluster). Everything else — the
//! tests' own admin, kube-controller-manager, the kubelet — is not logged.
//!
//! Logs go to `$TERDUT_AUDIT_DIR/audit-<id>.log` when that is set (`just test` sets it, so they
//! outlive the control planes), else into the control plane's own directory.

use std::path::{Path, PathBuf};

/// The group of the integration tests' operator identity.
pub const OPERATOR_GROUP: &str = "terdut:operator";
/// The user name of that identity.
pub const OPERATOR_USER: &str = "terdut-operator-test";
/// Where audit logs are collected across control planes.
pub const ENV_AUDIT_DIR: &str = "TERDUT_AUDIT_DIR";
/// The namespace the chart is installed into by the project's runs.
pub const RELEASE_NAMESPACE: &str = "terdut-system";

const POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
  - level: Metadata
    userGroups: [\"terdut:operator\", \"system:serviceaccounts:terdut-system\"]
  - level: None
";

/// The `tokens.csv` line of the operator identity for `token`.
pub(crate) fn operator_token_line(token: &str) -> String {
    format!("{token},{OPERATOR_USER},uid-{OPERATOR_USER},\"system:masters,{OPERATOR_GROUP}\"")
}

/// Writes the policy into `dir` and returns the kube-apiserver flags that log to the collection
/// directory (or `dir`), with a file name of its own (`id`).
pub(crate) fn apiserver_args(dir: &Path, id: &str) -> anyhow::Result<Vec<String>> {
    let policy = dir.join("audit-policy.yaml");
    std::fs::write(&policy, POLICY)?;
    let logs = log_dir().unwrap_or_else(|| dir.to_path_buf());
    std::fs::create_dir_all(&logs)?;
    Ok(vec![
        format!("--audit-policy-file={}", policy.display()),
        format!(
            "--audit-log-path={}",
            logs.join(format!("audit-{id}.log")).display()
        ),
        "--audit-log-format=json".into(),
        "--audit-log-maxbackup=0".into(),
        // Never rotated: unset, the log is rotated at 100 MiB, and a reader of the one file (the
        // peers bench) loses what came before (a 10,000-object run writes several times that).
        "--audit-log-maxsize=1000000".into(),
    ])
}

/// `$TERDUT_AUDIT_DIR`, if set.
pub fn log_dir() -> Option<PathBuf> {
    std::env::var_os(ENV_AUDIT_DIR)
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
}
