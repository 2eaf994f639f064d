//! A relist wakes every passive team, a wake budget at a time (ADR 0011): after a
//! kube-apiserver restart every watch lists again and every team gets its pass (the safety net
//! for changes a list folds into one version), but no more team actors run at once than the
//! budget (3 in tests), where every one of them used to start together. Alone in its test
//! binary: it restarts the binary's kube-apiserver and reads the operator's global gauges.

mod common;
mod teams;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::{eventually, metric, server_with_standin, setup, test_config};
use kube::api::Api;
use serde_json::json;
use teams::*;
use terdut_crds::v1alpha1::TerdutTeam;
use terdut_testenv::StopMode;

const TEAMS: usize = 8;
const ACTIVE: &str = r#"actors_active{kind="team"}"#;
const PASSIVE: &str = r#"actors_passive{kind="team"}"#;

#[tokio::test]
async fn a_relist_gives_every_passive_team_its_pass_a_budget_at_a_time() {
    let budget = test_config().wake_budget as f64;
    assert!(
        budget < TEAMS as f64,
        "the test needs more teams than places"
    );
    let (cp, client, ns, op) = setup("relist").await;
    let standin = server_with_standin(&client, &ns, "terdut", 19800).await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    let names: Vec<String> = (0..TEAMS).map(|i| format!("team-{i}")).collect();
    for name in &names {
        create(
            &api,
            &team(name, json!({"name": "terdut"}), name, json!({})),
        )
        .await;
    }
    for name in &names {
        wait_reason(&api, name, "Ready").await;
    }
    eventually(
        "every team actor passivated",
        Duration::from_secs(60),
        || async { metric(op, PASSIVE).filter(|n| *n >= TEAMS as f64) },
    )
    .await;

    // The most team actors running at once, sampled every 5 ms from here on.
    let most = Arc::new(AtomicU64::new(0));
    let sampler = tokio::spawn({
        let most = most.clone();
        async move {
            loop {
                if let Some(n) = metric(op, ACTIVE) {
                    most.fetch_max(n as u64, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    });
    let admin = standin.admin();
    admin.reset_calls().await.unwrap();
    let down = cp
        .restart_apiserver(StopMode::Graceful)
        .await
        .expect("the kube-apiserver restarts");
    // Every team's pass reads its team on the server: all of them ran.
    eventually(
        "a pass of every team after the relist",
        Duration::from_secs(90),
        || async {
            let calls = admin.calls().await.ok()?;
            (calls.get("GET /api/v1/teams/{id}") >= TEAMS as u64).then_some(())
        },
    )
    .await;
    eventually(
        "every team actor passive again",
        Duration::from_secs(60),
        || async { metric(op, PASSIVE).filter(|n| *n >= TEAMS as f64) },
    )
    .await;
    sampler.abort();
    let most = most.load(Ordering::Relaxed) as f64;
    assert!(
        most <= budget,
        "{most} team actors ran at once after the relist (apiserver down {down:?}); the budget is {budget}"
    );
    assert!(
        most >= 1.0,
        "no team actor was seen running: the sampler saw nothing"
    );
    assert_eq!(metric(op, r#"actors_waiting{kind="team"}"#), Some(0.0));
    let calls = admin.calls().await.unwrap();
    assert_eq!(
        calls.writes(),
        0,
        "converged teams wrote to the server: {calls:?}"
    );
    for name in &names {
        wait_reason(&api, name, "Ready").await;
    }
}
