//! A relist wakes only what changed (docs/design.md §5): after a kube-apiserver restart every
//! watch lists again, and converged, passivated teams must stay passive (at 10,000 teams the
//! old behaviour, waking all of them, was the relist's memory peak), while a change made once
//! the apiserver is back still reaches its team. Alone in its test binary: it restarts the
//! binary's kube-apiserver and reads the operator's global counters.

mod common;
mod teams;

use std::time::Duration;

use common::{eventually, metric, server_with_standin, setup};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use teams::*;
use terdut_crds::v1alpha1::TerdutTeam;
use terdut_testenv::StopMode;

const TEAMS: [&str; 3] = ["payments", "search", "checkout"];

#[tokio::test]
async fn a_relist_leaves_unchanged_passive_teams_asleep_and_still_sees_a_change() {
    let (cp, client, ns, op) = setup("relist").await;
    let standin = server_with_standin(&client, &ns, "terdut", 19800).await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    for name in TEAMS {
        create(
            &api,
            &team(name, json!({"name": "terdut"}), name, json!({})),
        )
        .await;
    }
    for name in TEAMS {
        wait_reason(&api, name, "Ready").await;
    }
    let passive = r#"actors_passive{kind="team"}"#;
    eventually(
        "every team actor passivated",
        Duration::from_secs(60),
        || async { metric(op, passive).filter(|n| *n >= TEAMS.len() as f64) },
    )
    .await;

    let admin = standin.admin();
    admin.reset_calls().await.unwrap();
    let lists = op.ctx.metrics.watch_lists("TerdutTeam");
    let down = cp
        .restart_apiserver(StopMode::Graceful)
        .await
        .expect("the kube-apiserver restarts");
    eventually(
        "the team watch listed again",
        Duration::from_secs(60),
        || async { (op.ctx.metrics.watch_lists("TerdutTeam") > lists).then_some(()) },
    )
    .await;
    // Long enough for any pass the relist caused to have reached the stand-in.
    tokio::time::sleep(Duration::from_secs(3)).await;
    // The server's own actor looks again (its Deployment, Service and key Secret were
    // relisted too): it asks who it is. No team pass ran: each would read its team.
    let calls = admin.calls().await.unwrap();
    assert_eq!(
        (calls.get("GET /api/v1/teams/{id}"), calls.writes()),
        (0, 0),
        "a relist of {} unchanged teams (apiserver down {down:?}) ran their passes: {calls:?}",
        TEAMS.len()
    );
    assert!(
        metric(op, passive).is_some_and(|n| n >= TEAMS.len() as f64),
        "a team actor woke: {:?} passive",
        metric(op, passive)
    );

    // The watch works: a change made now reaches the server.
    api.patch(
        "search",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"displayName": "Search EU"}})),
    )
    .await
    .unwrap();
    eventually("the rename on the server", WAIT, || async {
        let state = admin.state().await.ok()?;
        state
            .teams
            .iter()
            .any(|t| t.name == "Search EU")
            .then_some(())
    })
    .await;
    let calls = admin.calls().await.unwrap();
    assert_eq!(calls.get("PUT /api/v1/teams/{id}/name"), 1, "{calls:?}");
}
