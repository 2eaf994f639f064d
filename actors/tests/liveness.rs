//! Liveness that tells the truth (docs/adr/0017-liveness.md), against a real kube-apiserver
//! and the stand-in: each long-lived part of the leader is killed through the test hooks
//! (panicked, or ended as if its task returned) and the objects converge again; a part that
//! keeps failing is dead for good and `/healthz` names it; a part that stalls fails `/healthz`
//! while it stalls.
//!
//! Each test runs an operator of its own, watching only its namespace, so a part it kills
//! is nobody else's.

mod common;
mod teams;

use std::sync::Arc;
use std::time::Duration;

use common::{eventually, server_with_standin, start_operator, test_config};
use kube::api::{Api, PostParams};
use serde_json::json;
use teams::{WAIT, team, wait_reason};
use terdut_actors::key::ObjectKey;
use terdut_actors::operator::RunningOperator;
use terdut_actors::routing::ChildKind;
use terdut_actors::runtime::faults::Fault;
use terdut_actors::runtime::health::{Ended, Health, PartState};
use terdut_actors::runtime::http::{self, Readiness};
use terdut_actors::tree::writer::HostRef;
use terdut_crds::v1alpha1::TerdutTeam;
use terdut_testenv::ControlPlane;

const WRITER_PORT: u16 = 19760;
const ROOT_PORT: u16 = 19761;
const HOLDING_PORT: u16 = 19762;
const WATCH_PORT: u16 = 19763;

/// A namespace, a client and an operator that watches only that namespace, with the stall
/// limit at 2 s.
async fn setup(prefix: &str) -> (kube::Client, String, RunningOperator) {
    let cp = ControlPlane::shared().await.expect("control plane");
    let client = cp.client().await.expect("client");
    let ns = cp.namespace(&client, prefix).await.expect("namespace");
    let config = terdut_actors::context::OperatorConfig {
        watch_namespaces: vec![ns.clone()],
        stall_after: Duration::from_secs(2),
        ..test_config()
    };
    let (op, _) = start_operator(&cp.operator_kubeconfig(), config).await;
    (client, ns, op)
}

/// Arms a one-shot `fault` on `part` and waits until the part's incarnation has ended (its
/// supervisor saw it go, whatever it then did): what follows checks what a user sees.
///
/// Not merely until the hook took the fault: a panic's hook (a backtrace, symbolised in a
/// debug build) can take seconds before the unwinding ends the part, and a change made
/// meanwhile would reach the old incarnation and prove nothing.
async fn kill(op: &RunningOperator, part: &str, fault: Fault) {
    let before = op.health().part(part).unwrap();
    assert_eq!(before.state, PartState::Up, "{}", op.health().report().body);
    op.faults().arm(part, fault).unwrap();
    eventually(
        &format!("{part} ended by the {fault:?} fault"),
        WAIT,
        || async {
            let now = op.health().part(part)?;
            let ended = now.state != PartState::Up || now.restarts > before.restarts;
            (op.faults().peek(part).is_none() && ended).then_some(())
        },
    )
    .await;
}

/// What `/healthz` says of `part` now: restarted `n` times, up again, last ended `how`.
fn says_restarted(op: &RunningOperator, part: &str, n: u64, how: Ended) {
    let p = op.health().part(part).unwrap();
    assert_eq!(
        (p.restarts, p.state, p.last_end),
        (n, PartState::Up, Some(how)),
        "{part}: {}",
        op.health().report().body
    );
    assert!(op.health().report().live, "{}", op.health().report().body);
}

/// `/healthz` of `health`, over HTTP as the kubelet asks it.
struct Healthz(String);

impl Healthz {
    async fn serve(health: &Health) -> Self {
        let (addr, _task) = http::spawn(
            "127.0.0.1:0".parse().unwrap(),
            Arc::new(prometheus_client::registry::Registry::default()),
            Readiness::default(),
            health.clone(),
            std::future::pending(),
        )
        .await
        .unwrap();
        Self(format!("http://{addr}/healthz"))
    }

    async fn get(&self) -> (u16, String) {
        let resp = reqwest::get(&self.0).await.unwrap();
        (resp.status().as_u16(), resp.text().await.unwrap())
    }
}

