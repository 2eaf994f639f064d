//! The binary's end of liveness (docs/adr/0017-liveness.md), against a real kube-apiserver:
//! a part dead for good ends the process non-zero with the Lease handed over, and a stalled
//! part fails `/healthz` by name. The faults are armed through the test hooks' listener, as
//! the node scenario arms them.

use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use terdut_testenv::ControlPlane;
use tokio::io::AsyncReadExt as _;
use tokio::process::{Child, Command};

const WAIT: Duration = Duration::from_secs(60);

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The operator binary, watching only `ns`, with its HTTP endpoints and test hooks on free
/// loopback ports.
struct Operator {
    child: Child,
    /// Its stderr, read as it comes (a full pipe would block its logging).
    stderr: tokio::task::JoinHandle<String>,
    http: String,
    hooks: String,
}

impl Operator {
    fn start(cp: &ControlPlane, ns: &str, extra: &[&str]) -> Self {
        let (http, hooks) = (free_port(), free_port());
        let mut child = Command::new(env!("CARGO_BIN_EXE_terdut-operator"))
            .args([
                "--http-addr",
                &format!("127.0.0.1:{http}"),
                "--test-hooks",
                "--test-hooks-addr",
                &format!("127.0.0.1:{hooks}"),
                "--watch-namespaces",
                ns,
                "--server-url-template",
                "http://127.0.0.1:{port}",
                "--log-format",
                "text",
            ])
            .args(extra)
            .env("KUBECONFIG", cp.kubeconfig())
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the operator binary runs");
        let mut pipe = child.stderr.take().expect("piped");
        let stderr = tokio::spawn(async move {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text).await;
            text
        });
        Self {
            child,
            stderr,
            http: format!("http://127.0.0.1:{http}"),
            hooks: format!("http://127.0.0.1:{hooks}"),
        }
    }

    async fn get(&self, path: &str) -> Option<(u16, String)> {
        let resp = reqwest::get(format!("{}{path}", self.http)).await.ok()?;
        let status = resp.status().as_u16();
        Some((status, resp.text().await.ok()?))
    }

    /// Polls `path` until `done` holds for its answer.
    async fn until(&self, path: &str, done: impl Fn(u16, &str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some((status, body)) = self.get(path).await
                && done(status, &body)
            {
                return body;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{path} never became what was waited for"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn arm(&self, part: &str, fault: &str) {
        let resp = reqwest::Client::new()
            .post(format!("{}/fault?part={part}&fault={fault}", self.hooks))
            .send()
            .await
            .expect("the hooks' listener answers");
        assert_eq!(resp.status().as_u16(), 200, "{:?}", resp.text().await);
    }
}

async fn setup(prefix: &str) -> (&'static ControlPlane, kube::Client, String) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cp = ControlPlane::shared().await.expect("control plane");
    let client = cp.client().await.expect("client");
    let ns = cp.namespace(&client, prefix).await.expect("namespace");
    (cp, client, ns)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_part_dead_for_good_ends_the_process_and_hands_the_lease_over() {
    let (cp, client, ns) = setup("live-exit").await;
    let mut op = Operator::start(
        cp,
        &ns,
        &[
            "--leader-elect=true",
            "--lease-namespace",
            &ns,
            "--lease-name",
            "liveness",
            "--identity",
            "liveness-a",
        ],
    );
    op.until("/readyz", |s, b| s == 200 && b == "ready: leader\n")
        .await;
    let healthz = op.until("/healthz", |s, _| s == 200).await;
    assert!(healthz.contains("writer: up\n"), "{healthz}");
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
    let holder = |l: Lease| l.spec.and_then(|s| s.holder_identity);
    assert_eq!(
        holder(leases.get("liveness").await.unwrap()).as_deref(),
        Some("liveness-a")
    );

    op.arm("writer", "panic-always").await;
    let ended = tokio::time::timeout(WAIT, op.child.wait()).await;
    if ended.is_err() {
        let _ = op.child.kill().await;
    }
    let stderr = op.stderr.await.unwrap();
    let status = ended
        .unwrap_or_else(|_| panic!("the process did not end; its log:\n{stderr}"))
        .unwrap();
    assert!(!status.success(), "{status}");
    assert!(
        stderr.contains("the part \"writer\" panicked 6 times within its restart window; exiting so that the pod restarts"),
        "{stderr}"
    );
    assert_eq!(
        holder(leases.get("liveness").await.unwrap()),
        None,
        "the Lease handed over"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_part_fails_healthz_of_the_process_by_name() {
    let (cp, _, ns) = setup("live-stall").await;
    let op = Operator::start(
        cp,
        &ns,
        &["--leader-elect=false", "--liveness-stall-after", "2s"],
    );
    op.until("/readyz", |s, _| s == 200).await;
    op.until("/healthz", |s, _| s == 200).await;
    op.arm("holding", "stall").await;
    let body = op
        .until("/healthz", |s, b| {
            s == 503 && b.starts_with("not live: holding\n")
        })
        .await;
    assert!(
        body.contains("holding: up, stalled: a message unanswered for "),
        "{body}"
    );
    // The process stays up: the kubelet's restart is the remedy (dropping it kills it).
    assert!(op.get("/metrics").await.is_some_and(|(s, _)| s == 200));
}
