//! docs/examples: what the scenario applies, and what it expects the server to hold after.

use std::path::PathBuf;

pub const SERVER_NS: &str = "platform-oncall";
pub const SERVER: &str = "terdut";
/// docs/examples/10-terdutserver.yaml `spec.networking.servicePort`.
pub const SERVER_PORT: u16 = 8080;
/// (namespace, name, displayName)
pub const TEAMS: [(&str, &str, &str); 2] = [
    ("platform-oncall", "platform", "Platform"),
    ("team-payments", "payments", "Payments"),
];
/// (namespace, name, team)
pub const SOURCES: [(&str, &str, &str); 2] = [
    ("platform-oncall", "prod-alertmanager", "platform"),
    ("team-payments", "payments-grafana", "payments"),
];
/// The namespaces the examples use (00-namespaces.yaml).
pub const NAMESPACES: [&str; 2] = ["platform-oncall", "team-payments"];

pub fn file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/examples")
        .join(name)
}

/// The operator key Secret of the example server (docs/design.md §6).
pub fn operator_key_secret() -> String {
    format!("{SERVER}-operator-key")
}

/// The webhook Secret of an alert source.
pub fn webhook_secret(source: &str) -> String {
    format!("{source}-terdut-webhook")
}

/// 10-terdutserver.yaml as a cluster runs it here: the stand-in image in place of the real
/// server's, and one replica: the stand-in keeps its state in its process (it has no
/// database), so two replicas behind one Service would each hold half of it.
pub fn server_for_cluster(image: &str, pull_policy: &str) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(file("10-terdutserver.yaml"))?;
    let mut server: serde_json::Value = serde_yaml_ng::from_str(&text)?;
    let (repository, tag) = image
        .rsplit_once(':')
        .ok_or_else(|| anyhow::anyhow!("image {image} has no tag"))?;
    server["spec"]["image"] = serde_json::json!({
        "repository": repository, "tag": tag, "pullPolicy": pull_policy,
    });
    server["spec"]["replicas"] = 1.into();
    Ok(serde_json::to_string(&server)?)
}
