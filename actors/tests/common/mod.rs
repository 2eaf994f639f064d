//! Shared by the operator's integration tests: one real control plane and one operator per test
//! binary. The operator runs on a runtime of its own, because actors die with the runtime that
//! spawned them and every `#[tokio::test]` has its own.

#![allow(dead_code)]

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use terdut_actors::clock::SystemClock;
use terdut_actors::context::{Ctx, OperatorConfig};
use terdut_actors::operator::{self, Metrics, StartOptions};
use terdut_actors::server::actor::ServerFactory;
use terdut_actors::supervisor::{Jitter, RestartPolicy, SupervisorMsg};
use terdut_testenv::ControlPlane;

/// The operator of this test binary.
pub struct TestOperator {
    pub ctx: Ctx,
    pub servers: ractor::ActorRef<SupervisorMsg<ServerFactory>>,
    pub registry: Arc<prometheus_client::registry::Registry>,
}

static OPERATOR: OnceLock<TestOperator> = OnceLock::new();

/// Restart delays short enough for tests, long enough to see them grow.
pub fn test_policy() -> RestartPolicy {
    RestartPolicy {
        base: Duration::from_millis(200),
        cap: Duration::from_secs(5),
        jitter: Jitter::None,
        ..RestartPolicy::default()
    }
}

/// Starts (once) the operator against the shared control plane, with test hooks on and the
/// API of every TerdutServer at `http://127.0.0.1:{servicePort}`.
pub async fn operator() -> &'static TestOperator {
    let cp = ControlPlane::shared().await.expect("control plane");
    let kubeconfig = cp.kubeconfig().to_path_buf();
    if let Some(op) = OPERATOR.get() {
        return op;
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            terdut_actors::api::init_tls();
            let kc = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
            let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .unwrap();
            let client = kube::Client::try_from(config).unwrap();
            let mut registry = prometheus_client::registry::Registry::default();
            let metrics = Metrics::register(&mut registry);
            let opts = StartOptions {
                config: OperatorConfig {
                    resync: Duration::from_secs(300),
                    server_url_template: "http://127.0.0.1:{port}".into(),
                    api_timeout: Duration::from_secs(3),
                    call_timeout: Duration::from_secs(5),
                    test_hooks: true,
                },
                restart_policy: test_policy(),
                clock: Arc::new(SystemClock),
                instance: "test".into(),
            };
            let mut running = operator::start(client, metrics, opts).await.unwrap();
            running.wait_synced().await;
            let _ = tx.send(TestOperator {
                ctx: running.ctx.clone(),
                servers: running.servers.clone(),
                registry: Arc::new(registry),
            });
            std::future::pending::<()>().await;
        });
    });
    let op = rx.recv().expect("operator started");
    let _ = OPERATOR.set(op);
    OPERATOR.get().unwrap()
}

/// Polls `probe` every 200 ms until it returns `Some`, or panics after `limit` naming `what`.
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Control plane, a fresh client and a namespace for one test.
pub async fn setup(
    prefix: &str,
) -> (
    &'static ControlPlane,
    kube::Client,
    String,
    &'static TestOperator,
) {
    let cp = ControlPlane::shared().await.expect("control plane");
    let client = cp.client().await.expect("client");
    let ns = cp.namespace(&client, prefix).await.expect("namespace");
    let op = operator().await;
    (cp, client, ns, op)
}
