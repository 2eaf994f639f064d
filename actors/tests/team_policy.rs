//! The shared server's owner sets the rules (docs/design.md §4.6 "Policies",
//! docs/security.md "The server owner's policy"), against a real kube-apiserver and the
//! stand-in: a TerdutTeam the policy of its namespace does not allow makes no call to the
//! server at all and says why (condition and Warning), a deleted one makes none either; a
//! namespace's `maxTeams` admits its oldest teams and the next once one goes; an `Orphan` the
//! owner forbids is deleted on the server, so no display name is squatted.

mod common;
mod teams;

use std::time::Duration;

use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use terdut_crds::v1alpha1::TerdutTeam;

use common::{eventually, server_with_standin, setup};
use teams::*;

const DENIED_PORT: u16 = 19860;
const LIMIT_PORT: u16 = 19861;
const ORPHAN_PORT: u16 = 19862;

/// Sets the server's `allowedTeams`: every namespace may attach, under `policies`.
async fn policies(client: &kube::Client, ns: &str, policies: serde_json::Value) {
    let api: Api<terdut_crds::v1alpha1::TerdutServer> = Api::namespaced(client.clone(), ns);
    api.patch(
        "terdut",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"allowedTeams": {
            "namespaces": {"from": "All"}, "policies": policies}}})),
    )
    .await
    .unwrap();
}

/// The stand-in's calls about teams (the server's own probes aside), in order.
async fn team_calls(standin: &terdut_standin::Handle) -> Vec<String> {
    standin
        .admin()
        .call_log()
        .await
        .unwrap()
        .into_iter()
        .filter(|c| c.contains("/api/v1/teams"))
        .collect()
}

fn to(server_ns: &str) -> serde_json::Value {
    json!({"name": "terdut", "namespace": server_ns})
}

#[tokio::test]
async fn a_team_the_policy_does_not_allow_makes_no_server_call_and_says_why() {
    let (cp, client, ns, _op) = setup("policy-denied").await;
    let standin = server_with_standin(&client, &ns, "terdut", DENIED_PORT).await;
    let tenant = cp.namespace(&client, "policy-denied-t").await.unwrap();
    policies(
        &client,
        &ns,
        json!([{"name": "payments", "namespaces": {"names": [tenant]},
            "allowed": {"users": ["pay-*"], "fallbackTopics": ["payments-*"],
                        "displayNames": ["Payments*"], "deletionPolicies": ["Delete"]}}]),
    )
    .await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &tenant);
    // Pages the CEO with the server's ntfy token, and would squat its name when deleted.
    let ceo = json!({"escalation": {"fallbackTopic": "ceo-phone", "levels": [
        {"timeout": "5m", "targets": [{"kind": "oncall"}, {"kind": "user", "username": "ceo"}]}]}});
    create(&api, &team("pager", to(&ns), "Payments", ceo)).await;
    create(
        &api,
        &team(
            "squat",
            to(&ns),
            "Payments Squat",
            json!({"deletionPolicy": "Orphan"}),
        ),
    )
    .await;

    let t = wait_reason(&api, "pager", "PolicyDenied").await;
    let (status, _, message) = ready(&t).unwrap();
    assert_eq!(status, "False");
    for part in [
        format!("policy \"payments\" of TerdutServer {ns}/terdut"),
        "spec.escalation.fallbackTopic \"ceo-phone\" (allowed: payments-*)".to_owned(),
    ] {
        assert!(message.contains(&part), "{message} lacks {part}");
    }
    assert!(t.metadata.finalizers.is_none(), "nothing to clean up");
    let note = wait_event(&client, &tenant, "pager", "PolicyDenied").await;
    assert!(note.contains("ceo-phone"), "{note}");
    let t = wait_reason(&api, "squat", "PolicyDenied").await;
    let (_, _, message) = ready(&t).unwrap();
    assert!(
        message.contains("spec.deletionPolicy \"Orphan\" (allowed: Delete)"),
        "{message}"
    );
    assert_eq!(
        team_calls(&standin).await,
        Vec::<String>::new(),
        "no call for a denied team"
    );

    // Deleting a denied team with a finalizer the tenant added makes no call either (the
    // lookup by external_id would create the refused team on the server).
    api.patch(
        "squat",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": ["terdut.ryuvia.com/team-cleanup"]}})),
    )
    .await
    .unwrap();
    api.delete("squat", &DeleteParams::default()).await.unwrap();
    let note = wait_event(&client, &tenant, "squat", "TeamLeftOnServer").await;
    assert!(note.contains("policy \"payments\""), "{note}");
    eventually("the denied team gone", WAIT, || async {
        api.get_opt("squat").await.unwrap().is_none().then_some(())
    })
    .await;
    assert_eq!(team_calls(&standin).await, Vec::<String>::new());

    // What the policy allows goes through.
    patch_spec(
        &api,
        "pager",
        json!({"escalation": {"fallbackTopic": "payments-oncall", "levels": [
            {"timeout": "5m", "targets": [{"kind": "oncall"}]}]}}),
    )
    .await;
    wait_reason(&api, "pager", "Ready").await;
    assert!(
        on_server(&standin, &format!("{tenant}/pager"))
            .await
            .is_some()
    );
    assert!(
        on_server(&standin, &format!("{tenant}/squat"))
            .await
            .is_none()
    );
}

