//! The TerdutAlertSource actor against a real kube-apiserver and the stand-in terdut-server:
//! creation, rename, kind-change rotation, deletion on the server, a lost Secret
//! failing closed, the rotate annotation, the crash window, a team that is not Ready yet, a
//! foreign Secret, and deletion. Secrecy has a binary of its own (source_secrecy.rs).
//!
//! These tests also make the team Ready by hand (`source_fixture::make_team_ready`: the team on
//! the stand-in by its `external_id`, then `Ready=True` with its `teamID`), so they exercise the
//! source actor whatever the TerdutTeam actor does; `end_to_end_with_the_team_actor` relies on
//! that actor alone.

mod common;
mod source_fixture;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{eventually, setup};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use source_fixture::*;
use terdut_actors::key::ObjectKey;
use terdut_actors::routing::ChildKind;
use terdut_actors::server::TEST_FAULT_ANNOTATION;
use terdut_actors::source::hooks::CRASH_AFTER_CREATE;
use terdut_crds::v1alpha1::TerdutAlertSource;
use terdut_standin::FaultRule;

const FINALIZER: &str = "terdut.ryuvia.com/source-cleanup";

/// Creates alert source `am` (Alertmanager "prod-am" of team `platform`) and waits until it
/// is Ready; returns its integration id.
async fn create_ready_am(client: &kube::Client, ns: &str) -> terdut_actors::api::Id {
    sources(client, ns)
        .create(
            &PostParams::default(),
            &source("am", "platform", "alertmanager", "prod-am"),
        )
        .await
        .unwrap();
    wait_ready_id(client, ns, "am", None).await
}

#[tokio::test]
async fn create_rename_and_kind_change_rotation() {
    let (_, client, ns, _) = setup("src-life").await;
    let (standin, team_id) = server_and_team(&client, &ns, 19300, "platform").await;
    let api = sources(&client, &ns);

    // Creation: a Secret whose key the server confirms live, referenced (only) from status.
    let id = create_ready_am(&client, &ns).await;
    let hook = wait_webhook(&client, &ns, "am", id).await;
    assert_eq!(key_live(&standin, &hook.key).await, (true, Some(id)));
    assert!(hook.key.starts_with("tdik_"));
    assert!(hook.url.contains("/api/v1/ingest/alertmanager/"));
    let owner = &hook.secret.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.controller,
            owner.block_owner_deletion
        ),
        ("TerdutAlertSource", "am", Some(true), Some(true))
    );
    let l = labels(&hook.secret);
    assert_eq!(l["terdut.ryuvia.com/managed"], "true");
    assert_eq!(l["terdut.ryuvia.com/alert-source"], "am");
    let obj = api.get("am").await.unwrap();
    assert!(obj.finalizers().iter().any(|f| f == FINALIZER));
    let st = obj.status.unwrap();
    assert_eq!(st.webhook_url_secret_ref.unwrap().name, "am-terdut-webhook");
    let ext = format!("{ns}/am");
    let on_server = integrations_for(&standin, &ext).await;
    assert_eq!(on_server.len(), 1);
    assert_eq!(
        (on_server[0].id, on_server[0].name.as_str()),
        (id, "prod-am")
    );
    let state = standin.admin().state().await.unwrap();
    assert_eq!(state.team(team_id).unwrap().integrations.len(), 1);
    wait_event(&client, &ns, "am", "Normal", "IntegrationCreated").await;

    // Rename: PATCH in place, the key stays.
    patch_spec(&client, &ns, "am", json!({"name": "prod-am-2"})).await;
    eventually("the rename on the server", WAIT, || async {
        let i = integrations_for(&standin, &ext).await;
        (i.len() == 1 && i[0].name == "prod-am-2").then_some(())
    })
    .await;
    assert_eq!(integrations_for(&standin, &ext).await[0].id, id);
    assert_eq!(key_live(&standin, &hook.key).await, (true, Some(id)));
    wait_event(&client, &ns, "am", "Normal", "IntegrationRenamed").await;

    // Kind change: delete and recreate, which rotates the key, with a Warning.
    patch_spec(&client, &ns, "am", json!({"kind": "grafana"})).await;
    let new_id = wait_ready_id(&client, &ns, "am", Some(id)).await;
    let new_hook = wait_webhook(&client, &ns, "am", new_id).await;
    assert!(!key_live(&standin, &hook.key).await.0, "old key dead");
    assert_eq!(
        key_live(&standin, &new_hook.key).await,
        (true, Some(new_id))
    );
    assert!(new_hook.url.contains("/api/v1/ingest/grafana/"));
    let on_server = integrations_for(&standin, &ext).await;
    assert_eq!(on_server.len(), 1, "exactly one integration for {ext}");
    assert_eq!(on_server[0].id, new_id);
    let note = wait_event(&client, &ns, "am", "Warning", "WebhookKeyRotated").await;
    assert!(note.contains("spec.kind changed"), "{note}");
    // The same Secret object was rewritten, not replaced by another.
    assert_eq!(new_hook.secret.metadata.uid, hook.secret.metadata.uid);
}

