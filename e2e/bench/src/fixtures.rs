//! The objects of a run and the stand-ins behind the servers.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use ractor::rpc::CallResult;
use serde_json::json;
use terdut_actors::key::ObjectKey;
use terdut_actors::tree::writer::Registry;
use terdut_actors::tree::{Access, Credentials, ServerMsg};
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutServer, TerdutTeam};
use terdut_standin::FaultRule;

pub fn server_name(i: usize) -> String {
    format!("srv-{i}")
}

pub fn team_name(i: usize) -> String {
    format!("team-{i}")
}

pub fn source_name(i: usize) -> String {
    format!("src-{i}")
}

/// A TerdutServer whose API the operator reaches at `http://127.0.0.1:{port}` (the bench's URL
/// template), where the bench runs its stand-in.
/// With `labels` (a shard's selector) when given.
pub fn server_labelled(
    name: &str,
    port: u16,
    labels: Option<serde_json::Value>,
) -> anyhow::Result<TerdutServer> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutServer",
        "metadata": {"name": name, "labels": labels.unwrap_or_else(|| json!({}))},
        "spec": {
            "image": {"tag": "v0.9.3"},
            "networking": {"hostname": format!("{name}.example.com"), "servicePort": port},
            "database": {"dsn": "postgres://terdut@db:5432/terdut"},
        }
    }))?)
}

/// Team `i` on server `i % servers`, with the two dead-man switches the issue asks for and no
/// ladder (a ladder naming users would need users seeded on every stand-in).
pub fn team(i: usize, servers: usize) -> anyhow::Result<TerdutTeam> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutTeam",
        "metadata": {"name": team_name(i)},
        "spec": {
            "serverRef": {"name": server_name(i % servers.max(1))},
            "displayName": format!("Team {i}"),
            "deadmanSwitches": [
                {"name": "watchdog", "matcher": "alertname=Watchdog", "timeout": "15m", "severity": "critical"},
                {"name": "heartbeat", "matcher": "alertname=Heartbeat", "timeout": "30m", "severity": "warning"},
            ],
        }
    }))?)
}

/// Source `i` on team `i % teams`.
pub fn source(i: usize, teams: usize) -> anyhow::Result<TerdutAlertSource> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutAlertSource",
        "metadata": {"name": source_name(i)},
        "spec": {
            "teamRef": {"name": team_name(i % teams.max(1))},
            "kind": "alertmanager",
            "name": format!("am-{i}"),
        }
    }))?)
}

/// A free loopback port (bound then released: a small race the bench accepts).
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Creates the TerdutServer, waits for the operator's key Secret, then starts the stand-in on
/// `port` with that key (as the real server seeds its operator account from it) and a fixed
/// latency on every API call (not on the admin surface, which the bench itself uses).
pub async fn server_with_standin(
    client: &kube::Client,
    ns: &str,
    name: &str,
    port: u16,
    latency_ms: u64,
) -> anyhow::Result<terdut_standin::Handle> {
    server_with_standin_labelled(client, ns, name, port, latency_ms, None).await
}

/// [`server_with_standin`] with labels on the TerdutServer.
pub async fn server_with_standin_labelled(
    client: &kube::Client,
    ns: &str,
    name: &str,
    port: u16,
    latency_ms: u64,
    labels: Option<serde_json::Value>,
) -> anyhow::Result<terdut_standin::Handle> {
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), ns);
    servers
        .create(
            &PostParams::default(),
            &server_labelled(name, port, labels)?,
        )
        .await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let secret_name = format!("{name}-operator-key");
    let deadline = Instant::now() + Duration::from_secs(120);
    let secret = loop {
        if let Some(s) = secrets.get_opt(&secret_name).await? {
            break s;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "no Secret {secret_name} after 120 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let token = secret
        .data
        .as_ref()
        .and_then(|d| d.get("token"))
        .ok_or_else(|| anyhow::anyhow!("Secret {secret_name} has no token"))?;
    let key = String::from_utf8(token.0.clone())?;
    let mut config = terdut_standin::Config::for_tests().with_operator_key(key);
    config.listen = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let standin = terdut_standin::spawn(config).await?;
    if latency_ms > 0 {
        standin
            .admin()
            .add_fault(&FaultRule::new("* /api/*").latency_ms(latency_ms))
            .await?;
    }
    Ok(standin)
}

/// Waits until the server's actor hands out credentials: before that every team of it would
/// only report WaitingForServer, and the cold start would measure the server's key setup.
pub async fn wait_credentials(servers: &Registry, key: &ObjectKey) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(actor) = servers.get(key).map(|r| r.clone())
            && let Ok(CallResult::Success(Access {
                credentials: Credentials::Ready(_),
                ..
            })) = actor
                .call(
                    |reply| ServerMsg::Access {
                        namespace: key.namespace.clone(),
                        reply,
                    },
                    Some(Duration::from_secs(5)),
                )
                .await
        {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "TerdutServer {key} has no credentials after 120 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
