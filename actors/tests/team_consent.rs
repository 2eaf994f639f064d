//! Cross-namespace consent (docs/design.md §4.6) against a real kube-apiserver and the stand-in:
//! each `allowedTeams.namespaces.from` mode, live revocation (narrowing the server's consent,
//! unlabeling a namespace) that stops changes without deleting the team server-side, its
//! restoration, and the accepted/refused counts on the TerdutServer's status.

mod common;
mod teams;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{eventually, server_with_standin, setup};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use teams::*;
use terdut_crds::v1alpha1::server::TeamCounts;
use terdut_crds::v1alpha1::{TerdutServer, TerdutTeam};

const LABEL: &str = "terdut.ryuvia.com/allowed-server";

/// A second namespace for the consuming teams, with `labels`.
async fn other_namespace(
    cp: &terdut_testenv::ControlPlane,
    client: &kube::Client,
    base: &str,
    labels: &[(&str, &str)],
) -> String {
    let name = format!("{base}-teams");
    let labels: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    cp.create_namespace(client, &name, labels).await.unwrap();
    name
}

async fn wait_counts(client: &kube::Client, ns: &str, want: TeamCounts) {
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), ns);
    eventually(&format!("server team counts {want:?}"), WAIT, || async {
        let s = servers.get("terdut").await.unwrap();
        (s.status.and_then(|st| st.teams) == Some(want.clone())).then_some(())
    })
    .await;
}

/// Waits until the server counts `visitor` refused, renames it, and waits until it is refused
/// again; the caller checks that the server kept the old name.
async fn rename_while_refused(client: &kube::Client, ns: &str, remote: &Api<TerdutTeam>) {
    wait_counts(
        client,
        ns,
        TeamCounts {
            accepted: 0,
            refused: 1,
        },
    )
    .await;
    patch_spec(remote, "visitor", json!({"displayName": "Visitor Renamed"})).await;
    wait_reason(remote, "visitor", "RefNotPermitted").await;
}

fn to(server_ns: &str) -> serde_json::Value {
    json!({"name": "terdut", "namespace": server_ns})
}

#[tokio::test]
async fn none_refuses_other_namespaces_and_same_namespace_is_always_allowed() {
    let (cp, client, ns, _) = setup("consent-none").await;
    let standin = server_with_standin(&client, &ns, "terdut", 19630).await;
    let other = other_namespace(cp, &client, &ns, &[]).await;

    let local: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    create(
        &local,
        &team("home", json!({"name": "terdut"}), "Home", json!({})),
    )
    .await;
    wait_reason(&local, "home", "Ready").await;

    let remote: Api<TerdutTeam> = Api::namespaced(client.clone(), &other);
    create(&remote, &team("visitor", to(&ns), "Visitor", json!({}))).await;
    let t = wait_reason(&remote, "visitor", "RefNotPermitted").await;
    let (_, _, message) = ready(&t).unwrap();
    assert!(
        message.contains(&format!("{ns}/terdut")) && message.contains(&other),
        "{message}"
    );
    assert!(t.metadata.finalizers.is_none());
    assert!(
        on_server(&standin, &format!("{other}/visitor"))
            .await
            .is_none()
    );
    wait_event(&client, &other, "visitor", "RefNotPermitted").await;
    wait_counts(
        &client,
        &ns,
        TeamCounts {
            accepted: 1,
            refused: 1,
        },
    )
    .await;
}

#[tokio::test]
async fn same_admits_only_the_servers_own_namespace() {
    let (cp, client, ns, _) = setup("consent-same").await;
    let standin = server_with_standin(&client, &ns, "terdut", 19631).await;
    allow(&client, &ns, "terdut", json!({"from": "Same"})).await;
    let other = other_namespace(cp, &client, &ns, &[]).await;
    let local: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    create(
        &local,
        &team("home", json!({"name": "terdut"}), "Home", json!({})),
    )
    .await;
    wait_reason(&local, "home", "Ready").await;
    let remote: Api<TerdutTeam> = Api::namespaced(client.clone(), &other);
    create(&remote, &team("visitor", to(&ns), "Visitor", json!({}))).await;
    wait_reason(&remote, "visitor", "RefNotPermitted").await;
    assert!(
        on_server(&standin, &format!("{other}/visitor"))
            .await
            .is_none()
    );
}