/// Renames team `name` and waits until the stand-in shows the new name.
async fn rename_converges(
    api: &Api<TerdutTeam>,
    standin: &terdut_standin::Handle,
    ns: &str,
    name: &str,
    display: &str,
) {
    teams::patch_spec(api, name, json!({"displayName": display})).await;
    eventually(&format!("{name} renamed on the server"), WAIT, || async {
        let t = teams::on_server(standin, &format!("{ns}/{name}")).await?;
        (t.name == display).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicked_writer_rebuilds_its_index_and_later_changes_converge() {
    let (client, ns, op) = setup("live-writer").await;
    let standin = server_with_standin(&client, &ns, "terdut", WRITER_PORT).await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    teams::create(&api, &team("a", json!({"name": "terdut"}), "A", json!({}))).await;
    wait_reason(&api, "a", "Ready").await;

    kill(&op, "writer", Fault::Panic).await;

    // Events reach the actors again, and the rebuilt index places the team where it was.
    rename_converges(&api, &standin, &ns, "a", "A, again").await;
    teams::create(&api, &team("b", json!({"name": "terdut"}), "B", json!({}))).await;
    wait_reason(&api, "b", "Ready").await;
    let key = ObjectKey::new(ns.clone(), "a");
    let host = op.tree.host_of(ChildKind::Team, &key).await;
    assert!(
        matches!(host, Some(HostRef::Server(_))),
        "under its server: {host:?}"
    );
    let state = standin.admin().state().await.unwrap();
    assert_eq!(state.teams.len(), 2, "no duplicate: {:?}", state.teams);
    says_restarted(&op, "writer", 1, Ended::Panicked);
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicked_root_restarts_the_server_actors_and_their_teams_converge() {
    let (client, ns, op) = setup("live-root").await;
    let standin = server_with_standin(&client, &ns, "terdut", ROOT_PORT).await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    teams::create(&api, &team("r", json!({"name": "terdut"}), "R", json!({}))).await;
    wait_reason(&api, "r", "Ready").await;
    let server = ObjectKey::new(ns.clone(), "terdut");
    let before = op.tree.registry.get(&server).map(|a| a.get_id()).unwrap();

    kill(&op, "root", Fault::Panic).await;

    // ractor killed the server actor (and its team's) with the root: a new one under the new
    // root, and its team passes again under it.
    rename_converges(&api, &standin, &ns, "r", "R, again").await;
    let now = op.tree.registry.get(&server).map(|a| a.get_id());
    assert!(now.is_some_and(|id| id != before), "a new server actor");
    says_restarted(&op, "root", 1, Ended::Panicked);
    let snap = terdut_actors::supervisor::snapshot(&op.tree.servers(), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(snap.children[&server].restarts, 0, "{snap:?}");
    assert_eq!(standin.admin().state().await.unwrap().teams.len(), 1);
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holding_host_that_ends_comes_back_and_answers_for_its_teams() {
    let (client, ns, op) = setup("live-holding").await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    teams::create(
        &api,
        &team("lost", json!({"name": "later"}), "L", json!({})),
    )
    .await;
    wait_reason(&api, "lost", "ServerRefNotFound").await;

    kill(&op, "holding", Fault::End).await;

    // A holding host answers for a new team again, and the new incarnation adopted the old.
    teams::create(&api, &team("new", json!({"name": "later"}), "N", json!({}))).await;
    wait_reason(&api, "new", "ServerRefNotFound").await;
    let lost = ObjectKey::new(ns.clone(), "lost");
    eventually("the team adopted by the new holding host", WAIT, || async {
        op.tree.child(ChildKind::Team, &lost).await
    })
    .await;
    says_restarted(&op, "holding", 1, Ended::Returned);
    // Its server appears: both move under it.
    let standin = server_with_standin(&client, &ns, "later", HOLDING_PORT).await;
    wait_reason(&api, "lost", "Ready").await;
    wait_reason(&api, "new", "Ready").await;
    assert_eq!(standin.admin().state().await.unwrap().teams.len(), 2);
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_that_ends_is_started_again_and_sees_later_changes() {
    let (client, ns, op) = setup("live-watch").await;
    let standin = server_with_standin(&client, &ns, "terdut", WATCH_PORT).await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    teams::create(&api, &team("w", json!({"name": "terdut"}), "W", json!({}))).await;
    wait_reason(&api, "w", "Ready").await;

    let watch = format!("watch TerdutTeam in {ns}");
    kill(&op, &watch, Fault::End).await;
    rename_converges(&api, &standin, &ns, "w", "W, again").await;
    says_restarted(&op, &watch, 1, Ended::Returned);

    // And once more, by a panic.
    kill(&op, &watch, Fault::Panic).await;
    rename_converges(&api, &standin, &ns, "w", "W, third").await;
    says_restarted(&op, &watch, 2, Ended::Panicked);
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_part_that_keeps_failing_is_dead_for_good_and_healthz_names_it() {
    let (_, _, op) = setup("live-dead").await;
    let healthz = Healthz::serve(op.health()).await;
    assert_eq!(healthz.get().await.0, 200);

    op.faults().arm("writer", Fault::PanicAlways).unwrap();
    // The tests' policy: 0.2 s doubling, a sixth failure within 10 minutes gives up.
    let body = eventually("/healthz failing", WAIT, || async {
        let (status, body) = healthz.get().await;
        (status == 503).then_some(body)
    })
    .await;
    assert!(body.starts_with("not live: writer\n"), "{body}");
    assert!(
        body.contains("writer: dead: panicked 6 times within its restart window"),
        "{body}"
    );
    assert!(body.contains("root: up"), "the others are still up: {body}");
    // What `main` waits on to stop the leader and exit.
    let dead = tokio::time::timeout(Duration::from_secs(1), op.failed())
        .await
        .expect("the operator reports a part dead for good");
    assert!(dead.contains("\"writer\" panicked 6 times"), "{dead}");
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_part_fails_healthz_by_name() {
    let (client, ns, op) = setup("live-stall").await;
    let healthz = Healthz::serve(op.health()).await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    api.create(
        &PostParams::default(),
        &team("s", json!({"name": "none"}), "S", json!({})),
    )
    .await
    .unwrap();
    wait_reason(&api, "s", "ServerRefNotFound").await;
    assert_eq!(healthz.get().await.0, 200);

    for (part, named) in [
        ("writer", "not live: writer\n"),
        ("holding", "not live: holding, writer\n"),
        ("root", "not live: holding, root, writer\n"),
    ] {
        op.faults().arm(part, Fault::Stall).unwrap();
        let body = eventually(&format!("{part} stalled"), WAIT, || async {
            let (status, body) = healthz.get().await;
            (status == 503 && body.starts_with(named)).then_some(body)
        })
        .await;
        assert!(
            body.contains(&format!("{part}: up, stalled: a message unanswered for ")),
            "{body}"
        );
    }
    // Nothing restarted them: a stall is not an end, the kubelet's restart is the remedy.
    for part in ["writer", "holding", "root"] {
        assert_eq!(op.health().part(part).unwrap().restarts, 0);
    }
    // Not stopped: a stalled actor never takes its stop; the test's runtime ends it.
}
