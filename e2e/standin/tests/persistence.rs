//! State survives a restart when the stand-in has a data file: in-process, and as the real
//! binary killed and started again (what crash tests do to it).

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::Api;
use reqwest::Method;
use serde_json::json;
use terdut_standin::{Config, generate_operator_key, spawn};

#[tokio::test]
async fn state_survives_a_restart_with_a_data_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("standin.json");
    let key = generate_operator_key();
    let config = || {
        Config::for_tests()
            .with_operator_key(key.clone())
            .with_data_file(&file)
    };

    let first = spawn(config()).await.unwrap();
    let api = Api::new(&first);
    first.admin().seed_users(["alice"]).await.unwrap();
    let (_, team) = api
        .call(
            Method::POST,
            "/api/v1/teams",
            Some(json!({"name": "Platform", "external_id": "ns/platform"})),
        )
        .await;
    let id = team["id"].as_i64().unwrap();
    let (status, _) = api
        .call(
            Method::PUT,
            &format!("/api/v1/teams/{id}/escalation"),
            Some(json!({"repeat_count": 1, "levels": [{"timeout_seconds": 60,
                "targets": [{"kind": "user", "username": "alice"}]}]})),
        )
        .await;
    assert_eq!(status, 200);
    let (_, created) = api
        .call(
            Method::POST,
            &format!("/api/v1/teams/{id}/integrations"),
            Some(json!({"kind": "generic", "name": "g", "external_id": "ns/g"})),
        )
        .await;
    let integration_key = created["key"].as_str().unwrap().to_owned();
    let before = first.admin().state().await.unwrap();
    first.shutdown().await;

    let raw = std::fs::read_to_string(&file).unwrap();
    assert!(
        !raw.contains(&integration_key),
        "the data file keeps digests, not keys"
    );

    let second = spawn(config()).await.unwrap();
    let api = Api::new(&second);
    assert_eq!(second.admin().state().await.unwrap(), before);
    assert!(
        second
            .admin()
            .key_check(&integration_key)
            .await
            .unwrap()
            .live
    );
    let (status, again) = api
        .call(
            Method::POST,
            "/api/v1/teams",
            Some(json!({"name": "Renamed?", "external_id": "ns/platform"})),
        )
        .await;
    assert_eq!((status, &again), (200, &team), "found, not created again");
    let (_, other) = api
        .call(
            Method::POST,
            "/api/v1/teams",
            Some(json!({"name": "Other", "external_id": "ns/other"})),
        )
        .await;
    assert!(other["id"].as_i64().unwrap() > id, "ids are never reused");
    second.shutdown().await;
}

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_binary(port: u16, key: &str, file: &std::path::Path) -> Proc {
    let child = Command::new(env!("CARGO_BIN_EXE_terdut-standin"))
        .args(["--data-file", file.to_str().unwrap()])
        .env("TERDUT_LISTEN_ADDR", format!("127.0.0.1:{port}"))
        .env("TERDUT_OPERATOR_KEY", key)
        .env("TERDUT_STANDIN_ADMIN", "1")
        .env("TERDUT_PUBLIC_URL", "https://terdut.example")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start terdut-standin");
    Proc(child)
}

async fn wait_ready(http: &reqwest::Client, base: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(r) = http.get(format!("{base}/readyz")).send().await
            && r.status().is_success()
        {
            return;
        }
        assert!(Instant::now() < deadline, "terdut-standin did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_binary_keeps_state_across_a_kill() {
    terdut_standin::init_tls();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data.json");
    let key = generate_operator_key();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();

    let proc = start_binary(port, &key, &file);
    wait_ready(&http, &base).await;
    let resp = http
        .post(format!("{base}/api/v1/teams"))
        .bearer_auth(&key)
        .json(&json!({"name": "Kept", "external_id": "ns/kept"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 201);
    let team: serde_json::Value = resp.json().await.unwrap();
    let resp = http
        .post(format!("{base}/api/v1/teams/{}/integrations", team["id"]))
        .bearer_auth(&key)
        .json(&json!({"kind": "alertmanager", "name": "am", "external_id": "ns/am"}))
        .send()
        .await
        .unwrap();
    let created: serde_json::Value = resp.json().await.unwrap();
    assert!(
        created["url"]
            .as_str()
            .unwrap()
            .starts_with("https://terdut.example/api/v1/ingest/alertmanager/"),
        "webhook URLs use TERDUT_PUBLIC_URL"
    );
    drop(proc); // SIGKILL: no chance to flush anything

    let _proc = start_binary(port, &key, &file);
    wait_ready(&http, &base).await;
    let resp = http
        .get(format!("{base}/api/v1/teams/{}", team["id"]))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.json::<serde_json::Value>().await.unwrap(), team);
    let admin = terdut_standin::AdminClient::new(&base, None);
    let check = admin
        .key_check(created["key"].as_str().unwrap())
        .await
        .unwrap();
    assert!(check.live);
    let whoami = http
        .get(format!("{base}/api/v1/whoami"))
        .bearer_auth(generate_operator_key())
        .send()
        .await
        .unwrap();
    assert_eq!(whoami.status().as_u16(), 401, "only the configured key");
}

#[test]
fn the_binary_refuses_to_start_without_a_well_formed_key() {
    for key in [None, Some("tdsa_short")] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_terdut-standin"));
        cmd.env_remove("TERDUT_OPERATOR_KEY")
            .env("TERDUT_LISTEN_ADDR", "127.0.0.1:0")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(k) = key {
            cmd.env("TERDUT_OPERATOR_KEY", k);
        }
        let status = cmd.status().expect("run");
        assert_eq!(status.code(), Some(2), "key {key:?}");
    }
}
