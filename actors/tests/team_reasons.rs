//! Every not-Ready reason of a TerdutTeam (docs/design.md §4.2) reached against a real
//! kube-apiserver and the stand-in, and each one healing: ServerRefNotFound, WaitingForServer,
//! TeamNameTaken (on create and on rename), UnknownUser, InvalidSpec. RefNotPermitted:
//! team_consent.rs.

mod common;
mod teams;

use std::time::Duration;

use common::{server_with_standin, setup, standin_for, test_server};
use kube::api::{Api, PostParams};
use serde_json::json;
use teams::*;
use terdut_actors::team::FINALIZER;
use terdut_crds::v1alpha1::{TerdutServer, TerdutTeam};

fn server() -> serde_json::Value {
    json!({"name": "terdut"})
}

#[tokio::test]
async fn a_missing_server_is_waited_for() {
    let (_, client, ns, _) = setup("team-noserver").await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    create(
        &api,
        &team("platform", json!({"name": "later"}), "Platform", json!({})),
    )
    .await;
    let t = wait_reason(&api, "platform", "ServerRefNotFound").await;
    let (status, _, message) = ready(&t).unwrap();
    assert_eq!(status, "False");
    assert!(message.contains(&format!("{ns}/later")), "{message}");
    assert!(
        t.metadata.finalizers.is_none(),
        "nothing was created, so nothing to clean up"
    );
    wait_event(&client, &ns, "platform", "ServerRefNotFound").await;

    // The server appears (its API not up yet): the team waits for it.
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    servers
        .create(&PostParams::default(), &test_server("later", 19620))
        .await
        .unwrap();
    let t = wait_reason(&api, "platform", "WaitingForServer").await;
    let (_, _, message) = ready(&t).unwrap();
    assert!(message.contains("later"), "{message}");

    // Its API comes up: Ready without anyone touching the team.
    let standin = standin_for(&client, &ns, "later", 19620).await;
    let t = wait_reason_for(&api, "platform", "Ready", Duration::from_secs(60)).await;
    assert_eq!(
        on_server(&standin, &format!("{ns}/platform"))
            .await
            .unwrap()
            .id,
        team_id(&t)
    );
}

#[tokio::test]
async fn a_name_held_by_another_team_is_team_name_taken() {
    let (_, client, ns, _) = setup("team-name").await;
    let standin = server_with_standin(&client, &ns, "terdut", 19621).await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    create(&api, &team("alpha", server(), "Alpha", json!({}))).await;
    wait_reason(&api, "alpha", "Ready").await;

    // On create: no team is made, and none adopted.
    create(&api, &team("beta", server(), "Alpha", json!({}))).await;
    let t = wait_reason(&api, "beta", "TeamNameTaken").await;
    let (_, _, message) = ready(&t).unwrap();
    assert!(
        message.contains("\"Alpha\" belongs to another team"),
        "{message}"
    );
    assert_eq!(t.status.as_ref().unwrap().team_id, None);
    assert!(on_server(&standin, &format!("{ns}/beta")).await.is_none());
    wait_event(&client, &ns, "beta", "TeamNameTaken").await;

    // On rename: the team keeps its id and its old name.
    create(&api, &team("gamma", server(), "Gamma", json!({}))).await;
    let gamma_id = team_id(&wait_reason(&api, "gamma", "Ready").await);
    patch_spec(&api, "gamma", json!({"displayName": "Alpha"})).await;
    let t = wait_reason(&api, "gamma", "TeamNameTaken").await;
    assert_eq!(team_id(&t), gamma_id);
    assert_eq!(
        on_server(&standin, &format!("{ns}/gamma"))
            .await
            .unwrap()
            .name,
        "Gamma"
    );
    patch_spec(&api, "gamma", json!({"displayName": "Gamma"})).await;
    wait_reason(&api, "gamma", "Ready").await;

    // The name is given up: beta gets it at its next retry, nobody touches beta.
    patch_spec(&api, "alpha", json!({"displayName": "Alpha One"})).await;
    wait_reason(&api, "alpha", "Ready").await;
    let t = wait_reason(&api, "beta", "Ready").await;
    let beta = on_server(&standin, &format!("{ns}/beta")).await.unwrap();
    assert_eq!((beta.id, beta.name.as_str()), (team_id(&t), "Alpha"));
}

#[tokio::test]
async fn an_unknown_user_is_waited_for() {
    let (_, client, ns, _) = setup("team-user").await;
    let standin = server_with_standin(&client, &ns, "terdut", 19622).await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    let spec = json!({
        "escalation": {"levels": [{"timeout": "5m", "targets": [{"kind": "user", "username": "bob"}]}]},
        "deadmanSwitches": [{"name": "watchdog", "matcher": "alertname=Watchdog", "timeout": "15m"}],
    });
    create(&api, &team("platform", server(), "Platform", spec)).await;
    let t = wait_reason(&api, "platform", "UnknownUser").await;
    let (_, _, message) = ready(&t).unwrap();
    assert!(message.contains("no user \"bob\""), "{message}");
    let note = wait_event(&client, &ns, "platform", "UnknownUser").await;
    assert!(note.contains("\"bob\""), "{note}");
    // The team exists and everything independent of the ladder is applied.
    let s = on_server(&standin, &format!("{ns}/platform"))
        .await
        .unwrap();
    assert_eq!(s.id, team_id(&t));
    assert_eq!(s.ladder, None);
    assert_eq!(s.switches.len(), 1);

    // bob signs up: the team retries on its own (every 2s in these tests, 30s by default).
    standin.admin().seed_users(["bob"]).await.unwrap();
    wait_reason(&api, "platform", "Ready").await;
    let s = on_server(&standin, &format!("{ns}/platform"))
        .await
        .unwrap();
    assert_eq!(s.ladder.map(|l| l.levels[0].timeout_seconds), Some(300));
}

#[tokio::test]
async fn an_invalid_spec_makes_no_calls() {
    let (_, client, ns, _) = setup("team-invalid").await;
    let standin = server_with_standin(&client, &ns, "terdut", 19623).await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    // Admitted by the CRD's pattern, but past what Go (and the wire) can represent.
    let spec = json!({"escalation": {"levels": [{"timeout": "3000000h", "targets": [{"kind": "oncall"}]}]}});
    create(&api, &team("platform", server(), "Platform", spec)).await;
    let t = wait_reason(&api, "platform", "InvalidSpec").await;
    let (_, _, message) = ready(&t).unwrap();
    assert!(
        message.contains("spec.escalation.levels[0].timeout"),
        "{message}"
    );
    assert!(t.metadata.finalizers.is_none());
    let calls = standin.admin().calls().await.unwrap();
    assert_eq!(calls.get("POST /api/v1/teams"), 0, "{calls:?}");
    assert_eq!(calls.writes(), 0, "{calls:?}");

    patch_spec(
        &api,
        "platform",
        json!({"escalation": {"levels": [{"timeout": "5m", "targets": [{"kind": "oncall"}]}]}}),
    )
    .await;
    let t = wait_reason(&api, "platform", "Ready").await;
    assert!(
        t.metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == FINALIZER)
    );
    let s = on_server(&standin, &format!("{ns}/platform"))
        .await
        .unwrap();
    assert_eq!(s.ladder.map(|l| l.levels[0].timeout_seconds), Some(300));
}
