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
use terdut_actors::supervisor::{Jitter, RestartPolicy, SupervisorMsg};
use terdut_actors::tree::server::ServerFactory;
use terdut_testenv::ControlPlane;

/// The operator of this test binary.
pub struct TestOperator {
    pub ctx: Ctx,
    /// The whole tree: where each team and source actor lives, and what its host knows.
    pub tree: terdut_actors::operator::Tree,
    pub registry: Arc<prometheus_client::registry::Registry>,
}

impl TestOperator {
    /// The root supervisor of the server actors (its running incarnation).
    pub fn servers(&self) -> ractor::ActorRef<SupervisorMsg<ServerFactory>> {
        self.tree.servers()
    }
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
    // Its own identity, so the audit log tells its requests from the tests' (rbac-audit).
    let kubeconfig = cp.operator_kubeconfig();
    // One operator per binary even when tests start at once: `get_or_init` runs a single
    // initializer and blocks the others until it is done (two operators would fight over
    // every object).
    OPERATOR.get_or_init(move || {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let (running, registry) = start_operator(&kubeconfig, test_config()).await;
                let _ = tx.send(TestOperator {
                    ctx: running.ctx.clone(),
                    tree: running.tree.clone(),
                    registry,
                });
                std::future::pending::<()>().await;
            });
        });
        rx.recv().expect("operator started")
    })
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

/// The operator settings of the tests: test hooks on, the API of every TerdutServer at
/// `http://127.0.0.1:{servicePort}`, short retries and idle periods.
pub fn test_config() -> OperatorConfig {
    OperatorConfig {
        resync: Duration::from_secs(300),
        server_url_template: "http://127.0.0.1:{port}".into(),
        cluster_domain: "cluster.local".into(),
        api_timeout: Duration::from_secs(3),
        call_timeout: Duration::from_secs(5),
        test_hooks: true,
        // A team waiting for a user to sign up retries every 2s, not 30s.
        blocked_retry: Duration::from_secs(2),
        // Small, so every test also runs with passes queueing for a slot (a pass waiting on
        // another pass's slot would hang a test).
        max_concurrent_passes: 2,
        // Short, so every test also runs with actors passivated between its steps and
        // brought back by events and deadlines.
        passivate_after: Some(Duration::from_secs(3)),
        // Small, so every test also runs with starts queueing for a place (ADR 0011): a
        // start the queue lost would hang a test.
        wake_budget: 3,
        // Where the operator keeps its records and its instance claim (made by
        // `start_operator` if missing).
        operator_namespace: OPERATOR_NAMESPACE.into(),
        instance_name: "test".into(),
        ..OperatorConfig::default()
    }
}

/// The operator's own namespace in the tests (its team records and instance claims).
pub const OPERATOR_NAMESPACE: &str = "terdut-system";

/// Starts an operator with `config` as the identity of `kubeconfig`, in the calling runtime,
/// and waits until its informers listed. Its own namespace (`config.operator_namespace`) is
/// made first if missing, as the chart's release namespace exists before the operator.
pub async fn start_operator(
    kubeconfig: &std::path::Path,
    config: OperatorConfig,
) -> (
    terdut_actors::operator::RunningOperator,
    Arc<prometheus_client::registry::Registry>,
) {
    terdut_actors::api::init_tls();
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let kube_config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let clients = terdut_actors::kube_clients::KubeClients::from_config(kube_config).unwrap();
    // As an admin, beside the operator's identity: the operator never creates namespaces, and
    // `just rbac-audit` holds its identity to exactly what the chart grants.
    let admin = kubeconfig.with_file_name("admin.kubeconfig");
    let admin = if admin.exists() {
        let kc = kube::config::Kubeconfig::read_from(&admin).unwrap();
        let c = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(c).unwrap()
    } else {
        clients.reconcile.clone()
    };
    ensure_namespace(&admin, &config.operator_namespace).await;
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = Metrics::register(&mut registry);
    let opts = StartOptions {
        config,
        restart_policy: test_policy(),
        clock: Arc::new(SystemClock),
        instance: "test".into(),
        health: Default::default(),
        // Test hooks on, as in `test_config`: the liveness tests arm faults on the parts.
        faults: terdut_actors::runtime::faults::Faults::enabled(),
    };
    let mut running = operator::start(clients, metrics, opts).await.unwrap();
    running.wait_synced().await;
    (running, Arc::new(registry))
}

