//! The operator's own HTTP endpoints: `/metrics`, `/healthz`, `/readyz`.
//!
//! Liveness (`/healthz`) is the [`Health`] table's verdict (`runtime/health.rs`): 200 while
//! every part of the leader is up or being restarted, 503 naming the part that failed for
//! good or stalled, so the kubelet restarts the pod (docs/adr/0017-liveness.md). A standby
//! runs no part and is as live as this server.
//!
//! Readiness policy (a decision, not an accident): the leader is ready once its caches have
//! synced; **a standby is ready once it reaches the API server and campaigns** (it runs no
//! informers, so it has no caches to wait for). A standby that reported not-ready would
//! deadlock a rolling update with `maxUnavailable: 0` (the new pod could only lead after the
//! old leader stops, and the old leader is only stopped once the new pod is ready), keep
//! `helm install --wait` waiting and the PDB from allowing an eviction. Nothing routes traffic
//! to the operator by readiness, so a ready standby costs nothing; who leads is visible in the
//! `/readyz` body and the `leader` gauge instead.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::health::Health;

/// The OpenMetrics text content type, which Prometheus negotiates for `# EOF`-terminated bodies.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Shared readiness flags; clones share the same state.
#[derive(Clone, Debug, Default)]
pub struct Readiness(Arc<Flags>);

#[derive(Debug, Default)]
struct Flags {
    synced: AtomicBool,
    leader: AtomicBool,
    standby: AtomicBool,
}

impl Readiness {
    /// The informer caches have completed their initial list. Never goes back.
    pub fn set_synced(&self) {
        self.0.synced.store(true, Ordering::Release);
    }

    /// This replica reached the API server and campaigns for the Lease.
    pub fn set_standby(&self) {
        self.0.standby.store(true, Ordering::Release);
    }

    /// Whether this replica currently holds the leader Lease.
    pub fn set_leader(&self, leader: bool) {
        self.0.leader.store(leader, Ordering::Release);
    }

    /// Caches synced.
    pub fn is_synced(&self) -> bool {
        self.0.synced.load(Ordering::Acquire)
    }

    /// Holds the leader Lease.
    pub fn is_leader(&self) -> bool {
        self.0.leader.load(Ordering::Acquire)
    }

    /// Ready for `/readyz`: a leader whose caches synced, or a campaigning standby (see the
    /// module docs).
    pub fn is_ready(&self) -> bool {
        if self.is_leader() {
            self.is_synced()
        } else {
            self.is_synced() || self.0.standby.load(Ordering::Acquire)
        }
    }
}

#[derive(Clone)]
struct AppState {
    registry: Arc<Registry>,
    readiness: Readiness,
    health: Health,
}

fn router(registry: Arc<Registry>, readiness: Readiness, health: Health) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(AppState {
            registry,
            readiness,
            health,
        })
}

async fn healthz(State(state): State<AppState>) -> (StatusCode, String) {
    let report = state.health.report();
    let status = if report.live {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, report.body)
}

