//! The supervision tree as the card draws it (ADR 0008), against a real kube-apiserver and the
//! stand-in: a team or alert source lives under its TerdutServer's actor once that server
//! exists and accepts it, and under the holding host until then; a server actor's crash
//! restarts its own children once and nobody else's; a child's crash touches no sibling.

mod common;
mod teams;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{TestOperator, eventually, server_with_standin, setup};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use teams::{WAIT, team, wait_reason};
use terdut_actors::key::ObjectKey;
use terdut_actors::routing::ChildKind;
use terdut_actors::server::TEST_FAULT_ANNOTATION;
use terdut_actors::source::hooks::CRASH_AFTER_CREATE;
use terdut_actors::supervisor::snapshot;
use terdut_actors::tree::writer::HostRef;
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutServer, TerdutTeam};

const HOLD_PORT: u16 = 19740;
const CONSENT_PORT: u16 = 19741;
const CRASH_PORTS: [u16; 2] = [19742, 19743];
const CHILD_CRASH_PORT: u16 = 19744;

/// Where the actor of `kind` `key` lives, once the operator knows the object.
async fn host(op: &TestOperator, kind: ChildKind, key: &ObjectKey) -> HostRef {
    eventually(&format!("a host for {key}"), WAIT, || async {
        op.tree.host_of(kind, key).await
    })
    .await
}

/// Waits until `key` lives under the actor of TerdutServer `server`; returns that host.
async fn under_server(
    op: &TestOperator,
    kind: ChildKind,
    key: &ObjectKey,
    server: &ObjectKey,
) -> HostRef {
    under_server_other_than(op, kind, key, server, None).await
}

/// As [`under_server`], and the host is not the actor `old` (a restarted server's new one).
async fn under_server_other_than(
    op: &TestOperator,
    kind: ChildKind,
    key: &ObjectKey,
    server: &ObjectKey,
    old: Option<&HostRef>,
) -> HostRef {
    eventually(&format!("{key} under {server}"), WAIT, || async {
        let actor = op.tree.registry.get(server).map(|a| a.get_id())?;
        op.tree.host_of(kind, key).await.filter(|h| {
            matches!(h, HostRef::Server(_))
                && h.id() == actor
                && old.is_none_or(|o| o.id() != h.id())
        })
    })
    .await
}

#[tokio::test]
async fn a_team_without_its_server_waits_under_holding_and_moves_under_it_when_it_appears() {
    let (_, client, ns, op) = setup("tree-hold").await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    api.create(
        &PostParams::default(),
        &team("a", json!({"name": "terdut"}), "A", json!({})),
    )
    .await
    .unwrap();
    let key = ObjectKey::new(ns.clone(), "a");
    let waiting = wait_reason(&api, "a", "ServerRefNotFound").await;
    let (_, _, message) = teams::ready(&waiting).unwrap();
    assert!(message.contains("terdut"), "{message}");
    assert!(
        matches!(host(op, ChildKind::Team, &key).await, HostRef::Holding(_)),
        "held while its server does not exist"
    );

    let standin = server_with_standin(&client, &ns, "terdut", HOLD_PORT).await;
    let server = ObjectKey::new(ns.clone(), "terdut");
    under_server(op, ChildKind::Team, &key, &server).await;
    wait_reason(&api, "a", "Ready").await;
    let on_server = teams::on_server(&standin, &format!("{ns}/a")).await;
    assert!(on_server.is_some(), "the team exists on the server");
}