#[tokio::test]
async fn an_integration_deleted_on_the_server_is_recreated_with_a_new_key() {
    let (_, client, ns, _) = setup("src-gone").await;
    let (standin, team_id) = server_and_team(&client, &ns, 19301, "platform").await;
    let id = create_ready_am(&client, &ns).await;
    let old = wait_webhook(&client, &ns, "am", id).await;

    api_client(&standin)
        .delete_integration(team_id, id)
        .await
        .unwrap();
    // The periodic resync notices; the test does not wait five minutes for it.
    nudge(&client, &ns, "am").await;
    let new_id = wait_ready_id(&client, &ns, "am", Some(id)).await;
    let new = wait_webhook(&client, &ns, "am", new_id).await;
    assert!(!key_live(&standin, &old.key).await.0);
    assert_eq!(key_live(&standin, &new.key).await, (true, Some(new_id)));
    assert_eq!(
        integrations_for(&standin, &format!("{ns}/am")).await.len(),
        1
    );
    let note = wait_event(&client, &ns, "am", "Warning", "WebhookKeyRotated").await;
    assert!(note.contains("no longer exists on the server"), "{note}");
}

#[tokio::test]
async fn a_lost_secret_fails_closed_until_a_rotation_is_asked_for() {
    let (_, client, ns, _) = setup("src-lost").await;
    let (standin, _) = server_and_team(&client, &ns, 19302, "platform").await;
    let id = create_ready_am(&client, &ns).await;
    let old = wait_webhook(&client, &ns, "am", id).await;
    let posts = || async {
        standin
            .admin()
            .calls()
            .await
            .unwrap()
            .get("POST /api/v1/teams/{id}/integrations")
    };
    let posts_before = posts().await;

    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    secrets
        .delete("am-terdut-webhook", &DeleteParams::default())
        .await
        .unwrap();
    let obj = wait_reason(&client, &ns, "am", "WebhookSecretLost").await;
    let st = obj.status.unwrap();
    assert_eq!(st.integration_id, Some(id));
    assert_eq!(st.webhook_url_secret_ref, None);
    let (_, _, message) = ready(&client, &ns, "am").await.unwrap();
    assert!(message.contains("delete and recreate"), "{message}");
    wait_event(&client, &ns, "am", "Warning", "WebhookSecretLost").await;
    // More passes change nothing: no Secret, no new integration, the old key still live.
    nudge(&client, &ns, "am").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        ready(&client, &ns, "am").await.unwrap().1,
        "WebhookSecretLost"
    );
    assert!(
        secrets
            .get_opt("am-terdut-webhook")
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(posts().await, posts_before, "no POST while failing closed");
    let on_server = integrations_for(&standin, &format!("{ns}/am")).await;
    assert_eq!(on_server.len(), 1);
    assert_eq!(on_server[0].id, id);
    assert_eq!(key_live(&standin, &old.key).await, (true, Some(id)));

    // The explicit way out: the rotate annotation rotates once, and says who asked.
    annotate(
        &client,
        &ns,
        "am",
        json!({"terdut.ryuvia.com/rotate-webhook-key": "2026-10-01T12:00:00Z"}),
    )
    .await;
    let new_id = wait_ready_id(&client, &ns, "am", Some(id)).await;
    let new = wait_webhook(&client, &ns, "am", new_id).await;
    assert!(!key_live(&standin, &old.key).await.0);
    assert_eq!(key_live(&standin, &new.key).await, (true, Some(new_id)));
    let note = wait_event(&client, &ns, "am", "Warning", "WebhookKeyRotated").await;
    assert!(note.contains("rotation requested by"), "{note}");
    assert!(!note.contains("an unknown field manager"), "{note}");
    let obj = sources(&client, &ns).get("am").await.unwrap();
    assert_eq!(
        obj.annotations()["terdut.ryuvia.com/webhook-key-rotated-for"],
        "2026-10-01T12:00:00Z"
    );
    // Handled once: another pass keeps the new key.
    nudge(&client, &ns, "am").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(wait_ready_id(&client, &ns, "am", None).await, new_id);
    assert_eq!(key_live(&standin, &new.key).await, (true, Some(new_id)));
}

