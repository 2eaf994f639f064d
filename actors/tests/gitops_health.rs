//! What gitops tools read of the three kinds, with their own libraries (docs/gitops.md,
//! docs/design.md §7): live objects in each state are given to `terdut-health` (e2e/gitops),
//! which computes their kstatus with sigs.k8s.io/cli-utils (what Flux's `wait`, Helm's wait
//! and kpt use) and runs the Argo CD health checks of deploy/argocd with gopher-lua, as Argo
//! CD runs an argocd-cm script. Then every stalled or waiting object is fixed the way its
//! runbook says, and each must read Current and Healthy. The checks' own cases
//! (health_test.yaml) run here too, and the argocd-cm patch is applied with kubectl.
//!
//! Stand-in ports 19750-19759.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{eventually, server_with_standin, setup, test_server};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use terdut_actors::server::TEST_FAULT_ANNOTATION;
use terdut_crds::v1alpha1::conditions::{READY, find};
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutServer, TerdutTeam};

// Patient: on a loaded 2-core CI machine a crash-loop of 5 restarts and a pass per object
// take their time; only a failing run waits this long.
const WAIT: Duration = Duration::from_secs(120);
const PAUSE: &str = "terdut.ryuvia.com/paused";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The `terdut-health` binary, built (or found in the cache) by e2e/gitops/build.sh.
fn terdut_health() -> PathBuf {
    let out = Command::new("bash")
        .arg(repo().join("e2e/gitops/build.sh"))
        .output()
        .expect("bash e2e/gitops/build.sh");
    assert!(
        out.status.success(),
        "e2e/gitops/build.sh failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

fn customizations() -> PathBuf {
    repo().join("deploy/argocd/resource_customizations")
}

/// Runs `terdut-health live` on `checks` (`KIND/NAME=KSTATUS,ARGO` in `ns`); its table goes to
/// the test's output. Off the test's runtime, which serves the stand-in meanwhile.
async fn expect_live(kubeconfig: &Path, ns: &str, checks: &[(&str, &str, &str, &str)]) {
    let kubeconfig = kubeconfig.to_owned();
    let args: Vec<String> = checks
        .iter()
        .map(|(kind, name, kstatus, argo)| format!("{kind}/{ns}/{name}={kstatus},{argo}"))
        .collect();
    tokio::task::spawn_blocking(move || run_live(&kubeconfig, &args))
        .await
        .unwrap();
}

fn run_live(kubeconfig: &Path, checks: &[String]) {
    let mut cmd = Command::new(terdut_health());
    cmd.arg("live")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--lua")
        .arg(customizations())
        .args(["--timeout", "120s"]);
    cmd.args(checks);
    let out = cmd.output().expect("terdut-health live");
    let table = String::from_utf8_lossy(&out.stdout);
    eprintln!("{table}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "kstatus or Argo CD read an object wrongly:\n{table}"
    );
}

fn object<K: serde::de::DeserializeOwned>(v: serde_json::Value) -> K {
    serde_json::from_value(v).unwrap()
}

/// A TerdutTeam on `server`, `extra` merged into its spec.
fn team(name: &str, server: &str, display: &str, extra: serde_json::Value) -> TerdutTeam {
    let mut t = json!({
        "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutTeam",
        "metadata": {"name": name},
        "spec": {"serverRef": {"name": server}, "displayName": display},
    });
    for (k, v) in extra.as_object().unwrap() {
        t["spec"][k] = v.clone();
    }
    object(t)
}

fn source(name: &str, team: &str) -> TerdutAlertSource {
    object(json!({
        "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutAlertSource",
        "metadata": {"name": name},
        "spec": {"teamRef": {"name": team}, "kind": "alertmanager", "name": name},
    }))
}

async fn ready_reason<K>(api: &Api<K>, name: &str) -> Option<String>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + terdut_actors::crash_loop::Conditioned,
{
    let obj = api.get(name).await.ok()?;
    find(&obj.conditions(), READY).map(|c| c.reason.clone())
}

async fn wait_reason<K>(api: &Api<K>, name: &str, reason: &str)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + terdut_actors::crash_loop::Conditioned,
{
    eventually(&format!("{name} to be {reason}"), WAIT, || async {
        (ready_reason(api, name).await.as_deref() == Some(reason)).then_some(())
    })
    .await;
}

/// The kubelet's part for a cluster without one: marks the server's pods Running and Ready,
/// so the ReplicaSet and Deployment controllers count them available. A loop, as a kubelet is:
/// on a loaded machine the operator may still roll the Deployment (a new ReplicaSet's pods)
/// after a first look, so every pod not yet Ready is marked until the Deployment reports all
/// of its replicas updated and available.
async fn pods_turn_ready(client: &kube::Client, ns: &str, server: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let selector = format!("app.kubernetes.io/instance={server}");
    eventually(
        &format!("{server}'s Deployment available"),
        WAIT,
        || async {
            let listed = pods
                .list(&ListParams::default().labels(&selector))
                .await
                .ok()?;
            let now = k8s_openapi::jiff::Timestamp::now().to_string();
            for pod in listed.items.iter().filter(|p| !pod_ready(p)) {
                let status = json!({"status": {
                    "phase": "Running",
                    "conditions": [
                        {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
                        {"type": "Initialized", "status": "True", "lastTransitionTime": now},
                        {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
                        {"type": "Ready", "status": "True", "lastTransitionTime": now},
                    ],
                }});
                let name = pod.metadata.name.as_deref()?;
                // A pod the ReplicaSet controller removed meanwhile: the next look settles it.
                let _ = pods
                    .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
                    .await;
            }
            let d = deployments.get(server).await.ok()?;
            let want = d.spec.replicas.unwrap_or(1);
            let st = d.status.as_ref()?;
            let settled = st.observed_generation == d.metadata.generation
                && st.updated_replicas.unwrap_or(0) == want
                && st.available_replicas.unwrap_or(0) == want
                && st.replicas.unwrap_or(0) == want;
            settled.then_some(())
        },
    )
    .await;
}

fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[tokio::test]
async fn kstatus_and_argo_cd_read_every_state_right() {
    let (cp, client, ns, _) = setup("gitops").await;
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    let teams: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    let sources: Api<TerdutAlertSource> = Api::namespaced(client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let pp = PostParams::default();

    // Servers: one answering (the stand-in), one that never does, one in the way of a foreign
    // Deployment, one parked, one whose actor crashes on every pass.
    let standin = server_with_standin(&client, &ns, "served", 19750).await;
    servers
        .create(&pp, &test_server("starting", 19751))
        .await
        .unwrap();
    let foreign: Deployment = object(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "blocked"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "other"}},
            "template": {"metadata": {"labels": {"app": "other"}},
                "spec": {"containers": [{"name": "c", "image": "example.com/other:1"}]}}},
    }));
    Api::<Deployment>::namespaced(client.clone(), &ns)
        .create(&pp, &foreign)
        .await
        .unwrap();
    servers
        .create(&pp, &test_server("blocked", 19752))
        .await
        .unwrap();
    let mut parked = test_server("parked", 19753);
    parked.spec.replicas = 0;
    servers.create(&pp, &parked).await.unwrap();
    let mut crashing = test_server("crashing", 19754);
    crashing.metadata.annotations =
        Some([(TEST_FAULT_ANNOTATION.to_owned(), "panic".to_owned())].into());
    servers.create(&pp, &crashing).await.unwrap();

    // Teams on them. "holder" has the name "Payments" on the server before "taken" asks for
    // it: created together, their first passes can run in either order (both wait for the
    // server's first look, and the nudge that ends the wait starts them at once).
    teams
        .create(&pp, &team("holder", "served", "Payments", json!({})))
        .await
        .unwrap();
    wait_reason(&teams, "holder", "Ready").await;
    for t in [
        team("taken", "served", "Payments", json!({})),
        team(
            "unknown-user",
            "served",
            "Search",
            json!({"escalation": {"levels": [{"timeout": "5m",
                "targets": [{"kind": "user", "username": "alice"}]}]}}),
        ),
        team("waiting", "starting", "Waiting", json!({})),
        team("orphan", "nowhere", "Orphan", json!({})),
    ] {
        teams.create(&pp, &t).await.unwrap();
    }
    let mut paused = team("paused", "served", "Paused", json!({}));
    paused.metadata.annotations = Some([(PAUSE.to_owned(), "true".to_owned())].into());
    teams.create(&pp, &paused).await.unwrap();
    // Planned, not made: the team is not created until management is Full.
    teams
        .create(
            &pp,
            &team(
                "observed",
                "served",
                "Observed",
                json!({"management": "ObserveOnly"}),
            ),
        )
        .await
        .unwrap();
    // Never reconciled yet: the API server serves the schema's default status.
    let fresh = teams.get("paused").await.unwrap().status.unwrap();
    assert_eq!(fresh.observed_generation, Some(-1), "{fresh:?}");

    // Alert sources on them.
    wait_reason(&teams, "holder", "Ready").await;
    let foreign_secret: Secret = object(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "conflict-terdut-webhook"},
        "stringData": {"url": "https://elsewhere.example.com", "key": "not-ours"},
    }));
    secrets.create(&pp, &foreign_secret).await.unwrap();
    for s in [
        source("ready", "holder"),
        source("conflict", "holder"),
        source("lost", "holder"),
        source("waiting", "waiting"),
        // Its team is paused: PausedByTeam.
        source("held", "paused"),
    ] {
        sources.create(&pp, &s).await.unwrap();
    }
    wait_reason(&sources, "lost", "Ready").await;
    secrets
        .delete("lost-terdut-webhook", &DeleteParams::default())
        .await
        .unwrap();
    wait_reason(&servers, "crashing", "CrashLooping").await;

    let (s, t, a) = ("TerdutServer", "TerdutTeam", "TerdutAlertSource");
    expect_live(
        cp.kubeconfig(),
        &ns,
        &[
            (s, "served", "InProgress", "Progressing"),
            (s, "starting", "InProgress", "Progressing"),
            (s, "blocked", "Failed", "Degraded"),
            // Parked as the spec asks: neither Reconciling nor Stalled, but kstatus reads
            // Ready=False as in progress (docs/gitops.md); Argo CD shows it Suspended.
            (s, "parked", "InProgress", "Suspended"),
            (s, "crashing", "Failed", "Degraded"),
            (t, "holder", "Current", "Healthy"),
            (t, "taken", "Failed", "Degraded"),
            (t, "unknown-user", "Failed", "Degraded"),
            (t, "waiting", "InProgress", "Progressing"),
            (t, "orphan", "InProgress", "Progressing"),
            // Never reconciled (observedGeneration -1): in progress until resumed.
            (t, "paused", "InProgress", "Suspended"),
            // The plan is made, as the spec asks: settled like a parked server.
            (t, "observed", "InProgress", "Suspended"),
            (a, "ready", "Current", "Healthy"),
            (a, "conflict", "Failed", "Degraded"),
            (a, "lost", "Failed", "Degraded"),
            (a, "waiting", "InProgress", "Progressing"),
            (a, "held", "InProgress", "Suspended"),
        ],
    )
    .await;

    // Each fixed as its runbook says: all of them Current and Healthy.
    pods_turn_ready(&client, &ns, "served").await;
    standin.admin().seed_users(["alice"]).await.unwrap();
    teams
        .patch(
            "taken",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"displayName": "Payments EU"}})),
        )
        .await
        .unwrap();
    teams
        .patch(
            "paused",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {PAUSE: null}}})),
        )
        .await
        .unwrap();
    teams
        .patch(
            "observed",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"management": "Full"}})),
        )
        .await
        .unwrap();
    // The foreign Secret is not watched (no operator label): ask for a pass, as
    // `kubectl terdut reconcile` does.
    secrets
        .delete("conflict-terdut-webhook", &DeleteParams::default())
        .await
        .unwrap();
    sources
        .patch(
            "conflict",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"terdut.ryuvia.com/reconcile-requested-at": "1"}}}),
            ),
        )
        .await
        .unwrap();
    sources
        .patch(
            "lost",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"terdut.ryuvia.com/rotate-webhook-key": "1"}}}),
            ),
        )
        .await
        .unwrap();
    expect_live(
        cp.kubeconfig(),
        &ns,
        &[
            (s, "served", "Current", "Healthy"),
            (t, "taken", "Current", "Healthy"),
            (t, "unknown-user", "Current", "Healthy"),
            (t, "paused", "Current", "Healthy"),
            (t, "observed", "Current", "Healthy"),
            (a, "held", "Current", "Healthy"),
            (a, "conflict", "Current", "Healthy"),
            (a, "lost", "Current", "Healthy"),
        ],
    )
    .await;
}

