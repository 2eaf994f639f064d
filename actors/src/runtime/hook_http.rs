//! The test hooks' listener (`--test-hooks` only; docs/adr/0017-liveness.md): how a test
//! outside the process arms a fault on a part of the leader. Bound to a loopback address and
//! refused on any other, so only the pod itself reaches it (in a cluster: `kubectl
//! port-forward`, which needs `pods/portforward` in the operator's namespace).
//!
//! - `GET /parts`: the parts' names, one per line;
//! - `POST /fault?part=<name>&fault=panic|panic-always|end|stall`: arms it (404 for a part
//!   the operator does not run, 400 for an unknown fault);
//! - `POST /allocate?mib=<1..=4096>`: allocates that much memory, touches every page and keeps
//!   it for the life of the process: the node chaos run's way to take the leader over a memory
//!   limit it set just above the container's usage, so the kernel's OOM killer ends it at a
//!   known moment (docs/reliability.md "Node faults").

use std::net::SocketAddr;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::faults::{Fault, Faults};
use super::health::Health;

#[derive(Clone)]
struct Hooks {
    faults: Faults,
    health: Health,
}

#[derive(serde::Deserialize)]
struct Allocate {
    mib: usize,
}

/// The most one `/allocate` takes: a typo must not look like a hang.
const MAX_ALLOCATE_MIB: usize = 4096;

/// Memory `/allocate` took, held until the process ends.
static HELD: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());

async fn allocate(Query(q): Query<Allocate>) -> (StatusCode, String) {
    if q.mib == 0 || q.mib > MAX_ALLOCATE_MIB {
        return (
            StatusCode::BAD_REQUEST,
            format!("mib must be 1..={MAX_ALLOCATE_MIB}\n"),
        );
    }
    tracing::warn!(mib = q.mib, "test hook: allocating and holding memory");
    let mut held = HELD
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for _ in 0..q.mib {
        // Non-zero bytes: every page is written, so it counts against the cgroup now.
        held.push(vec![0xa5; 1 << 20]);
    }
    (StatusCode::OK, format!("allocated {} MiB\n", q.mib))
}

#[derive(serde::Deserialize)]
struct Arm {
    part: String,
    fault: String,
}

async fn parts(State(hooks): State<Hooks>) -> String {
    hooks.health.names().into_iter().map(|n| n + "\n").collect()
}

async fn arm(State(hooks): State<Hooks>, Query(arm): Query<Arm>) -> (StatusCode, String) {
    let fault: Fault = match arm.fault.parse() {
        Ok(f) => f,
        Err(e) => return (StatusCode::BAD_REQUEST, e + "\n"),
    };
    if hooks.health.part(&arm.part).is_none() {
        return (
            StatusCode::NOT_FOUND,
            format!("no part {:?} (GET /parts)\n", arm.part),
        );
    }
    match hooks.faults.arm(&arm.part, fault) {
        Ok(()) => {
            tracing::warn!(part = %arm.part, ?fault, "test hook: fault armed");
            (StatusCode::OK, format!("armed {fault:?} on {}\n", arm.part))
        }
        Err(e) => (StatusCode::CONFLICT, format!("{e}\n")),
    }
}

/// Binds `addr` (loopback only) and serves the hooks until `stop`; returns the bound address.
pub async fn spawn(
    addr: SocketAddr,
    faults: Faults,
    health: Health,
    stop: CancellationToken,
) -> anyhow::Result<(SocketAddr, JoinHandle<std::io::Result<()>>)> {
    anyhow::ensure!(
        addr.ip().is_loopback(),
        "--test-hooks-addr {addr} is not a loopback address: the test hooks are for the pod itself"
    );
    anyhow::ensure!(faults.is_enabled(), "the test hooks are off");
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = Router::new()
        .route("/parts", get(parts))
        .route("/fault", post(arm))
        .route("/allocate", post(allocate))
        .with_state(Hooks { faults, health });
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await
    });
    Ok((bound, task))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_a_loopback_address_is_taken() {
        let refused = spawn(
            "0.0.0.0:0".parse().unwrap(),
            Faults::enabled(),
            Health::default(),
            CancellationToken::new(),
        )
        .await;
        assert!(refused.unwrap_err().to_string().contains("loopback"));
    }

    #[tokio::test]
    async fn arms_a_fault_on_a_part_it_knows() {
        let (faults, health, stop) = (
            Faults::enabled(),
            Health::default(),
            CancellationToken::new(),
        );
        health.up("writer");
        let (addr, _task) = spawn(
            "127.0.0.1:0".parse().unwrap(),
            faults.clone(),
            health,
            stop.clone(),
        )
        .await
        .unwrap();
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::new();
        let post = |q: &'static str| {
            let http = http.clone();
            async move {
                http.post(format!("http://{addr}/fault?{q}"))
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            }
        };
        assert_eq!(post("part=writer&fault=explode").await, 400);
        assert_eq!(post("part=nobody&fault=panic").await, 404);
        assert_eq!(faults.peek("writer"), None);
        assert_eq!(post("part=writer&fault=stall").await, 200);
        assert_eq!(faults.peek("writer"), Some(Fault::Stall));
        let list = http
            .get(format!("http://{addr}/parts"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(list, "writer\n");
        let allocate = |q: &'static str| {
            let http = http.clone();
            async move {
                http.post(format!("http://{addr}/allocate?{q}"))
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            }
        };
        assert_eq!(allocate("mib=0").await, 400);
        assert_eq!(allocate("mib=5000").await, 400);
        assert_eq!(allocate("mib=1").await, 200);
        assert_eq!(HELD.lock().unwrap().len(), 1);
        stop.cancel();
    }
}