/// The source's own Secret write is no nudge (docs/architecture.md "Own writes"), but anyone else's
/// edit still is: an emptied key fails closed without waiting for the resync (300 s in these
/// tests).
#[tokio::test]
async fn someone_elses_edit_of_the_secret_still_nudges_the_source() {
    let (_, client, ns, _) = setup("src-edit").await;
    let (standin, _) = server_and_team(&client, &ns, 19311, "platform").await;
    let id = create_ready_am(&client, &ns).await;
    let old = wait_webhook(&client, &ns, "am", id).await;

    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    secrets
        .patch(
            "am-terdut-webhook",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&json!({"data": {"key": null}})),
        )
        .await
        .unwrap();
    let obj = wait_reason(&client, &ns, "am", "WebhookSecretLost").await;
    assert_eq!(obj.status.unwrap().integration_id, Some(id));
    // Failing closed: the old key stays live, nothing was minted.
    assert_eq!(key_live(&standin, &old.key).await, (true, Some(id)));
    assert_eq!(
        integrations_for(&standin, &format!("{ns}/am")).await.len(),
        1
    );
}

#[tokio::test]
async fn the_crash_window_leaves_no_orphan_and_no_duplicate() {
    let (_, client, ns, op) = setup("src-crash").await;
    let (standin, _) = server_and_team(&client, &ns, 19303, "platform").await;
    let mut src = source("am", "platform", "alertmanager", "prod-am");
    src.metadata.annotations = Some(BTreeMap::from([(
        TEST_FAULT_ANNOTATION.to_owned(),
        CRASH_AFTER_CREATE.to_owned(),
    )]));
    sources(&client, &ns)
        .create(&PostParams::default(), &src)
        .await
        .unwrap();

    let id = wait_ready_id(&client, &ns, "am", None).await;
    let hook = wait_webhook(&client, &ns, "am", id).await;
    // The actor did crash after the POST and was restarted.
    let child = &op
        .tree
        .child(ChildKind::Source, &ObjectKey::new(ns.clone(), "am"))
        .await
        .expect("the source's actor");
    assert!(child.restarts >= 1, "{child:?}");
    // Exactly one integration for the external_id, and the Secret's key is its live key.
    let on_server = integrations_for(&standin, &format!("{ns}/am")).await;
    assert_eq!(on_server.len(), 1, "{on_server:?}");
    assert_eq!(on_server[0].id, id);
    assert_eq!(key_live(&standin, &hook.key).await, (true, Some(id)));
    let calls = standin.admin().calls().await.unwrap();
    assert_eq!(
        calls.get("DELETE /api/v1/teams/{id}/integrations/{iid}"),
        1,
        "the orphan was deleted once: {calls:?}"
    );
    let note = wait_event(&client, &ns, "am", "Warning", "OrphanIntegrationReplaced").await;
    assert!(note.contains("no Secret ever held its key"), "{note}");
}