#[test]
fn argo_cd_health_cases_pass_in_gopher_lua() {
    let out = Command::new(terdut_health())
        .arg("lua-tests")
        .arg(customizations())
        .output()
        .expect("terdut-health lua-tests");
    let report = String::from_utf8_lossy(&out.stdout);
    eprintln!("{report}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "Argo CD health cases failed:\n{report}"
    );
}

/// The install command docs/gitops.md gives, against a real API server: the patch lands the
/// three checks in an existing argocd-cm and keeps what was there.
#[tokio::test]
async fn the_argocd_cm_patch_applies_with_kubectl() {
    let (cp, client, ns, _) = setup("argocd-cm").await;
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    let existing = object(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "argocd-cm"},
        "data": {"url": "https://argocd.example.com"},
    }));
    cms.create(&PostParams::default(), &existing).await.unwrap();
    let patch = repo().join("deploy/argocd/argocd-cm.yaml");
    let (ok, output) = cp
        .kubectl(&[
            "-n",
            &ns,
            "patch",
            "configmap",
            "argocd-cm",
            "--patch-file",
            patch.to_str().unwrap(),
        ])
        .unwrap();
    assert!(ok, "{output}");
    let data = cms.get("argocd-cm").await.unwrap().data.unwrap();
    assert_eq!(data["url"], "https://argocd.example.com");
    for kind in ["TerdutServer", "TerdutTeam", "TerdutAlertSource"] {
        let script = std::fs::read_to_string(
            customizations().join(format!("terdut.ryuvia.com/{kind}/health.lua")),
        )
        .unwrap();
        assert_eq!(
            data[&format!("resource.customizations.health.terdut.ryuvia.com_{kind}")],
            script
        );
    }
}
