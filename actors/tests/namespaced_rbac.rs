//! The operator under the chart's namespaced RBAC (`rbac.namespaced`, docs/design.md §9, §13): its
//! identity is a token for the chart's ServiceAccount, holding only the chart's Roles in the
//! watched namespaces and read access to Namespaces, and it watches exactly the namespaces the
//! chart passes in `--watch-namespaces`. A server and team in a watched namespace converge (so
//! no step needs a cluster-wide grant); a server in another namespace is left alone.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{eventually, server_with_standin, test_policy, test_server};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use serde_json::json;
use terdut_actors::clock::SystemClock;
use terdut_actors::context::OperatorConfig;
use terdut_actors::operator::{self, Metrics, StartOptions};
use terdut_crds::v1alpha1::conditions::{self, READY};
use terdut_crds::v1alpha1::{TerdutServer, TerdutTeam};
use terdut_testenv::{ControlPlane, tool};

const WAIT: Duration = Duration::from_secs(30);
const RELEASE: &str = "nsrbac";

/// `helm template` of the chart, namespaced, showing only `templates`.
fn render(release_ns: &str, watch: &[&str], templates: &[&str]) -> String {
    let chart = concat!(env!("CARGO_MANIFEST_DIR"), "/../chart/terdut-operator");
    let watch = format!("rbac.watchNamespaces={{{}}}", watch.join(","));
    let mut args = vec![
        "template",
        RELEASE,
        chart,
        "--namespace",
        release_ns,
        "--kube-version",
        "1.37.2",
        "--set",
        "rbac.namespaced=true",
        "--set",
        &watch,
    ];
    for t in templates {
        args.extend(["--show-only", t]);
    }
    let out = Command::new(tool("helm").unwrap())
        .args(&args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A client that authenticates as `system:serviceaccount:<ns>:<sa>` with a fresh token.
async fn client_as(cp: &ControlPlane, ns: &str, sa: &str) -> kube::Client {
    let (ok, token) = cp
        .kubectl(&["-n", ns, "create", "token", sa, "--duration=1h"])
        .unwrap();
    assert!(ok, "{token}");
    let kubeconfig = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "local", "cluster": {"server": cp.server, "insecure-skip-tls-verify": true}}],
        "users": [{"name": "operator", "user": {"token": token.trim()}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "operator"}}],
        "current-context": "local",
    });
    let kc: kube::config::Kubeconfig = serde_json::from_value(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_works_with_namespaced_roles_and_ignores_other_namespaces() {
    terdut_actors::api::init_tls();
    let cp = ControlPlane::shared().await.unwrap();
    let admin = cp.client().await.unwrap();
    let release_ns = cp.namespace(&admin, "op").await.unwrap();
    let a = cp.namespace(&admin, "watched-a").await.unwrap();
    let b = cp.namespace(&admin, "watched-b").await.unwrap();
    let other = cp.namespace(&admin, "unwatched").await.unwrap();

    // The chart's ServiceAccount and RBAC, applied as rendered.
    let rbac = render(
        &release_ns,
        &[&a, &b],
        &["templates/serviceaccount.yaml", "templates/rbac.yaml"],
    );
    let path = cp.dir().join("namespaced-rbac.yaml");
    std::fs::write(&path, &rbac).unwrap();
    let (ok, out) = cp
        .kubectl(&["apply", "-f", path.to_str().unwrap()])
        .unwrap();
    assert!(ok, "{out}");
    // The namespaces the chart's Deployment passes to the operator.
    let deployment = render(&release_ns, &[&a, &b], &["templates/deployment.yaml"]);
    let watch: Vec<String> = deployment
        .lines()
        .find_map(|l| l.trim().strip_prefix("- --watch-namespaces="))
        .expect("--watch-namespaces in the Deployment")
        .split(',')
        .map(str::to_owned)
        .collect();
    assert_eq!(watch, [a.clone(), b.clone(), release_ns.clone()]);

    let client = client_as(cp, &release_ns, &format!("{RELEASE}-terdut-operator")).await;
    // The identity is really restricted: no Secrets outside the watched namespaces.
    let forbidden = Api::<Secret>::namespaced(client.clone(), &other)
        .list(&Default::default())
        .await;
    assert!(
        matches!(&forbidden, Err(kube::Error::Api(e)) if e.code == 403),
        "{forbidden:?}"
    );

    let mut registry = prometheus_client::registry::Registry::default();
    let opts = StartOptions {
        config: OperatorConfig {
            server_url_template: "http://127.0.0.1:{port}".into(),
            cluster_domain: "cluster.local".into(),
            api_timeout: Duration::from_secs(3),
            call_timeout: Duration::from_secs(5),
            watch_namespaces: watch,
            // The release namespace, as the chart passes it (--lease-namespace).
            operator_namespace: release_ns.clone(),
            instance_name: RELEASE.into(),
            ..OperatorConfig::default()
        },
        restart_policy: test_policy(),
        clock: std::sync::Arc::new(SystemClock),
        instance: "namespaced-rbac".into(),
        health: Default::default(),
        faults: Default::default(),
    };
    let clients = terdut_actors::kube_clients::KubeClients::from_client(client);
    let mut running = operator::start(clients, Metrics::register(&mut registry), opts)
        .await
        .unwrap();
    tokio::time::timeout(WAIT, running.wait_synced())
        .await
        .expect("every watch lists under the namespaced Roles");

    // Unwatched: created first, so by the time the watched team is Ready the operator has had
    // every chance to act on it.
    Api::<TerdutServer>::namespaced(admin.clone(), &other)
        .create(&PostParams::default(), &test_server("terdut", 19501))
        .await
        .unwrap();

    // Watched: the server gets its key Secret and the stand-in starts with it; the team
    // converges on the server through its API.
    let _standin = server_with_standin(&admin, &a, "terdut", 19500).await;
    let teams: Api<TerdutTeam> = Api::namespaced(admin.clone(), &a);
    let team: TerdutTeam = serde_json::from_value(json!({
        "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutTeam",
        "metadata": {"name": "platform"},
        "spec": {"serverRef": {"name": "terdut"}, "displayName": "Platform"},
    }))
    .unwrap();
    teams.create(&PostParams::default(), &team).await.unwrap();
    eventually("TerdutTeam platform to be Ready", WAIT, || async {
        let t = teams.get("platform").await.ok()?;
        let c = conditions::find(&t.status?.conditions, READY)?.clone();
        (c.status == "True").then_some(())
    })
    .await;
    let status = eventually("the watched server's status", WAIT, || async {
        Api::<TerdutServer>::namespaced(admin.clone(), &a)
            .get("terdut")
            .await
            .ok()?
            .status
            .filter(|s| s.credentials_secret_ref.is_some())
    })
    .await;
    assert!(!status.conditions.is_empty());

    let ignored = Api::<TerdutServer>::namespaced(admin.clone(), &other)
        .get("terdut")
        .await
        .unwrap();
    // Never written: what the API server serves for a status nobody wrote (its schema
    // default, an observedGeneration of -1).
    assert!(
        ignored
            .status
            .as_ref()
            .is_some_and(|s| s.conditions.is_empty() && s.observed_generation == Some(-1)),
        "{:?}",
        ignored.status
    );
    let key = Api::<Secret>::namespaced(admin.clone(), &other)
        .get_opt("terdut-operator-key")
        .await
        .unwrap();
    assert!(key.is_none(), "the unwatched server got a key Secret");
    // Events are published under the namespaced Roles too.
    let mut metrics = String::new();
    prometheus_client::encoding::text::encode(&mut metrics, &registry).unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l == "event_publish_failures_total 0"),
        "{metrics}"
    );

    running.stop().await;
}
