//! Pause on every kind and `spec.management: ObserveOnly` (docs/design.md §5 "Pause",
//! "Management") against a real kube-apiserver and the stand-in: what the user sees (the
//! `Paused` condition, `status.plan`, `status.lastApplied`) and what the server and the API
//! server got (no write while paused or observing; exactly the shown plan once back to Full).

mod common;
mod source_fixture;

use std::time::Duration;

use common::{eventually, server_with_standin, setup};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use source_fixture::{WAIT, create_team, source, sources, team, wait_ready_id, wait_team_ready};
use terdut_crds::v1alpha1::{Management, TerdutServer, TerdutTeam};

const OBSERVE_TEAM_PORT: u16 = 19790;
const PAUSED_SERVER_PORT: u16 = 19791;
const PAUSED_TEAM_PORT: u16 = 19792;
const OBSERVE_SOURCE_PORT: u16 = 19793;

const PAUSED: &str = "terdut.ryuvia.com/paused";

/// The server-side calls that change something (the stand-in counts every call by
/// "METHOD path").
fn writes(calls: &terdut_standin::admin::CallCounts) -> Vec<String> {
    calls
        .0
        .keys()
        .filter(|c| !c.starts_with("GET"))
        .cloned()
        .collect()
}

fn condition<'a>(
    conditions: &'a [k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

async fn merge<K>(api: &Api<K>, name: &str, patch: serde_json::Value)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

#[tokio::test]
async fn observe_only_shows_the_plan_writes_nothing_and_full_applies_exactly_it() {
    let (_, client, ns, _op) = setup("manage-team").await;
    let standin = server_with_standin(&client, &ns, "terdut", OBSERVE_TEAM_PORT).await;
    create_team(&client, &ns, "payments", "terdut").await;
    let teams: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    let id = wait_team_ready(&teams, "payments").await;

    merge(
        &teams,
        "payments",
        json!({"spec": {"management": "ObserveOnly", "displayName": "Payments EU"}}),
    )
    .await;
    standin.admin().reset_calls().await.unwrap();
    let want = format!("rename team {id} to \"Payments EU\"");
    let observed = eventually("the plan in status", WAIT, || async {
        let t = teams.get("payments").await.ok()?;
        let s = t.status?;
        (s.plan.as_deref() == Some(&[want.clone()][..])).then_some(s)
    })
    .await;
    let ready = condition(&observed.conditions, "Ready").unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "ObserveOnly")
    );
    assert!(ready.message.contains("1 change(s)"), "{}", ready.message);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let calls = standin.admin().calls().await.unwrap();
    assert!(
        writes(&calls).is_empty(),
        "no write to the server: {calls:?}"
    );
    let state = standin.admin().state().await.unwrap();
    let on_server = state.teams.iter().find(|t| t.id == id).unwrap();
    assert_eq!(
        on_server.name, "Team payments",
        "not renamed yet: {on_server:?}"
    );

    merge(&teams, "payments", json!({"spec": {"management": "Full"}})).await;
    let done = eventually("the plan applied", WAIT, || async {
        let s = teams.get("payments").await.ok()?.status?;
        let applied = s.last_applied.clone()?;
        (s.plan.is_none() && applied.changes == vec![want.clone()]).then_some(s)
    })
    .await;
    assert_eq!(
        condition(&done.conditions, "Ready").unwrap().reason,
        "Ready"
    );
    let state = standin.admin().state().await.unwrap();
    let on_server = state.teams.iter().find(|t| t.id == id).unwrap();
    assert_eq!(on_server.name, "Payments EU");
    let calls = standin.admin().calls().await.unwrap();
    assert_eq!(
        writes(&calls),
        vec!["PUT /api/v1/teams/{id}/name".to_owned()],
        "exactly the planned change: {calls:?}"
    );
}

