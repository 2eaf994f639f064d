//! The operator key goes only to a server this TerdutServer controls (docs/security.md "The
//! server's key goes only to the server"), against the real kube-apiserver and the stand-in.
//! The attacker can write Services (not Secrets) in the server's namespace: a Service under the
//! server's name, made before the server, in the moment between the operator's check and its
//! create, or in place of the operator's own. Each test asserts what the user sees (conditions,
//! Events, the team's wait) and what the server got: no call at all, so no key.

mod common;
mod teams;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Secret, Service};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use terdut_crds::v1alpha1::{TerdutServer, TerdutTeam};

use common::{eventually, setup, standin_for, test_server};
use teams::{WAIT, team, wait_reason};

const EXTERNAL_NAME_PORT: u16 = 19800;
const RACE_PORT: u16 = 19801;
const REPLACED_PORT: u16 = 19802;

/// `(status, reason, message)` of the server's condition `type_`.
async fn condition(
    api: &Api<TerdutServer>,
    name: &str,
    type_: &str,
) -> Option<(String, String, String)> {
    let s = api.get(name).await.ok()?.status?;
    s.conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

async fn wait_condition(
    api: &Api<TerdutServer>,
    name: &str,
    type_: &str,
    reason: &str,
) -> (String, String) {
    let (status, _, message) = eventually(&format!("{type_} {reason}"), WAIT, || async {
        condition(api, name, type_)
            .await
            .filter(|(_, r, _)| r == reason)
    })
    .await;
    (status, message)
}

/// A Service under the server's name that is not the operator's: an ExternalName to a host
/// outside the cluster.
fn external_name(name: &str) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"type": "ExternalName", "externalName": "collector.attacker.example"},
    }))
    .unwrap()
}

/// A ClusterIP Service under the server's name and on its port, selecting the attacker's own
/// pods.
fn onto_their_pod(name: &str, port: u16) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "attacker"}},
        "spec": {"selector": {"app": "attacker"},
                 "ports": [{"name": "http", "port": port, "protocol": "TCP"}]},
    }))
    .unwrap()
}

/// What an object's owner would notice changed.
fn fingerprint(s: &Service) -> (Option<String>, String, String, String) {
    (
        s.metadata.resource_version.clone(),
        format!("{:?}", s.metadata.owner_references),
        format!("{:?}", s.metadata.labels),
        format!("{:?}", s.spec),
    )
}

/// The stand-in for `server`, started once its key exists, with its calls counted from zero.
async fn standin(client: &kube::Client, ns: &str, port: u16) -> terdut_standin::Handle {
    let standin = standin_for(client, ns, "terdut", port).await;
    standin.admin().reset_calls().await.unwrap();
    standin
}

async fn a_team(client: &kube::Client, ns: &str) -> Api<TerdutTeam> {
    let teams: Api<TerdutTeam> = Api::namespaced(client.clone(), ns);
    teams
        .create(
            &PostParams::default(),
            &team("oncall", json!({"name": "terdut"}), "Oncall", json!({})),
        )
        .await
        .unwrap();
    teams
}

#[tokio::test]
async fn an_external_name_service_at_the_servers_address_gets_no_key() {
    let (_cp, client, ns, op) = setup("key-external").await;
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let theirs = services
        .create(&PostParams::default(), &external_name("terdut"))
        .await
        .unwrap();
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    servers
        .create(
            &PostParams::default(),
            &test_server("terdut", i32::from(EXTERNAL_NAME_PORT)),
        )
        .await
        .unwrap();
    let standin = standin(&client, &ns, EXTERNAL_NAME_PORT).await;
    let teams = a_team(&client, &ns).await;

    let (status, message) = wait_condition(&servers, "terdut", "Ready", "ResourceNotOwned").await;
    assert_eq!(status, "False");
    assert!(message.contains("Service terdut"), "{message}");
    // What the server got: nothing at all, so no key (a pass, its retries and the team's).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let calls = standin.admin().calls().await.unwrap();
    assert_eq!(calls.total(), 0, "the key went to their Service: {calls:?}");
    // What the user sees: the key is withheld and why; the team waits, saying why.
    let (status, message) = wait_condition(&servers, "terdut", "KeyAccepted", "KeyWithheld").await;
    assert_eq!(status, "False");
    assert!(
        message.contains("not sent") && message.contains("Service terdut"),
        "{message}"
    );
    let t = wait_reason(&teams, "oncall", "WaitingForServer").await;
    let (_, _, message) = teams::ready(&t).unwrap();
    assert!(
        message.contains("not sent the operator key") && message.contains("ResourceNotOwned"),
        "{message}"
    );

    // Passes go on, and still: what the server got is nothing at all (no whoami, no team),
    // and their Service is as it was.
    teams::resync(op, &ns, "oncall").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let calls = standin.admin().calls().await.unwrap();
    assert_eq!(calls.total(), 0, "{calls:?}");
    assert!(standin.admin().state().await.unwrap().teams.is_empty());
    assert_eq!(
        fingerprint(&services.get("terdut").await.unwrap()),
        fingerprint(&theirs)
    );
}