#[tokio::test]
async fn all_admits_every_namespace_and_narrowing_it_revokes_live() {
    let (cp, client, ns, op) = setup("consent-all").await;
    let standin = server_with_standin(&client, &ns, "terdut", 19632).await;
    allow(&client, &ns, "terdut", json!({"from": "All"})).await;
    let other = other_namespace(cp, &client, &ns, &[]).await;
    let remote: Api<TerdutTeam> = Api::namespaced(client.clone(), &other);
    create(&remote, &team("visitor", to(&ns), "Visitor", json!({}))).await;
    let id = team_id(&wait_reason(&remote, "visitor", "Ready").await);
    let external_id = format!("{other}/visitor");
    wait_counts(
        &client,
        &ns,
        TeamCounts {
            accepted: 1,
            refused: 0,
        },
    )
    .await;

    // Narrowed to None: the next pass is refused; the team stays on the server, unchanged.
    allow(&client, &ns, "terdut", json!({"from": "None"})).await;
    let t = wait_reason(&remote, "visitor", "RefNotPermitted").await;
    assert_eq!(team_id(&t), id, "the team's id is kept");
    rename_while_refused(&client, &ns, &remote).await;
    let calls_before = standin.admin().calls().await.unwrap().total();
    resync(op, &other, "visitor").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let s = on_server(&standin, &external_id).await.unwrap();
    assert_eq!((s.id, s.name.as_str()), (id, "Visitor"));
    assert_eq!(
        standin.admin().calls().await.unwrap().total(),
        calls_before,
        "a refused team makes no calls at all"
    );

    // Restored: the pending change is applied.
    allow(&client, &ns, "terdut", json!({"from": "All"})).await;
    let t = wait_reason(&remote, "visitor", "Ready").await;
    assert_eq!(team_id(&t), id);
    assert_eq!(
        on_server(&standin, &external_id).await.unwrap().name,
        "Visitor Renamed"
    );
}

#[tokio::test]
async fn selector_follows_namespace_labels_live() {
    let (cp, client, ns, _) = setup("consent-sel").await;
    let standin = server_with_standin(&client, &ns, "terdut", 19633).await;
    allow(
        &client,
        &ns,
        "terdut",
        json!({"from": "Selector", "selector": {"matchLabels": {LABEL: "yes"}}}),
    )
    .await;
    let labeled = other_namespace(cp, &client, &ns, &[(LABEL, "yes")]).await;
    let remote: Api<TerdutTeam> = Api::namespaced(client.clone(), &labeled);
    create(&remote, &team("visitor", to(&ns), "Visitor", json!({}))).await;
    let id = team_id(&wait_reason(&remote, "visitor", "Ready").await);
    let external_id = format!("{labeled}/visitor");
    wait_counts(
        &client,
        &ns,
        TeamCounts {
            accepted: 1,
            refused: 0,
        },
    )
    .await;

    // Unlabeling the namespace revokes consent at the team's next pass (the label change
    // nudges it), and changes stop without the team being deleted.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let label = |value: serde_json::Value| {
        let (namespaces, labeled) = (namespaces.clone(), labeled.clone());
        async move {
            namespaces
                .patch(
                    &labeled,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"labels": {LABEL: value}}})),
                )
                .await
                .unwrap();
        }
    };
    label(serde_json::Value::Null).await;
    let t = wait_reason(&remote, "visitor", "RefNotPermitted").await;
    let (_, _, message) = ready(&t).unwrap();
    assert!(message.contains("labels do not match"), "{message}");
    rename_while_refused(&client, &ns, &remote).await;
    let s = on_server(&standin, &external_id).await.unwrap();
    assert_eq!((s.id, s.name.as_str()), (id, "Visitor"));

    // Labeled again: Ready, with the change made meanwhile.
    label(json!("yes")).await;
    let t = wait_reason(&remote, "visitor", "Ready").await;
    assert_eq!(team_id(&t), id);
    assert_eq!(
        on_server(&standin, &external_id).await.unwrap().name,
        "Visitor Renamed"
    );
    wait_counts(
        &client,
        &ns,
        TeamCounts {
            accepted: 1,
            refused: 0,
        },
    )
    .await;
}