#[tokio::test]
async fn a_paused_server_leaves_its_deployment_alone_and_its_teams_still_converge() {
    let (_, client, ns, _op) = setup("manage-server").await;
    let _standin = server_with_standin(&client, &ns, "terdut", PAUSED_SERVER_PORT).await;
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    eventually("the Deployment", WAIT, || async {
        deployments.get_opt("terdut").await.ok().flatten()
    })
    .await;

    merge(
        &servers,
        "terdut",
        json!({"metadata": {"annotations": {PAUSED: "true"}}}),
    )
    .await;
    let paused = eventually("Paused on the server", WAIT, || async {
        let s = servers.get("terdut").await.ok()?.status?;
        condition(&s.conditions, "Paused").cloned()
    })
    .await;
    assert_eq!(paused.reason, "PausedByAnnotation");
    merge(&servers, "terdut", json!({"spec": {"replicas": 5}})).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let d = deployments.get("terdut").await.unwrap();
    assert_ne!(
        d.spec.replicas,
        Some(5),
        "a paused server's Deployment is not written"
    );

    // The children still get the server's client: a team converges meanwhile.
    create_team(&client, &ns, "platform", "terdut").await;
    let teams: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    wait_team_ready(&teams, "platform").await;

    merge(
        &servers,
        "terdut",
        json!({"metadata": {"annotations": {PAUSED: null}}}),
    )
    .await;
    eventually("resumed: the Deployment follows the spec", WAIT, || async {
        let d = deployments.get("terdut").await.ok()?;
        (d.spec.replicas == Some(5)).then_some(())
    })
    .await;
    // The status is written after the Deployment, in the same pass.
    eventually("the Paused condition gone", WAIT, || async {
        let s = servers.get("terdut").await.ok()?.status?;
        condition(&s.conditions, "Paused").is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_paused_team_pauses_the_server_calls_of_its_alert_sources() {
    let (_, client, ns, _op) = setup("manage-paused-team").await;
    let standin = server_with_standin(&client, &ns, "terdut", PAUSED_TEAM_PORT).await;
    create_team(&client, &ns, "platform", "terdut").await;
    let teams: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    wait_team_ready(&teams, "platform").await;
    let api = sources(&client, &ns);
    api.create(
        &PostParams::default(),
        &source("am", "platform", "alertmanager", "prod-am"),
    )
    .await
    .unwrap();
    let id = wait_ready_id(&client, &ns, "am", None).await;

    merge(
        &teams,
        "platform",
        json!({"metadata": {"annotations": {PAUSED: "true"}}}),
    )
    .await;
    let paused = eventually("the source says its team is paused", WAIT, || async {
        let s = api.get("am").await.ok()?.status?;
        condition(&s.conditions, "Paused").cloned()
    })
    .await;
    assert_eq!(paused.reason, "PausedByTeam");
    assert!(paused.message.contains("platform"), "{}", paused.message);
    standin.admin().reset_calls().await.unwrap();
    source_fixture::patch_spec(&client, &ns, "am", json!({"name": "renamed-am"})).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let calls = standin.admin().calls().await.unwrap();
    assert!(
        writes(&calls).is_empty(),
        "no write while the team is paused: {calls:?}"
    );

    merge(
        &teams,
        "platform",
        json!({"metadata": {"annotations": {PAUSED: null}}}),
    )
    .await;
    eventually("the rename once the team resumes", WAIT, || async {
        let state = standin.admin().state().await.ok()?;
        let i = state
            .teams
            .iter()
            .flat_map(|t| &t.integrations)
            .find(|i| i.id == id)?;
        (i.name == "renamed-am").then_some(())
    })
    .await;
    eventually("the source's Paused condition gone", WAIT, || async {
        let s = api.get("am").await.ok()?.status?;
        condition(&s.conditions, "Paused").is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn an_observe_only_source_plans_its_integration_and_creates_no_secret() {
    let (_, client, ns, _op) = setup("manage-source").await;
    let standin = server_with_standin(&client, &ns, "terdut", OBSERVE_SOURCE_PORT).await;
    let teams: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    teams
        .create(&PostParams::default(), &team("platform", "terdut"))
        .await
        .unwrap();
    wait_team_ready(&teams, "platform").await;
    let api = sources(&client, &ns);
    let mut src = source("am", "platform", "alertmanager", "prod-am");
    src.spec.management = Management::ObserveOnly;
    standin.admin().reset_calls().await.unwrap();
    api.create(&PostParams::default(), &src).await.unwrap();
    let plan = eventually("the source's plan", WAIT, || async {
        api.get("am").await.ok()?.status?.plan
    })
    .await;
    assert!(
        plan.iter()
            .any(|l| l.contains("create") && l.contains("prod-am")),
        "{plan:?}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let calls = standin.admin().calls().await.unwrap();
    assert!(writes(&calls).is_empty(), "{calls:?}");
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), &ns);
    assert!(
        secrets
            .get_opt("am-terdut-webhook")
            .await
            .unwrap()
            .is_none(),
        "no webhook Secret while only observed"
    );

    source_fixture::patch_spec(&client, &ns, "am", json!({"management": "Full"})).await;
    wait_ready_id(&client, &ns, "am", None).await;
    let s = api.get("am").await.unwrap().status.unwrap();
    assert!(s.plan.is_none(), "{s:?}");
    assert_eq!(s.last_applied.map(|a| a.changes), Some(plan));
}