#[tokio::test]
async fn a_service_appearing_between_the_check_and_the_create_is_not_taken_over() {
    let (_cp, client, ns, _op) = setup("key-race").await;
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    // Test hook: the pass waits 3 s between its live read of the Service's name (free) and
    // its apply, so the attacker's Service lands in between.
    let mut server = test_server("terdut", i32::from(RACE_PORT));
    server.metadata.annotations = Some(
        [(
            "terdut.ryuvia.com/test-pause-before-apply".to_owned(),
            "3000".to_owned(),
        )]
        .into(),
    );
    servers
        .create(&PostParams::default(), &server)
        .await
        .unwrap();
    // The key Secret is the pass's first write; the Service's apply comes next.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    eventually("the operator key Secret", WAIT, || async {
        secrets.get_opt("terdut-operator-key").await.ok().flatten()
    })
    .await;
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let theirs = services
        .create(&PostParams::default(), &onto_their_pod("terdut", RACE_PORT))
        .await
        .unwrap();
    let standin = standin(&client, &ns, RACE_PORT).await;
    // The pause ends, the write comes: it must not land on their Service, and no key may go.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let now = services.get("terdut").await.unwrap();
    assert_eq!(
        fingerprint(&now),
        fingerprint(&theirs),
        "their Service was written over"
    );
    assert_eq!(standin.admin().calls().await.unwrap().total(), 0);

    let (status, message) = wait_condition(&servers, "terdut", "Ready", "ResourceNotOwned").await;
    assert_eq!(status, "False");
    assert!(message.contains("Service terdut"), "{message}");
    wait_condition(&servers, "terdut", "KeyAccepted", "KeyWithheld").await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    // Their Service is byte for byte theirs: no apply landed on it, no owner reference of the
    // server, their selector alone; and the key went nowhere.
    let now = services.get("terdut").await.unwrap();
    assert_eq!(fingerprint(&now), fingerprint(&theirs));
    assert_eq!(standin.admin().calls().await.unwrap().total(), 0);
}

#[tokio::test]
async fn the_operators_service_replaced_by_a_foreign_one_withdraws_the_key() {
    let (_cp, client, ns, op) = setup("key-replaced").await;
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    servers
        .create(
            &PostParams::default(),
            &test_server("terdut", i32::from(REPLACED_PORT)),
        )
        .await
        .unwrap();
    let standin = standin(&client, &ns, REPLACED_PORT).await;
    let teams = a_team(&client, &ns).await;
    wait_reason(&teams, "oncall", "Ready").await;
    wait_condition(&servers, "terdut", "KeyAccepted", "Accepted").await;

    // The attack: the operator's Service goes, an ExternalName under its name comes. (The
    // test hook holds the server's re-create for 3 s, so the attacker's create is not the
    // one refused; the operator's is, by its precondition, either way.)
    servers
        .patch(
            "terdut",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"annotations": {
                "terdut.ryuvia.com/test-pause-before-apply": "3000"}}})),
        )
        .await
        .unwrap();
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    services
        .delete("terdut", &DeleteParams::default())
        .await
        .unwrap();
    let theirs = services
        .create(&PostParams::default(), &external_name("terdut"))
        .await
        .unwrap();

    wait_condition(&servers, "terdut", "Ready", "ResourceNotOwned").await;
    // From now on no key goes out: not the server's whoami, not the team's calls.
    standin.admin().reset_calls().await.unwrap();
    teams::resync(op, &ns, "oncall").await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let calls = standin.admin().calls().await.unwrap();
    assert_eq!(calls.total(), 0, "the key still went out: {calls:?}");
    let (_, message) = wait_condition(&servers, "terdut", "KeyAccepted", "KeyWithheld").await;
    assert!(message.contains("Service terdut"), "{message}");
    teams::resync(op, &ns, "oncall").await;
    let t = wait_reason(&teams, "oncall", "WaitingForServer").await;
    assert!(
        teams::ready(&t)
            .unwrap()
            .2
            .contains("not sent the operator key"),
        "{:?}",
        teams::ready(&t)
    );
    // From now on the key is sent nowhere: the team's next passes and the server's make no
    // call, and their Service is left as they made it.
    standin.admin().reset_calls().await.unwrap();
    teams::resync(op, &ns, "oncall").await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let calls = standin.admin().calls().await.unwrap();
    assert_eq!(calls.total(), 0, "{calls:?}");
    assert_eq!(
        fingerprint(&services.get("terdut").await.unwrap()),
        fingerprint(&theirs)
    );
}
