//! Steady state of a TerdutTeam: after it converged, a resync makes no write on either side —
//! none on the stand-in (its call counts) and none on Kubernetes (the operator's write
//! counter, and no Event) — and only the three reads that show drift. Alone in its test binary
//! so the operator's global write counter is this test's alone.

mod common;
mod teams;

use std::time::Duration;

use common::{server_with_standin, setup};
use kube::api::Api;
use serde_json::json;
use teams::*;
use terdut_crds::v1alpha1::TerdutTeam;

#[tokio::test]
async fn a_resync_after_convergence_only_reads() {
    let (_, client, ns, op) = setup("team-steady").await;
    let standin = server_with_standin(&client, &ns, "terdut", 19670).await;
    standin.admin().seed_users(["alice"]).await.unwrap();
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    create(
        &api,
        &team(
            "platform",
            json!({"name": "terdut"}),
            "Platform",
            full_spec(),
        ),
    )
    .await;
    wait_reason(&api, "platform", "Ready").await;

    // Converged: neither side sees writes any more (the controller-manager's Deployment status
    // updates still nudge the server actor, and through it the team).
    let admin = standin.admin();
    let writes = || async {
        (
            op.ctx.metrics.kube_writes_total(),
            admin.calls().await.unwrap().writes(),
            events(&client, &ns, "platform").await.len(),
        )
    };
    let mut last = writes().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = writes().await;
        if now == last {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "writes never settled: {now:?}"
        );
        last = now;
    }

    admin.reset_calls().await.unwrap();
    let (kube_before, _, events_before) = writes().await;
    const PASSES: u64 = 5;
    for _ in 0..PASSES {
        resync(op, &ns, "platform").await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let calls = admin.calls().await.unwrap();
    let (kube_after, _, events_after) = writes().await;
    let passes = calls.get("GET /api/v1/teams/{id}");
    eprintln!(
        "steady state: {passes} passes made {} terdut-server calls ({:.1} per pass: {:?}), \
         {} of them writes; {} Kubernetes writes, {} new Events",
        calls.total(),
        calls.total() as f64 / passes.max(1) as f64,
        calls.0,
        calls.writes(),
        kube_after - kube_before,
        events_after - events_before,
    );
    assert!(
        passes >= PASSES,
        "every forced resync ran a pass: {calls:?}"
    );
    assert_eq!(
        calls.writes(),
        0,
        "a no-op resync writes nothing on the server"
    );
    assert_eq!(calls.total(), 3 * passes, "three reads per pass: {calls:?}");
    assert_eq!(calls.get("GET /api/v1/teams/{id}/escalation"), passes);
    assert_eq!(calls.get("GET /api/v1/teams/{id}/deadman-switches"), passes);
    assert_eq!(
        kube_after, kube_before,
        "a no-op resync writes nothing to Kubernetes"
    );
    assert_eq!(events_after, events_before, "and publishes no Event");
}