#[tokio::test]
async fn max_teams_admits_the_oldest_and_the_next_once_one_goes() {
    let (cp, client, ns, _op) = setup("policy-limit").await;
    let standin = server_with_standin(&client, &ns, "terdut", LIMIT_PORT).await;
    let tenant = cp.namespace(&client, "policy-limit-t").await.unwrap();
    policies(
        &client,
        &ns,
        json!([{"name": "small", "namespaces": {"names": [tenant]}, "maxTeams": 2}]),
    )
    .await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &tenant);
    // A second apart: creation times are whole seconds, and the oldest are admitted.
    for name in ["a", "b", "c"] {
        create(
            &api,
            &team(name, to(&ns), &format!("Team {name}"), json!({})),
        )
        .await;
        tokio::time::sleep(Duration::from_millis(1_100)).await;
    }
    wait_reason(&api, "a", "Ready").await;
    wait_reason(&api, "b", "Ready").await;
    let c = wait_reason(&api, "c", "TeamLimitReached").await;
    let (_, _, message) = ready(&c).unwrap();
    assert!(
        message.contains("admits 2 TerdutTeams of this namespace")
            && message.contains("policy \"small\""),
        "{message}"
    );
    wait_event(&client, &tenant, "c", "TeamLimitReached").await;
    assert!(
        on_server(&standin, &format!("{tenant}/c")).await.is_none(),
        "no call for the team over the limit"
    );
    // The team of the server's own namespace is the owner's: never limited.
    let own: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    create(
        &own,
        &team("own", json!({"name": "terdut"}), "Own", json!({})),
    )
    .await;
    wait_reason(&own, "own", "Ready").await;

    api.delete("a", &DeleteParams::default()).await.unwrap();
    wait_reason(&api, "c", "Ready").await;
    assert!(on_server(&standin, &format!("{tenant}/c")).await.is_some());
    assert!(on_server(&standin, &format!("{tenant}/a")).await.is_none());
}

#[tokio::test]
async fn an_orphan_the_owner_forbids_is_deleted_on_the_server() {
    let (cp, client, ns, _op) = setup("policy-orphan").await;
    let standin = server_with_standin(&client, &ns, "terdut", ORPHAN_PORT).await;
    let tenant = cp.namespace(&client, "policy-orphan-t").await.unwrap();
    policies(&client, &ns, json!([])).await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &tenant);
    create(
        &api,
        &team(
            "squat",
            to(&ns),
            "Platform",
            json!({"deletionPolicy": "Orphan"}),
        ),
    )
    .await;
    wait_reason(&api, "squat", "Ready").await;
    let external_id = format!("{tenant}/squat");
    assert!(on_server(&standin, &external_id).await.is_some());

    // The owner forbids leaving teams behind: the team asks for it, so it is denied from now
    // on, and deleting it deletes it on the server all the same.
    policies(
        &client,
        &ns,
        json!([{"name": "no-orphans", "namespaces": {"selector": {}},
            "allowed": {"deletionPolicies": ["Delete"]}}]),
    )
    .await;
    wait_reason(&api, "squat", "PolicyDenied").await;
    api.delete("squat", &DeleteParams::default()).await.unwrap();
    let note = wait_event(&client, &tenant, "squat", "OrphanNotAllowed").await;
    assert!(note.contains("no-orphans"), "{note}");
    eventually("the team deleted on the server", WAIT, || async {
        on_server(&standin, &external_id)
            .await
            .is_none()
            .then_some(())
    })
    .await;
    eventually("the TerdutTeam gone", WAIT, || async {
        api.get_opt("squat").await.unwrap().is_none().then_some(())
    })
    .await;
}