#[tokio::test]
async fn waits_for_the_team_then_converges() {
    let (_, client, ns, _) = setup("src-wait").await;
    sources(&client, &ns)
        .create(
            &PostParams::default(),
            &source("am", "platform", "alertmanager", "prod-am"),
        )
        .await
        .unwrap();
    wait_reason(&client, &ns, "am", "TeamNotFound").await;

    // The team exists, but its server does not yet: not Ready.
    create_team(&client, &ns, "platform", "terdut").await;
    wait_reason(&client, &ns, "am", "WaitingForTeam").await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    assert!(
        secrets
            .get_opt("am-terdut-webhook")
            .await
            .unwrap()
            .is_none()
    );
    let obj = sources(&client, &ns).get("am").await.unwrap();
    assert!(
        !obj.finalizers().iter().any(|f| f == FINALIZER),
        "no finalizer before anything was created"
    );

    let standin = common::server_with_standin(&client, &ns, "terdut", 19304).await;
    make_team_ready(&client, &ns, "platform", &standin).await;
    let id = wait_ready_id(&client, &ns, "am", None).await;
    let hook = wait_webhook(&client, &ns, "am", id).await;
    assert_eq!(key_live(&standin, &hook.key).await, (true, Some(id)));
}

#[tokio::test]
async fn deletion_deletes_the_integration_and_a_failure_blocks_it() {
    let (_, client, ns, _) = setup("src-del").await;
    let (standin, _) = server_and_team(&client, &ns, 19305, "platform").await;
    let api = sources(&client, &ns);
    let id = create_ready_am(&client, &ns).await;
    let hook = wait_webhook(&client, &ns, "am", id).await;
    let ext = format!("{ns}/am");

    // The server refuses the DELETE: the object stays, with a Warning and DeletionBlocked.
    let fault = standin
        .admin()
        .add_fault(
            &FaultRule::new("DELETE /api/v1/teams/{id}/integrations/{iid}").error_rate(1.0, 500),
        )
        .await
        .unwrap();
    api.delete("am", &DeleteParams::default()).await.unwrap();
    let note = wait_event(&client, &ns, "am", "Warning", "DeleteFailed").await;
    assert!(note.contains("stays until"), "{note}");
    wait_reason(&client, &ns, "am", "DeletionBlocked").await;
    assert_eq!(integrations_for(&standin, &ext).await.len(), 1);
    assert!(api.get_opt("am").await.unwrap().is_some());

    // Once the server answers, the integration goes, then the object.
    standin.admin().remove_fault(fault).await.unwrap();
    eventually(
        "the TerdutAlertSource to go",
        Duration::from_secs(60),
        || async { api.get_opt("am").await.unwrap().is_none().then_some(()) },
    )
    .await;
    assert!(integrations_for(&standin, &ext).await.is_empty());
    assert!(!key_live(&standin, &hook.key).await.0);
    wait_event(&client, &ns, "am", "Normal", "IntegrationDeleted").await;
}