async fn metrics(State(state): State<AppState>, headers: axum::http::HeaderMap) -> Response {
    let mut body = String::new();
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    match prometheus_client::encoding::text::encode(&mut body, &state.registry) {
        Ok(()) if super::exposition::wants_openmetrics(accept) => {
            ([(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)], body).into_response()
        }
        Ok(()) => (
            [(
                header::CONTENT_TYPE,
                super::exposition::PROMETHEUS_TEXT_CONTENT_TYPE,
            )],
            super::exposition::to_prometheus_text(&body),
        )
            .into_response(),
        Err(error) => {
            tracing::error!(%error, "encoding metrics failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

async fn readyz(State(state): State<AppState>) -> (StatusCode, &'static str) {
    let r = &state.readiness;
    match (r.is_ready(), r.is_leader()) {
        (true, true) => (StatusCode::OK, "ready: leader\n"),
        (true, false) => (StatusCode::OK, "ready: standby\n"),
        (false, true) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: leader, caches not synced yet\n",
        ),
        (false, false) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: the API server has not answered yet\n",
        ),
    }
}

/// Serves the endpoints on `addr` until `shutdown` completes, then drains open requests.
pub async fn serve(
    addr: SocketAddr,
    registry: Arc<Registry>,
    readiness: Readiness,
    health: Health,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    serve_on(listener, registry, readiness, health, shutdown).await
}

/// Binds `addr` (port 0 picks a free port), spawns the server and returns the bound address.
/// A bind error surfaces here rather than inside the task.
pub async fn spawn(
    addr: SocketAddr,
    registry: Arc<Registry>,
    readiness: Readiness,
    health: Health,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<(SocketAddr, JoinHandle<io::Result<()>>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let task = tokio::spawn(serve_on(listener, registry, readiness, health, shutdown));
    Ok((bound, task))
}

async fn serve_on(
    listener: TcpListener,
    registry: Arc<Registry>,
    readiness: Readiness,
    health: Health,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    tracing::info!(addr = ?listener.local_addr().ok(), "serving /metrics, /healthz, /readyz");
    axum::serve(listener, router(registry, readiness, health))
        .with_graceful_shutdown(shutdown)
        .await
}

#[cfg(test)]
mod tests {
    use super::{OPENMETRICS_CONTENT_TYPE, Readiness, spawn};
    use crate::runtime::health::{Ended, Health};
    use crate::runtime::metrics::OperatorMetrics;
    use prometheus_client::registry::Registry;
    use std::sync::Arc;
    use tokio_util::sync::CancellationToken;

    #[tokio::test]
    async fn serves_metrics_health_and_readiness_that_follows_the_handle() {
        let mut registry = Registry::default();
        let metrics = OperatorMetrics::register(&mut registry);
        // Families without a series are not encoded at all, so give each one a sample.
        metrics.kube_write("Secret", "create");
        metrics.reconciled("server", "changed", std::time::Duration::from_millis(12));
        metrics.reconcile_error("server", "kube");
        metrics.drift_corrected("server");
        let readiness = Readiness::default();
        let health = Health::default();
        let stop = CancellationToken::new();
        let (addr, task) = spawn(
            "127.0.0.1:0".parse().expect("addr"),
            Arc::new(registry),
            readiness.clone(),
            health.clone(),
            stop.clone().cancelled_owned(),
        )
        .await
        .expect("binds");
        // reqwest is built without a TLS provider and refuses to build a client until one is
        // installed, even for plain http; "already installed" is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::new();
        let get = |path: &'static str| {
            let http = http.clone();
            async move {
                let resp = http
                    .get(format!("http://{addr}{path}"))
                    .send()
                    .await
                    .expect("request");
                let status = resp.status().as_u16();
                let ctype = resp
                    .headers()
                    .get("content-type")
                    .map(|v| v.to_str().expect("ascii").to_owned());
                (status, ctype, resp.text().await.expect("body"))
            }
        };

        // Prometheus negotiates OpenMetrics ...
        let resp = http
            .get(format!("http://{addr}/metrics"))
            .header(
                "accept",
                "application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
            )
            .send()
            .await
            .expect("request");
        let (status, ctype) = (
            resp.status().as_u16(),
            resp.headers().get("content-type").cloned(),
        );
        let body = resp.text().await.expect("body");
        assert_eq!(status, 200);
        assert_eq!(
            ctype.as_ref().and_then(|v| v.to_str().ok()),
            Some(OPENMETRICS_CONTENT_TYPE)
        );
        for family in [
            "# TYPE reconciles counter",
            "# TYPE reconcile_errors counter",
            "# TYPE reconcile_duration_seconds histogram",
            "# TYPE drift_corrections counter",
            r#"kube_writes_total{kind="Secret",verb="create"} 1"#,
            "# TYPE leader gauge",
        ] {
            assert!(body.contains(family), "missing {family:?} in\n{body}");
        }
        assert!(body.ends_with("# EOF\n"), "{body}");
        // ... everyone else gets the classic text format.
        let (status, ctype, plain) = get("/metrics").await;
        assert_eq!(status, 200);
        assert_eq!(
            ctype.as_deref(),
            Some(super::super::exposition::PROMETHEUS_TEXT_CONTENT_TYPE)
        );
        assert!(
            plain.contains("# TYPE reconciles_total counter") && !plain.contains("# EOF"),
            "{plain}"
        );

        assert_eq!(get("/healthz").await, (200, ctype_text(), "ok\n".into()));
        // Liveness is the parts' truth: one dead for good fails it, by name.
        health.up("writer");
        health.failed("writer", Ended::Panicked, 6);
        let (status, _, body) = get("/healthz").await;
        assert_eq!(status, 503, "{body}");
        assert!(body.starts_with("not live: writer\n"), "{body}");
        assert_eq!(get("/readyz").await.0, 503);
        // A standby that reaches the API server is ready without caches (it has none).
        readiness.set_standby();
        assert_eq!(
            get("/readyz").await,
            (200, ctype_text(), "ready: standby\n".into())
        );
        // Elected: not ready again until its caches synced.
        readiness.set_leader(true);
        assert_eq!(
            get("/readyz").await.2,
            "not ready: leader, caches not synced yet\n"
        );
        readiness.set_synced();
        assert_eq!(get("/readyz").await.2, "ready: leader\n");

        stop.cancel();
        task.await.expect("joins").expect("clean shutdown");
    }

    fn ctype_text() -> Option<String> {
        Some("text/plain; charset=utf-8".into())
    }
}
