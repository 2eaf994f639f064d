//! Fairness between the tenants of one shared TerdutServer (docs/security.md "bounded and
//! fair", `pass_limit.rs`), against a real kube-apiserver and the stand-in: one namespace
//! touches its 200 teams in a loop while every call takes a while, so their passes queue for
//! the server's slots; a change in another namespace runs behind at most a pass or two of
//! theirs, not behind their queue. Read from the order of the calls the stand-in received
//! (no wall-time assertion): with one FIFO queue per server it ran behind every queued pass.

mod common;
mod teams;

use std::collections::BTreeSet;
use std::time::Duration;

use kube::api::{Api, ListParams};
use serde_json::json;
use terdut_crds::v1alpha1::TerdutTeam;
use terdut_standin::FaultRule;

use common::{eventually, metric, server_with_standin, setup};
use teams::*;

const PORT: u16 = 19855;
const NOISY: usize = 200;

/// The team id a call is about (`/api/v1/teams/{id}...`), if any.
fn team_of(call: &str) -> Option<i64> {
    let rest = call.split("/api/v1/teams/").nth(1)?;
    rest.split('/').next()?.parse().ok()
}

#[tokio::test]
async fn a_namespace_touching_two_hundred_teams_does_not_queue_another_namespace_behind_them() {
    let (cp, client, ns, op) = setup("fair-tenants").await;
    let standin = server_with_standin(&client, &ns, "terdut", PORT).await;
    allow(&client, &ns, "terdut", json!({"from": "All"})).await;
    let noisy_ns = cp.namespace(&client, "fair-noisy").await.unwrap();
    let quiet_ns = cp.namespace(&client, "fair-quiet").await.unwrap();
    let server = json!({"name": "terdut", "namespace": ns});
    let noisy: Api<TerdutTeam> = Api::namespaced(client.clone(), &noisy_ns);
    let quiet: Api<TerdutTeam> = Api::namespaced(client.clone(), &quiet_ns);
    for i in 0..NOISY {
        create(
            &noisy,
            &team(
                &format!("n{i}"),
                server.clone(),
                &format!("N{i}"),
                json!({}),
            ),
        )
        .await;
    }
    create(&quiet, &team("q", server.clone(), "Q", json!({}))).await;
    eventually("every team Ready", Duration::from_secs(300), || async {
        let all = noisy.list(&ListParams::default()).await.ok()?.items;
        let ready = all
            .iter()
            .filter(|t| ready(t).is_some_and(|(s, _, _)| s == "True"))
            .count();
        (ready == NOISY).then_some(())
    })
    .await;
    let q = wait_reason(&quiet, "q", "Ready").await;
    let quiet_id = team_id(&q);

    // Every call takes 50 ms from now on: a pass of four calls holds its slot for 200 ms.
    standin
        .admin()
        .add_fault(&FaultRule::new("*").latency_ms(50))
        .await
        .unwrap();
    // The noisy tenant touches every one of its teams; their passes queue.
    for chunk in (0..NOISY).collect::<Vec<_>>().chunks(20) {
        futures::future::join_all(chunk.iter().map(|i| {
            let noisy = noisy.clone();
            async move {
                patch_spec(
                    &noisy,
                    &format!("n{i}"),
                    json!({"displayName": format!("N{i} v2")}),
                )
                .await
            }
        }))
        .await;
    }
    eventually("the noisy passes queued", WAIT, || async {
        let waiting = metric(op, "reconcile_passes_waiting{kind=\"team\"}")?;
        (waiting >= 100.0).then_some(())
    })
    .await;
    // A mark in the stand-in's journal: everything after it happened after the queue formed.
    let marker = server_client(&standin).get_team(0).await;
    assert!(marker.is_err(), "team 0 does not exist");
    patch_spec(&quiet, "q", json!({"displayName": "Q v2"})).await;
    wait_reason_for(&quiet, "q", "Ready", Duration::from_secs(180)).await;
    standin.admin().clear_faults().await.unwrap();
    // The noisy queue drains; then the journal holds all of it.
    eventually(
        "every noisy team converged on its change",
        Duration::from_secs(300),
        || async {
            let all = noisy.list(&ListParams::default()).await.ok()?.items;
            let done = all
                .iter()
                .filter(|t| {
                    t.status.as_ref().and_then(|s| s.observed_generation) == t.metadata.generation
                        && ready(t).is_some_and(|(s, _, _)| s == "True")
                })
                .count();
            (done == NOISY).then_some(())
        },
    )
    .await;

    let log = standin.admin().call_log().await.unwrap();
    let mark = log
        .iter()
        .rposition(|c| c == "GET /api/v1/teams/0")
        .expect("the mark");
    let first_quiet = mark
        + log[mark..]
            .iter()
            .position(|c| team_of(c) == Some(quiet_id))
            .expect("the quiet team's pass");
    let noisy_before: BTreeSet<i64> = log[mark..first_quiet]
        .iter()
        .filter_map(|c| team_of(c))
        .filter(|id| *id != 0)
        .collect();
    let noisy_after: BTreeSet<i64> = log[first_quiet..]
        .iter()
        .filter_map(|c| team_of(c))
        .filter(|id| *id != quiet_id)
        .collect();
    // The pass running at the mark, the one that had the next turn, and one more that may
    // have started while the quiet change was on its way to its actor.
    assert!(
        noisy_before.len() <= 3,
        "the quiet namespace's pass ran behind {} noisy passes queued before it",
        noisy_before.len()
    );
    assert!(
        noisy_after.len() >= 90,
        "the noisy queue was still long when the quiet pass ran ({} after it)",
        noisy_after.len()
    );
}
