//! A team deleted with `deletionPolicy: Orphan` stays on the server with its integrations, so
//! deleting its alert sources must delete theirs (docs/design.md §5 "Deletion policy"): a live
//! webhook key with no object left to delete it is what a tenant would not notice. Against the
//! real kube-apiserver and the stand-in: what the user sees (the team waiting, naming the
//! sources) and what the server got (the integration deleted, its key dead, the team left),
//! also when the server refuses the deletes for a while and the whole namespace goes.

mod common;
mod source_fixture;

use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use source_fixture::{WAIT, key_live, source, sources, wait_ready_id, wait_webhook};
use terdut_crds::v1alpha1::TerdutTeam;
use terdut_standin::FaultRule;

use common::{eventually, server_with_standin, setup};

const ALONE_PORT: u16 = 19820;
const NAMESPACE_PORT: u16 = 19821;

fn orphaned_team(server_ns: &str) -> TerdutTeam {
    serde_json::from_value(json!({
        "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutTeam",
        "metadata": {"name": "payments"},
        "spec": {"serverRef": {"name": "terdut", "namespace": server_ns},
                 "displayName": "Payments", "deletionPolicy": "Orphan"},
    }))
    .unwrap()
}

/// `(status, reason, message)` of the team's Ready condition.
async fn team_ready(api: &Api<TerdutTeam>) -> Option<(String, String, String)> {
    let s = api.get("payments").await.ok()?.status?;
    s.conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

async fn gone<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    eventually(&format!("{name} gone"), WAIT, || async {
        api.get_opt(name).await.unwrap().is_none().then_some(())
    })
    .await
}

/// A server accepting every namespace, and in a tenant namespace an orphaned team with an alert
/// source whose key is live: (stand-in, tenant namespace, integration id, key).
async fn a_team_with_a_live_source(
    prefix: &str,
    port: u16,
) -> (kube::Client, terdut_standin::Handle, String, i64, String) {
    let (cp, client, server_ns, _op) = setup(prefix).await;
    let standin = server_with_standin(&client, &server_ns, "terdut", port).await;
    source_fixture_allow(&client, &server_ns).await;
    let ns = cp.namespace(&client, &format!("{prefix}-t")).await.unwrap();
    let teams: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    teams
        .create(&PostParams::default(), &orphaned_team(&server_ns))
        .await
        .unwrap();
    source_fixture::wait_team_ready(&teams, "payments").await;
    sources(&client, &ns)
        .create(
            &PostParams::default(),
            &source("am", "payments", "alertmanager", "prod-am"),
        )
        .await
        .unwrap();
    let id = wait_ready_id(&client, &ns, "am", None).await;
    let key = wait_webhook(&client, &ns, "am", id).await.key;
    assert_eq!(key_live(&standin, &key).await, (true, Some(id)));
    (client, standin, ns, id, key)
}

async fn source_fixture_allow(client: &kube::Client, server_ns: &str) {
    use kube::api::{Patch, PatchParams};
    let api: Api<terdut_crds::v1alpha1::TerdutServer> = Api::namespaced(client.clone(), server_ns);
    api.patch(
        "terdut",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"allowedTeams": {"namespaces": {"from": "All"}}}})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn deleting_the_source_of_an_orphaned_team_deletes_its_integration() {
    let (client, standin, ns, id, key) =
        a_team_with_a_live_source("orphan-alone", ALONE_PORT).await;
    let teams: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);

    // The team goes first; its source keeps working meanwhile. Then the source: its
    // integration must be deleted, its key dead.
    teams
        .delete("payments", &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(key_live(&standin, &key).await, (true, Some(id)));
    let waiting = team_ready(&teams).await;
    let api = sources(&client, &ns);
    api.delete("am", &DeleteParams::default()).await.unwrap();
    gone(&api, "am").await;
    assert!(!key_live(&standin, &key).await.0, "the key is still live");

    // What the user saw: the team waited, saying which source still had a live key on it,
    // and went once the source had deleted its integration; it stays on the server, as its
    // policy says.
    let (status, reason, message) = waiting.expect("the team waited for its source");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "DeletionBlocked")
    );
    assert!(
        message.contains("TerdutAlertSource am") && message.contains("webhook key"),
        "{message}"
    );
    let note =
        source_fixture::wait_event(&client, &ns, "payments", "Warning", "DeletionBlocked").await;
    assert!(note.contains("am"), "{note}");
    gone(&teams, "payments").await;
    let state = standin.admin().state().await.unwrap();
    let team = state
        .team_by_external_id(&format!("{ns}/payments"))
        .expect("the orphaned team stays on the server");
    assert!(team.integrations.is_empty(), "{team:?}");
}

#[tokio::test]
async fn deleting_the_namespace_of_an_orphaned_team_deletes_its_sources_integrations() {
    let (client, standin, ns, id, key) =
        a_team_with_a_live_source("orphan-ns", NAMESPACE_PORT).await;
    // The server refuses to delete integrations for a while, so the source's deletion cannot
    // be over before the team's: an orphaned team that went at once would leave the source
    // nothing to delete its integration through, and the key live for good.
    let refusing = standin
        .admin()
        .add_fault(
            &FaultRule::new("DELETE /api/v1/teams/{id}/integrations/{iid}").error_rate(1.0, 503),
        )
        .await
        .unwrap();
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    namespaces
        .delete(&ns, &DeleteParams::default())
        .await
        .unwrap();
    // Read while the server refuses, judged below: the team once the namespace's deletion
    // reached it (waiting, or already gone), and then whether its source is still there.
    let teams: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    let team_waiting = eventually("the team being deleted", WAIT, || async {
        match teams.get_opt("payments").await.unwrap() {
            None => Some(None),
            Some(t) if t.metadata.deletion_timestamp.is_none() => None,
            Some(_) => team_ready(&teams)
                .await
                .filter(|(_, reason, _)| reason == "DeletionBlocked")
                .map(Some),
        }
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let source_waiting = sources(&client, &ns).get_opt("am").await.unwrap().is_some();
    standin.admin().remove_fault(refusing).await.unwrap();
    eventually(
        "the namespace gone",
        std::time::Duration::from_secs(90),
        || async {
            namespaces
                .get_opt(&ns)
                .await
                .unwrap()
                .is_none()
                .then_some(())
        },
    )
    .await;
    // What the server got: the integration deleted, its key dead; the team left, as its policy
    // says.
    assert!(!key_live(&standin, &key).await.0, "the key is still live");
    let state = standin.admin().state().await.unwrap();
    let team = state
        .team_by_external_id(&format!("{ns}/payments"))
        .expect("the orphaned team stays on the server");
    assert!(team.integrations.is_empty(), "{team:?}");
    // What the user saw meanwhile: the team waiting, naming its source, and the source
    // staying while its integration could not be deleted.
    let (_, reason, message) = team_waiting.expect("the team waited for its source");
    assert_eq!(reason, "DeletionBlocked", "{message}");
    assert!(message.contains("TerdutAlertSource am"), "{message}");
    assert!(
        source_waiting,
        "the source went while its integration {id} was live"
    );
}