#[tokio::test]
async fn a_foreign_secret_is_never_overwritten() {
    let (_, client, ns, _) = setup("src-foreign").await;
    let (standin, _) = server_and_team(&client, &ns, 19306, "platform").await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let foreign: Secret = serde_json::from_value(json!({
        "metadata": {"name": "am-terdut-webhook"},
        "stringData": {"key": "someone else's"},
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &foreign)
        .await
        .unwrap();
    sources(&client, &ns)
        .create(
            &PostParams::default(),
            &source("am", "platform", "alertmanager", "prod-am"),
        )
        .await
        .unwrap();
    let obj = wait_reason(&client, &ns, "am", "WebhookSecretConflict").await;
    assert_eq!(obj.status.unwrap().integration_id, None);
    wait_event(&client, &ns, "am", "Warning", "WebhookSecretConflict").await;
    let ext = format!("{ns}/am");
    assert!(integrations_for(&standin, &ext).await.is_empty(), "no POST");
    let kept = secrets.get("am-terdut-webhook").await.unwrap();
    assert_eq!(kept.data.unwrap()["key"].0, b"someone else's");

    // Once it is out of the way the source converges.
    secrets
        .delete("am-terdut-webhook", &DeleteParams::default())
        .await
        .unwrap();
    nudge(&client, &ns, "am").await;
    let id = wait_ready_id(&client, &ns, "am", None).await;
    let hook = wait_webhook(&client, &ns, "am", id).await;
    assert_eq!(key_live(&standin, &hook.key).await, (true, Some(id)));
}

/// Needs the TerdutTeam actor: nothing here sets the team's status by hand.
#[tokio::test]
async fn end_to_end_with_the_team_actor() {
    let (_, client, ns, _) = setup("src-e2e").await;
    let standin = common::server_with_standin(&client, &ns, "terdut", 19307).await;
    create_team(&client, &ns, "platform", "terdut").await;
    sources(&client, &ns)
        .create(
            &PostParams::default(),
            &source("am", "platform", "generic", "from-e2e"),
        )
        .await
        .unwrap();
    let id = eventually(
        "Ready through the team actor",
        Duration::from_secs(60),
        || async {
            let s: TerdutAlertSource = sources(&client, &ns).get_opt("am").await.ok()??;
            let st = s.status?;
            st.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
                .then_some(st.integration_id)?
        },
    )
    .await;
    let hook = wait_webhook(&client, &ns, "am", id).await;
    assert_eq!(key_live(&standin, &hook.key).await, (true, Some(id)));
    let state = standin.admin().state().await.unwrap();
    let team = state
        .team_by_external_id(&format!("{ns}/platform"))
        .unwrap();
    assert_eq!(team.integrations.len(), 1);
    assert_eq!(team.integrations[0].id, id);
}

/// The finalizer must not deadlock when the server went first (e.g. a namespace being deleted):
/// it is released with a Warning that names the integration left behind.
#[tokio::test]
async fn deletion_after_the_server_is_gone_releases_with_a_warning() {
    let (_, client, ns, _) = setup("src-orphan").await;
    let (_standin, _) = server_and_team(&client, &ns, 19308, "platform").await;
    let api = sources(&client, &ns);
    let id = create_ready_am(&client, &ns).await;

    let servers: Api<terdut_crds::v1alpha1::TerdutServer> = Api::namespaced(client.clone(), &ns);
    servers
        .delete("terdut", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the TerdutServer to go", WAIT, || async {
        servers
            .get_opt("terdut")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    api.delete("am", &DeleteParams::default()).await.unwrap();
    eventually("the TerdutAlertSource to go", WAIT, || async {
        api.get_opt("am").await.unwrap().is_none().then_some(())
    })
    .await;
    let note = wait_event(&client, &ns, "am", "Warning", "FinalizerReleased").await;
    assert!(note.contains(&format!("integration {id}")), "{note}");
    assert!(note.contains("no longer exists"), "{note}");
}

/// The long `just chaos` run's orphan: a kind change deleted the old integration and created
/// the new one, and the CR was deleted before the Secret and status recorded the new id. The
/// deletion then found the recorded (old) id already gone and released the finalizer, leaving
/// the new integration with no CR. Here the same state is made by hand: the recorded id is
/// deleted on the server and another integration with the source's external_id is created.
#[tokio::test]
async fn deletion_removes_an_integration_its_records_do_not_name() {
    let (_, client, ns, _) = setup("src-del-stale").await;
    let (standin, team_id) = server_and_team(&client, &ns, 19312, "platform").await;
    let api = sources(&client, &ns);
    let id = create_ready_am(&client, &ns).await;
    wait_webhook(&client, &ns, "am", id).await;
    let ext = format!("{ns}/am");

    let server = api_client(&standin);
    server.delete_integration(team_id, id).await.unwrap();
    let unrecorded = server
        .create_integration(
            team_id,
            &terdut_actors::api::NewIntegration {
                kind: terdut_actors::api::IntegrationKind::Grafana,
                name: "made after the recorded one".into(),
                external_id: ext.clone(),
            },
        )
        .await
        .unwrap()
        .integration()
        .id;
    assert_ne!(unrecorded, id);
    // Deleted before any pass could notice (no nudge: the change was on the server only).
    api.delete("am", &DeleteParams::default()).await.unwrap();
    eventually(
        "the TerdutAlertSource to go",
        Duration::from_secs(60),
        || async { api.get_opt("am").await.unwrap().is_none().then_some(()) },
    )
    .await;
    assert!(
        integrations_for(&standin, &ext).await.is_empty(),
        "integration {unrecorded} was left on the server without a CR"
    );
    let note = wait_event(&client, &ns, "am", "Normal", "IntegrationDeleted").await;
    assert!(
        note.contains(&format!("deleted integration {unrecorded}")),
        "{note}"
    );
}
