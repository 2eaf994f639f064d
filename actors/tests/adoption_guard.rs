//! "Made by this object" is decided from what no tenant can write (ADR 0013), against the real
//! kube-apiserver and the stand-in. The setting of every test: a TerdutTeam made a team and
//! went away with `deletionPolicy: Orphan`, so its team stays on the server under the
//! `external_id` `<namespace>/<name>`; then a newcomer of the same namespace and name tries to
//! reach it the ways a tenant can: a forged `status.teamID`, the operator's finalizer set by
//! hand, and a deletion. Each test asserts what the user sees (`Adopted`, a Warning) and what
//! the server got (no call that changes or deletes the old team).

mod common;
mod teams;

use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use terdut_actors::team::records::TeamRecords;
use terdut_crds::v1alpha1::TerdutTeam;

use common::{OPERATOR_NAMESPACE, eventually, server_with_standin, setup};
use teams::{WAIT, team, team_id, wait_reason};

const FORGED_PORT: u16 = 19810;
const FINALIZER_PORT: u16 = 19811;
const DELETE_PORT: u16 = 19812;
const RECOVERY_PORT: u16 = 19813;

const FINALIZER: &str = "terdut.ryuvia.com/team-cleanup";
const PAUSED: &str = "terdut.ryuvia.com/paused";

/// What every test starts from.
struct Old {
    client: kube::Client,
    standin: terdut_standin::Handle,
    server_ns: String,
    tenant_ns: String,
    id: i64,
}

/// A server accepting every namespace, a tenant namespace, and in it the old team: made, then
/// its object deleted with `deletionPolicy: Orphan`.
async fn an_old_team_left_on_the_server(prefix: &str, port: u16) -> Old {
    let (cp, client, server_ns, op) = setup(prefix).await;
    let standin = server_with_standin(&client, &server_ns, "terdut", port).await;
    teams::allow(&client, &server_ns, "terdut", json!({"from": "All"})).await;
    let tenant_ns = cp.namespace(&client, &format!("{prefix}-t")).await.unwrap();
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &tenant_ns);
    api.create(
        &PostParams::default(),
        &team(
            "payments",
            json!({"name": "terdut", "namespace": server_ns}),
            "Payments",
            json!({"deletionPolicy": "Orphan"}),
        ),
    )
    .await
    .unwrap();
    let old_id = team_id(&wait_reason(&api, "payments", "Ready").await);
    api.delete("payments", &DeleteParams::default())
        .await
        .unwrap();
    gone(&api, "payments").await;
    let _ = op;
    Old {
        client,
        standin,
        server_ns,
        tenant_ns,
        id: old_id,
    }
}

async fn gone(api: &Api<TerdutTeam>, name: &str) {
    eventually(&format!("{name} gone"), WAIT, || async {
        api.get_opt(name).await.unwrap().is_none().then_some(())
    })
    .await
}

/// The newcomer: a new display name and OIDC group, which a takeover would apply to the old
/// team.
fn newcomer(server_ns_of: &str) -> TerdutTeam {
    team(
        "payments",
        json!({"name": "terdut", "namespace": server_ns_of}),
        "Payments EU",
        json!({"oidc": {"memberGroup": "newcomers"}}),
    )
}

async fn forge_status(api: &Api<TerdutTeam>, id: i64) {
    let status = json!({"status": {
        "conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
            "message": "forged", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        "teamID": id,
    }});
    api.patch_status("payments", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

async fn wait_paused(api: &Api<TerdutTeam>) {
    eventually("the newcomer paused", WAIT, || async {
        let s = api.get("payments").await.ok()?.status?;
        s.conditions
            .iter()
            .any(|c| c.type_ == "Paused" && c.status == "True")
            .then_some(())
    })
    .await
}

/// The old team as the server has it: untouched means its name, its groups and its id.
async fn untouched(standin: &terdut_standin::Handle, tenant_ns: &str, old_id: i64) {
    let t = teams::on_server(standin, &format!("{tenant_ns}/payments"))
        .await
        .expect("the old team is still on the server");
    assert_eq!((t.id, t.name.as_str()), (old_id, "Payments"));
    assert_eq!(t.oidc.member_group, None);
}

/// What the user sees: Adopted naming the old team, how to take it over, a Warning, no id and
/// no finalizer (deleting it deletes nothing).
async fn reports_adopted(
    client: &kube::Client,
    api: &Api<TerdutTeam>,
    tenant_ns: &str,
    old_id: i64,
) {
    let t = wait_reason(api, "payments", "Adopted").await;
    let (status, _, message) = teams::ready(&t).unwrap();
    assert_eq!(status, "False");
    assert!(
        message.contains(&format!("team {old_id}")) && message.contains("terdut.ryuvia.com/adopt"),
        "{message}"
    );
    assert_eq!(t.status.as_ref().unwrap().team_id, None);
    assert!(!t.finalizers().iter().any(|f| f == FINALIZER));
    let note = teams::wait_event(client, tenant_ns, "payments", "Adopted").await;
    assert!(note.contains(&old_id.to_string()), "{note}");
}

#[tokio::test]
async fn a_forged_team_id_in_status_takes_nothing_over() {
    let Old {
        client,
        standin,
        server_ns,
        tenant_ns,
        id: old_id,
    } = an_old_team_left_on_the_server("guard-forged", FORGED_PORT).await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &tenant_ns);
    // Paused on creation, so the forged status is in place before the operator's first pass.
    let mut t = newcomer(&server_ns);
    t.metadata.annotations = Some([(PAUSED.to_owned(), "true".to_owned())].into());
    api.create(&PostParams::default(), &t).await.unwrap();
    wait_paused(&api).await;
    forge_status(&api, old_id).await;
    standin.admin().reset_calls().await.unwrap();
    api.patch(
        "payments",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {PAUSED: null}}})),
    )
    .await
    .unwrap();

    reports_adopted(&client, &api, &tenant_ns, old_id).await;
    untouched(&standin, &tenant_ns, old_id).await;
    let calls = standin.admin().calls().await.unwrap();
    assert_eq!(calls.writes(), 0, "{calls:?}");
}

