//! `spec.deletionPolicy` (docs/design.md §5 "Deletion policy") against a real kube-apiserver
//! and the stand-in: `Orphan` leaves the team, or the integration and its webhook Secret, on
//! the server as they are, says so in an Event, and makes no call to delete anything; it is
//! read when the deletion is handled, so it may be set on a live object.

mod common;
mod source_fixture;

use std::time::Duration;

use common::{eventually, server_with_standin, setup};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use source_fixture::{
    WAIT, create_team, key_live, labels, source, sources, wait_event, wait_ready_id,
    wait_team_ready, wait_webhook,
};
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutTeam};

const TEAM_PORT: u16 = 19770;
const SOURCE_PORT: u16 = 19771;

async fn gone<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    eventually(&format!("{name} gone"), WAIT, || async {
        api.get_opt(name).await.unwrap().is_none().then_some(())
    })
    .await
}

#[tokio::test]
async fn an_orphaned_team_stays_on_the_server_when_its_object_is_deleted() {
    let (_, client, ns, _op) = setup("policy-team").await;
    let standin = server_with_standin(&client, &ns, "terdut", TEAM_PORT).await;
    create_team(&client, &ns, "payments", "terdut").await;
    let teams: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    let id = wait_team_ready(&teams, "payments").await;

    // Set on the live object, as a platform team would before a prune.
    teams
        .patch(
            "payments",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"deletionPolicy": "Orphan"}})),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    standin.admin().reset_calls().await.unwrap();
    teams
        .delete("payments", &DeleteParams::default())
        .await
        .unwrap();
    gone(&teams, "payments").await;

    let note = wait_event(&client, &ns, "payments", "Normal", "Orphaned").await;
    assert!(note.contains(&format!("team {id}")), "{note}");
    let state = standin.admin().state().await.unwrap();
    let team = state.teams.iter().find(|t| t.id == id);
    assert!(team.is_some(), "the team is still on the server: {state:?}");
    let calls = standin.admin().calls().await.unwrap();
    assert!(
        !calls.0.keys().any(|c| c.starts_with("DELETE")),
        "nothing was deleted on the server: {calls:?}"
    );
}

#[tokio::test]
async fn an_orphaned_integration_keeps_its_key_and_its_secret_leaves_the_operator() {
    let (_, client, ns, _op) = setup("policy-source").await;
    let standin = server_with_standin(&client, &ns, "terdut", SOURCE_PORT).await;
    create_team(&client, &ns, "platform", "terdut").await;
    let teams: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    wait_team_ready(&teams, "platform").await;
    let api: Api<TerdutAlertSource> = sources(&client, &ns);
    let mut src = source("am", "platform", "alertmanager", "prod-am");
    src.spec.deletion_policy = terdut_crds::v1alpha1::DeletionPolicy::Orphan;
    api.create(&PostParams::default(), &src).await.unwrap();
    let id = wait_ready_id(&client, &ns, "am", None).await;
    let hook = wait_webhook(&client, &ns, "am", id).await;

    standin.admin().reset_calls().await.unwrap();
    api.delete("am", &DeleteParams::default()).await.unwrap();
    gone(&api, "am").await;

    let note = wait_event(&client, &ns, "am", "Normal", "Orphaned").await;
    assert!(note.contains(&format!("integration {id}")), "{note}");
    assert!(note.contains("am-terdut-webhook"), "{note}");
    // The integration and its key still work on the server.
    assert_eq!(key_live(&standin, &hook.key).await, (true, Some(id)));
    let calls = standin.admin().calls().await.unwrap();
    assert!(
        !calls.0.keys().any(|c| c.starts_with("DELETE")),
        "nothing was deleted on the server: {calls:?}"
    );
    // The Secret survives the source, no longer owned by it nor labelled as the operator's.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), &ns);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let kept = secrets
        .get("am-terdut-webhook")
        .await
        .expect("the webhook Secret is kept");
    assert!(
        kept.metadata
            .owner_references
            .clone()
            .unwrap_or_default()
            .is_empty(),
        "no owner left, so garbage collection keeps it"
    );
    assert!(
        !labels(&kept).contains_key("terdut.ryuvia.com/managed"),
        "{:?}",
        labels(&kept)
    );
    let key = String::from_utf8(kept.data.unwrap()["key"].0.clone()).unwrap();
    assert_eq!(key, hook.key, "the key the senders use is still there");
}
