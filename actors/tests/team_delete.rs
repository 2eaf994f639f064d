//! Deleting a TerdutTeam against a real kube-apiserver and the stand-in (docs/design.md §5
//! "Finalizers", §4.6 last bullet): open incidents hold the finalizer until resolved, revoked
//! consent does not prevent the delete, a team that never got created is released, a deleted
//! TerdutServer releases its teams, and a paused team is deleted all the same.

mod common;
mod teams;

use std::time::Duration;

use common::{eventually, server_with_standin, setup};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use teams::*;
use terdut_actors::team::status::{PAUSE_ANNOTATION, PAUSED};
use terdut_crds::v1alpha1::conditions;
use terdut_crds::v1alpha1::{TerdutServer, TerdutTeam};

fn server() -> serde_json::Value {
    json!({"name": "terdut"})
}

async fn delete(api: &Api<TerdutTeam>, name: &str) {
    api.delete(name, &DeleteParams::default()).await.unwrap();
}

async fn wait_gone(api: &Api<TerdutTeam>, name: &str) {
    eventually(&format!("TerdutTeam {name} to be gone"), WAIT, || async {
        api.get_opt(name).await.unwrap().is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn open_incidents_hold_the_finalizer_until_resolved() {
    let (_, client, ns, _) = setup("del-incidents").await;
    let standin = server_with_standin(&client, &ns, "terdut", 19650).await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    create(&api, &team("platform", server(), "Platform", json!({}))).await;
    let id = team_id(&wait_reason(&api, "platform", "Ready").await);
    standin.admin().set_open_incidents(id, 2).await.unwrap();

    delete(&api, "platform").await;
    let note = wait_event(&client, &ns, "platform", "TeamDeleteRefused").await;
    assert!(note.contains("open incidents"), "{note}");
    // Still there on both sides, and the delete keeps being retried.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let t = api.get("platform").await.unwrap();
    assert!(t.metadata.deletion_timestamp.is_some());
    assert!(
        on_server(&standin, &format!("{ns}/platform"))
            .await
            .is_some()
    );
    let refused = standin
        .admin()
        .calls()
        .await
        .unwrap()
        .get("DELETE /api/v1/teams/{id}");
    assert!(refused >= 2, "retried with backoff: {refused} DELETEs");

    standin.admin().set_open_incidents(id, 0).await.unwrap();
    wait_gone(&api, "platform").await;
    assert!(
        on_server(&standin, &format!("{ns}/platform"))
            .await
            .is_none()
    );
    wait_event(&client, &ns, "platform", "TeamDeleted").await;
}

#[tokio::test]
async fn revoked_consent_does_not_prevent_the_delete() {
    let (cp, client, ns, _) = setup("del-consent").await;
    let standin = server_with_standin(&client, &ns, "terdut", 19651).await;
    allow(&client, &ns, "terdut", json!({"from": "All"})).await;
    let other = format!("{ns}-teams");
    cp.create_namespace(&client, &other, Default::default())
        .await
        .unwrap();
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &other);
    let to = json!({"name": "terdut", "namespace": ns});
    create(&api, &team("visitor", to, "Visitor", json!({}))).await;
    wait_reason(&api, "visitor", "Ready").await;
    allow(&client, &ns, "terdut", json!({"from": "None"})).await;
    wait_reason(&api, "visitor", "RefNotPermitted").await;
    assert!(
        on_server(&standin, &format!("{other}/visitor"))
            .await
            .is_some()
    );

    delete(&api, "visitor").await;
    wait_gone(&api, "visitor").await;
    assert!(
        on_server(&standin, &format!("{other}/visitor"))
            .await
            .is_none()
    );
}

#[tokio::test]
async fn a_team_that_never_got_created_is_released() {
    let (_, client, ns, _) = setup("del-never").await;
    let standin = server_with_standin(&client, &ns, "terdut", 19652).await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    create(&api, &team("alpha", server(), "Alpha", json!({}))).await;
    wait_reason(&api, "alpha", "Ready").await;
    create(&api, &team("beta", server(), "Alpha", json!({}))).await;
    // The finalizer went on before the (refused) create.
    let t = wait_reason(&api, "beta", "TeamNameTaken").await;
    assert!(t.metadata.finalizers.is_some());

    delete(&api, "beta").await;
    wait_gone(&api, "beta").await;
    let state = standin.admin().state().await.unwrap();
    assert_eq!(state.teams.len(), 1, "alpha only: {state:?}");
    assert_eq!(state.teams[0].external_id, format!("{ns}/alpha"));
}

#[tokio::test]
async fn a_deleted_server_releases_its_teams() {
    let (_, client, ns, _) = setup("del-server").await;
    let standin = server_with_standin(&client, &ns, "terdut", 19653).await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    create(&api, &team("platform", server(), "Platform", json!({}))).await;
    wait_reason(&api, "platform", "Ready").await;

    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    servers
        .delete("terdut", &DeleteParams::default())
        .await
        .unwrap();
    wait_reason(&api, "platform", "ServerRefNotFound").await;
    delete(&api, "platform").await;
    wait_gone(&api, "platform").await;
    let note = wait_event(&client, &ns, "platform", "ServerGone").await;
    assert!(note.contains(&format!("{ns}/terdut")), "{note}");
    // Documented: nothing is called once the TerdutServer is gone.
    assert!(
        on_server(&standin, &format!("{ns}/platform"))
            .await
            .is_some()
    );
}

#[tokio::test]
async fn a_paused_team_is_still_deleted() {
    let (_, client, ns, _) = setup("del-paused").await;
    let standin = server_with_standin(&client, &ns, "terdut", 19654).await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    create(&api, &team("platform", server(), "Platform", json!({}))).await;
    wait_reason(&api, "platform", "Ready").await;
    api.patch(
        "platform",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {PAUSE_ANNOTATION: "true"}}})),
    )
    .await
    .unwrap();
    eventually("the Paused condition", WAIT, || async {
        let s = api.get("platform").await.unwrap().status?;
        conditions::find(&s.conditions, PAUSED).map(|_| ())
    })
    .await;

    // docs/configuration.md: the pause stops changes, deletion still cleans up.
    delete(&api, "platform").await;
    wait_gone(&api, "platform").await;
    assert!(
        on_server(&standin, &format!("{ns}/platform"))
            .await
            .is_none()
    );
}