#[tokio::test]
async fn a_self_added_finalizer_takes_nothing_over() {
    let Old {
        client,
        standin,
        server_ns,
        tenant_ns,
        id: old_id,
    } = an_old_team_left_on_the_server("guard-final", FINALIZER_PORT).await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &tenant_ns);
    standin.admin().reset_calls().await.unwrap();
    let mut t = newcomer(&server_ns);
    t.metadata.finalizers = Some(vec![FINALIZER.into()]);
    api.create(&PostParams::default(), &t).await.unwrap();

    reports_adopted(&client, &api, &tenant_ns, old_id).await;
    untouched(&standin, &tenant_ns, old_id).await;
    // The one write is the create-or-find POST, which answered with the old team unchanged.
    let calls = standin.admin().calls().await.unwrap();
    assert_eq!(calls.writes(), calls.get("POST /api/v1/teams"), "{calls:?}");
}

#[tokio::test]
async fn deleting_a_newcomer_with_a_forged_id_and_finalizer_deletes_nothing() {
    let Old {
        client,
        standin,
        server_ns,
        tenant_ns,
        id: old_id,
    } = an_old_team_left_on_the_server("guard-delete", DELETE_PORT).await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &tenant_ns);
    let mut t = newcomer(&server_ns);
    t.metadata.annotations = Some([(PAUSED.to_owned(), "true".to_owned())].into());
    t.metadata.finalizers = Some(vec![FINALIZER.into()]);
    api.create(&PostParams::default(), &t).await.unwrap();
    wait_paused(&api).await;
    forge_status(&api, old_id).await;
    standin.admin().reset_calls().await.unwrap();

    // Deletion cleans up even while paused: the one path that deletes on the server.
    api.delete("payments", &DeleteParams::default())
        .await
        .unwrap();
    gone(&api, "payments").await;
    let calls = standin.admin().calls().await.unwrap();
    assert_eq!(calls.get("DELETE /api/v1/teams/{id}"), 0, "{calls:?}");
    assert_eq!(calls.writes(), 0, "{calls:?}");
    untouched(&standin, &tenant_ns, old_id).await;
}

#[tokio::test]
async fn a_lost_status_still_finds_its_own_team_silently() {
    let (_cp, client, ns, op) = setup("guard-recovery").await;
    let standin = server_with_standin(&client, &ns, "terdut", RECOVERY_PORT).await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    api.create(
        &PostParams::default(),
        &team("payments", json!({"name": "terdut"}), "Payments", json!({})),
    )
    .await
    .unwrap();
    let t = wait_reason(&api, "payments", "Ready").await;
    let id = team_id(&t);
    let uid = t.uid().unwrap();

    // The record is durable, where no tenant writes: a fresh reader (an operator restarted,
    // another instance) finds it.
    let fresh = TeamRecords::new(client.clone(), OPERATOR_NAMESPACE);
    assert_eq!(
        fresh.get(&uid).await.unwrap(),
        terdut_actors::team::guard::Record::Made
    );

    // The status is lost and the actor forgets what it knew, as after a restore and a
    // restart: the POST finds the team, and it is this object's, silently.
    api.patch_status(
        "payments",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"teamID": null, "conditions": null}})),
    )
    .await
    .unwrap();
    op.tree
        .forget(
            terdut_actors::routing::ChildKind::Team,
            &terdut_actors::key::ObjectKey::new(ns.clone(), "payments"),
        )
        .await;
    api.patch(
        "payments",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"test/touch": "1"}}})),
    )
    .await
    .unwrap();
    let t = wait_reason(&api, "payments", "Ready").await;
    assert_eq!(team_id(&t), id);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let events = teams::events(&client, &ns, "payments").await;
    assert!(!events.iter().any(|(_, r, _)| r == "Adopted"), "{events:?}");
    assert_eq!(
        teams::count_on_server(&standin, &format!("{ns}/payments")).await,
        1
    );
}