#[tokio::test]
async fn a_refused_team_waits_under_holding_and_moves_when_its_server_consents() {
    let (cp, client, ns, op) = setup("tree-consent").await;
    let _standin = server_with_standin(&client, &ns, "terdut", CONSENT_PORT).await;
    let tenant = format!("{ns}-t");
    cp.create_namespace(&client, &tenant, BTreeMap::new())
        .await
        .unwrap();
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &tenant);
    api.create(
        &PostParams::default(),
        &team(
            "visitor",
            json!({"name": "terdut", "namespace": ns}),
            "Visitor",
            json!({}),
        ),
    )
    .await
    .unwrap();
    let key = ObjectKey::new(tenant.clone(), "visitor");
    wait_reason(&api, "visitor", "RefNotPermitted").await;
    assert!(matches!(
        host(op, ChildKind::Team, &key).await,
        HostRef::Holding(_)
    ));

    teams::allow(&client, &ns, "terdut", json!({"from": "All"})).await;
    under_server(
        op,
        ChildKind::Team,
        &key,
        &ObjectKey::new(ns.clone(), "terdut"),
    )
    .await;
    wait_reason(&api, "visitor", "Ready").await;

    // Consent withdrawn: back under holding, refused, and the team is left on the server.
    teams::allow(&client, &ns, "terdut", json!({"from": "Same"})).await;
    wait_reason(&api, "visitor", "RefNotPermitted").await;
    eventually("the visitor back under holding", WAIT, || async {
        matches!(
            op.tree.host_of(ChildKind::Team, &key).await,
            Some(HostRef::Holding(_))
        )
        .then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_crashed_server_actor_restarts_its_children_once_and_touches_no_other_server() {
    let (_, client, ns, op) = setup("tree-crash").await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    let mut standins = vec![];
    for (name, port) in ["one", "two"].iter().zip(CRASH_PORTS) {
        standins.push(server_with_standin(&client, &ns, name, port).await);
        api.create(
            &PostParams::default(),
            &team(
                &format!("team-{name}"),
                json!({"name": name}),
                name,
                json!({}),
            ),
        )
        .await
        .unwrap();
    }
    let (one, two) = (
        ObjectKey::new(ns.clone(), "one"),
        ObjectKey::new(ns.clone(), "two"),
    );
    let (team_one, team_two) = (
        ObjectKey::new(ns.clone(), "team-one"),
        ObjectKey::new(ns.clone(), "team-two"),
    );
    for name in ["team-one", "team-two"] {
        wait_reason(&api, name, "Ready").await;
    }
    let before_one = under_server(op, ChildKind::Team, &team_one, &one).await;
    let before_two = under_server(op, ChildKind::Team, &team_two, &two).await;

    // TerdutServer one's actor panics once.
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    servers
        .patch(
            "one",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {TEST_FAULT_ANNOTATION: "panic-once"}}}),
            ),
        )
        .await
        .unwrap();
    eventually("server one restarted", WAIT, || async {
        let snap = snapshot(&op.servers(), Duration::from_secs(5)).await.ok()?;
        (snap.children.get(&one)?.restarts >= 1).then_some(())
    })
    .await;

    // Its team is under the new incarnation, with a history of its own (a restart of the
    // host is not a failure of the child), and converges again without a second team. The
    // supervisor counts the restart before the registry and the team's host name the new
    // actor, so the wait is for a host other than the old one.
    under_server_other_than(op, ChildKind::Team, &team_one, &one, Some(&before_one)).await;
    let child = eventually("team-one's actor adopted", WAIT, || async {
        op.tree.child(ChildKind::Team, &team_one).await
    })
    .await;
    assert_eq!(child.restarts, 0, "{child:?}");
    // Prove a pass of the adopted actor: an edit converges under the new host.
    teams::patch_spec(&api, "team-one", json!({"displayName": "One, again"})).await;
    eventually("the rename on server one", WAIT, || async {
        let t = teams::on_server(&standins[0], &format!("{ns}/team-one")).await?;
        (t.name == "One, again").then_some(())
    })
    .await;
    let state = standins[0].admin().state().await.unwrap();
    assert_eq!(state.teams.len(), 1, "no duplicate team: {:?}", state.teams);

    // The other server and its team were not touched.
    let snap = snapshot(&op.servers(), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(snap.children[&two].restarts, 0);
    let still_two = under_server(op, ChildKind::Team, &team_two, &two).await;
    assert_eq!(
        still_two.id(),
        before_two.id(),
        "server two's actor is the same"
    );
    let sibling = op.tree.child(ChildKind::Team, &team_two).await.unwrap();
    assert_eq!(sibling.restarts, 0);
}

#[tokio::test]
async fn a_childs_crash_touches_neither_its_sibling_nor_its_server() {
    let (_, client, ns, op) = setup("tree-child").await;
    let _standin = server_with_standin(&client, &ns, "terdut", CHILD_CRASH_PORT).await;
    let teams_api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    teams_api
        .create(
            &PostParams::default(),
            &team("platform", json!({"name": "terdut"}), "Platform", json!({})),
        )
        .await
        .unwrap();
    wait_reason(&teams_api, "platform", "Ready").await;
    let server = ObjectKey::new(ns.clone(), "terdut");
    let team_key = ObjectKey::new(ns.clone(), "platform");
    let before = under_server(op, ChildKind::Team, &team_key, &server).await;

    // An alert source of that team crashes once, right after creating its integration.
    let sources: Api<TerdutAlertSource> = Api::namespaced(client.clone(), &ns);
    let source: TerdutAlertSource = serde_json::from_value(json!({
        "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutAlertSource",
        "metadata": {"name": "am", "annotations": {TEST_FAULT_ANNOTATION: CRASH_AFTER_CREATE}},
        "spec": {"teamRef": {"name": "platform"}, "kind": "alertmanager", "name": "prod-am"},
    }))
    .unwrap();
    sources
        .create(&PostParams::default(), &source)
        .await
        .unwrap();
    let source_key = ObjectKey::new(ns.clone(), "am");
    eventually("the source Ready after its crash", WAIT, || async {
        let s = sources.get("am").await.ok()?;
        let ready = s
            .status?
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        ready.then_some(())
    })
    .await;
    let crashed = op
        .tree
        .child(ChildKind::Source, &source_key)
        .await
        .expect("the source's actor");
    assert!(crashed.restarts >= 1, "{crashed:?}");

    // Its sibling and its server are as they were.
    let sibling = op.tree.child(ChildKind::Team, &team_key).await.unwrap();
    assert_eq!(sibling.restarts, 0, "{sibling:?}");
    let now = under_server(op, ChildKind::Team, &team_key, &server).await;
    assert_eq!(now.id(), before.id(), "the server's actor did not restart");
    let snap = snapshot(&op.servers(), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(snap.children[&server].restarts, 0);
}