/// Makes the namespace `name` unless it exists.
pub async fn ensure_namespace(client: &kube::Client, name: &str) {
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::{Api, PostParams};
    let api: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("namespace {name}: {e}"),
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

/// A TerdutServer named `name` whose API (through the test URL template) is
/// `http://127.0.0.1:<port>`; `port` must be unique in the test binary.
pub fn test_server(name: &str, port: i32) -> terdut_crds::v1alpha1::TerdutServer {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutServer",
        "metadata": {"name": name},
        "spec": {
            "image": {"tag": "v0.9.3"},
            "networking": {"hostname": "terdut.example.com", "servicePort": port},
            "database": {"dsn": "postgres://terdut@db:5432/terdut"},
        }
    }))
    .unwrap()
}

/// Creates `test_server(name, port)` in `ns`, waits for its operator key Secret, and starts
/// the stand-in terdut-server on `127.0.0.1:<port>` seeded with that key, as the real server
/// seeds its operator account from `TERDUT_OPERATOR_KEY` (docs/design.md §6). The stand-in lives as
/// long as the returned handle's runtime (the calling test).
pub async fn server_with_standin(
    client: &kube::Client,
    ns: &str,
    name: &str,
    port: u16,
) -> terdut_standin::Handle {
    use kube::api::{Api, PostParams};
    let servers: Api<terdut_crds::v1alpha1::TerdutServer> = Api::namespaced(client.clone(), ns);
    servers
        .create(&PostParams::default(), &test_server(name, i32::from(port)))
        .await
        .unwrap();
    standin_for(client, ns, name, port).await
}

/// Starts the stand-in for an existing TerdutServer (see [`server_with_standin`]); also used to
/// restart it, e.g. with a new key after a rotation.
pub async fn standin_for(
    client: &kube::Client,
    ns: &str,
    name: &str,
    port: u16,
) -> terdut_standin::Handle {
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::Api;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let secret_name = format!("{name}-operator-key");
    let secret = eventually(
        "the operator key Secret",
        Duration::from_secs(30),
        || async { secrets.get_opt(&secret_name).await.ok().flatten() },
    )
    .await;
    let key = String::from_utf8(secret.data.unwrap()["token"].0.clone()).unwrap();
    let mut config = terdut_standin::Config::for_tests().with_operator_key(key);
    config.listen = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    terdut_standin::spawn(config)
        .await
        .expect("stand-in started")
}

/// The CRD of the Zalando postgres-operator's `postgresql` kind (schema-less), for the
/// `database.postgresClusterRef` path (docs/design.md §8).
pub fn zalando_crd()
-> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "postgresqls.acid.zalan.do"},
        "spec": {
            "group": "acid.zalan.do", "scope": "Namespaced",
            "names": {"kind": "postgresql", "plural": "postgresqls", "singular": "postgresql"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .unwrap()
}

/// The CRD of CloudNativePG's `Cluster` kind (schema-less, with its status subresource), for
/// the `database.cnpgClusterRef` path (docs/design.md §8).
pub fn cnpg_crd()
-> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "clusters.postgresql.cnpg.io"},
        "spec": {
            "group": "postgresql.cnpg.io", "scope": "Namespaced",
            "names": {"kind": "Cluster", "plural": "clusters", "singular": "cluster", "listKind": "ClusterList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .unwrap()
}

/// The value of one series of the test operator's metrics (`name{labels}` as the text encoding
/// writes it, without the `terdut_operator_` prefix the binary adds), if it is exposed.
pub fn metric(op: &TestOperator, series: &str) -> Option<f64> {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &op.registry).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Creates an Opaque Secret `name` in `ns` with `data` (for the Secrets a spec names).
pub async fn create_secret(client: &kube::Client, ns: &str, name: &str, data: &[(&str, &str)]) {
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::{Api, PostParams};
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name},
        "stringData": data.iter().map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
            .collect::<serde_json::Map<_, _>>(),
    }))
    .unwrap();
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}
