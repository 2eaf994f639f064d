//! Sharding and a dynamic scope (docs/configuration.md "Sharding") against a real
//! kube-apiserver and the stand-in: two operators with disjoint `--selector`s each converge
//! only their own objects and never touch the other's; relabelling a server and its team moves
//! them to the other shard, which takes over without a second team on the server; an operator
//! with `--watch-namespace-selector` picks a namespace up when it gains the label and drops it
//! when it loses it. This binary runs its own operators (no shared test operator), all with
//! selectors, so objects other test binaries left behind are never theirs.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{eventually, standin_for, start_operator, test_config, test_server};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use terdut_actors::key::ObjectKey;
use terdut_actors::operator::RunningOperator;
use terdut_actors::routing::ChildKind;
use terdut_crds::v1alpha1::{TerdutServer, TerdutTeam};
use terdut_testenv::ControlPlane;

const WAIT: Duration = Duration::from_secs(60);
const PORT_A: u16 = 19780;
const PORT_B: u16 = 19781;
const PORT_C: u16 = 19782;
const SHARD: &str = "terdut.ryuvia.com/shard";

fn labelled<K: kube::Resource>(mut object: K, shard: &str) -> K {
    object
        .meta_mut()
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(SHARD.into(), shard.into());
    object
}

fn team(name: &str, server: &str) -> TerdutTeam {
    serde_json::from_value(json!({
        "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutTeam",
        "metadata": {"name": name},
        "spec": {"serverRef": {"name": server}, "displayName": name},
    }))
    .unwrap()
}

async fn ready(api: &Api<TerdutTeam>, name: &str) {
    eventually(&format!("team {name} Ready"), WAIT, || async {
        let t = api.get(name).await.ok()?;
        t.status?
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
            .then_some(())
    })
    .await
}

async fn operator_with(
    cp: &ControlPlane,
    tweak: impl FnOnce(&mut terdut_actors::context::OperatorConfig),
) -> RunningOperator {
    let mut config = test_config();
    tweak(&mut config);
    start_operator(&cp.operator_kubeconfig(), config).await.0
}

/// Whether `op` has an actor (running or passive) for the team `key`, and one for its server.
async fn owns(op: &RunningOperator, team: &ObjectKey, server: &ObjectKey) -> (bool, bool) {
    let has_team = op.tree.host_of(ChildKind::Team, team).await.is_some();
    let snap = terdut_actors::supervisor::snapshot(&op.tree.servers(), Duration::from_secs(5))
        .await
        .unwrap();
    (has_team, snap.children.contains_key(server))
}

async fn relabel<K>(api: &Api<K>, name: &str, shard: &str)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {SHARD: shard}}})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn two_shards_split_the_objects_and_a_relabel_moves_them() {
    let cp = ControlPlane::shared().await.unwrap();
    let client = cp.client().await.unwrap();
    let ns = cp.namespace(&client, "shards").await.unwrap();
    let a = operator_with(cp, |c| c.selector = Some(format!("{SHARD}=a"))).await;
    let b = operator_with(cp, |c| c.selector = Some(format!("{SHARD}=b"))).await;

    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    let teams: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    for (server, port, shard) in [("sa", PORT_A, "a"), ("sb", PORT_B, "b")] {
        servers
            .create(
                &PostParams::default(),
                &labelled(test_server(server, i32::from(port)), shard),
            )
            .await
            .unwrap();
    }
    let standin_a = standin_for(&client, &ns, "sa", PORT_A).await;
    let _standin_b = standin_for(&client, &ns, "sb", PORT_B).await;
    for (name, server, shard) in [("ta", "sa", "a"), ("tb", "sb", "b")] {
        teams
            .create(&PostParams::default(), &labelled(team(name, server), shard))
            .await
            .unwrap();
    }
    ready(&teams, "ta").await;
    ready(&teams, "tb").await;

    let key = |n: &str| ObjectKey::new(ns.clone(), n);
    assert_eq!(owns(&a, &key("ta"), &key("sa")).await, (true, true));
    assert_eq!(owns(&a, &key("tb"), &key("sb")).await, (false, false));
    assert_eq!(owns(&b, &key("tb"), &key("sb")).await, (true, true));
    assert_eq!(owns(&b, &key("ta"), &key("sa")).await, (false, false));

    // Shard a's server and team move to shard b.
    relabel(&servers, "sa", "b").await;
    relabel(&teams, "ta", "b").await;
    eventually("sa and ta under shard b", WAIT, || async {
        (owns(&b, &key("ta"), &key("sa")).await == (true, true)).then_some(())
    })
    .await;
    eventually("shard a lets go of them", WAIT, || async {
        (owns(&a, &key("ta"), &key("sa")).await == (false, false)).then_some(())
    })
    .await;
    // Shard b converges it again (a spec change proves its pass), without a second team.
    teams
        .patch(
            "ta",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"displayName": "moved"}})),
        )
        .await
        .unwrap();
    eventually("the rename by shard b", WAIT, || async {
        let state = standin_a.admin().state().await.ok()?;
        let ours: Vec<_> = state
            .teams
            .iter()
            .filter(|t| t.external_id == format!("{ns}/ta"))
            .collect();
        (ours.len() == 1 && ours[0].name == "moved").then_some(())
    })
    .await;
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn a_namespace_is_picked_up_when_it_gains_the_label_and_dropped_when_it_loses_it() {
    let cp = ControlPlane::shared().await.unwrap();
    let client = cp.client().await.unwrap();
    let ns = cp.namespace(&client, "scope").await.unwrap();
    let selector = format!("terdut.ryuvia.com/scope-{}=yes", ns);
    let label = selector.split_once('=').unwrap().0.to_owned();
    let op = operator_with(cp, |c| c.watch_namespace_selector = Some(selector.clone())).await;

    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    servers
        .create(
            &PostParams::default(),
            &test_server("terdut", i32::from(PORT_C)),
        )
        .await
        .unwrap();
    let teams: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    teams
        .create(&PostParams::default(), &team("t", "terdut"))
        .await
        .unwrap();
    // Not selected: nothing happens to it (no key Secret, no status).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), &ns);
    assert!(
        secrets
            .get_opt("terdut-operator-key")
            .await
            .unwrap()
            .is_none(),
        "an unselected namespace is left alone"
    );
    // The status is the CRD's default (observedGeneration -1, docs/design.md §7): no
    // condition, so the operator wrote nothing.
    let status = teams.get("t").await.unwrap().status.unwrap_or_default();
    assert!(status.conditions.is_empty(), "{status:?}");
    assert_eq!(status.observed_generation, Some(-1), "{status:?}");

    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let label_ns = |value: Option<&str>| {
        let namespaces = namespaces.clone();
        let (ns, label) = (ns.clone(), label.clone());
        let value = value.map(str::to_owned);
        async move {
            namespaces
                .patch(
                    &ns,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"labels": {label: value}}})),
                )
                .await
                .unwrap();
        }
    };
    label_ns(Some("yes")).await;
    let _standin = standin_for(&client, &ns, "terdut", PORT_C).await;
    ready(&teams, "t").await;
    let key = ObjectKey::new(ns.clone(), "t");
    assert!(op.tree.host_of(ChildKind::Team, &key).await.is_some());

    // The label goes: the namespace's actors stop (nothing is deleted).
    label_ns(None).await;
    eventually("the namespace dropped", WAIT, || async {
        op.tree
            .host_of(ChildKind::Team, &key)
            .await
            .is_none()
            .then_some(())
    })
    .await;
    assert!(
        teams.get("t").await.is_ok(),
        "the object itself is untouched"
    );
    op.stop().await;
}

#[tokio::test]
async fn a_selector_the_api_server_refuses_stops_the_operator_before_it_starts() {
    let cp = ControlPlane::shared().await.unwrap();
    let kc = kube::config::Kubeconfig::read_from(cp.operator_kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    terdut_actors::api::init_tls();
    for (flag, tweak) in [
        (
            "--selector",
            Box::new(|c: &mut terdut_actors::context::OperatorConfig| {
                c.selector = Some("shard in (a".into())
            }) as Box<dyn Fn(&mut _)>,
        ),
        (
            "--watch-namespace-selector",
            Box::new(|c: &mut terdut_actors::context::OperatorConfig| {
                c.watch_namespace_selector = Some("!!".into())
            }),
        ),
    ] {
        let mut operator_config = test_config();
        tweak(&mut operator_config);
        let clients =
            terdut_actors::kube_clients::KubeClients::from_config(config.clone()).unwrap();
        let mut registry = prometheus_client::registry::Registry::default();
        let started = terdut_actors::operator::start(
            clients,
            terdut_actors::operator::Metrics::register(&mut registry),
            terdut_actors::operator::StartOptions {
                config: operator_config,
                restart_policy: common::test_policy(),
                clock: std::sync::Arc::new(terdut_actors::clock::SystemClock),
                instance: "test".into(),
                health: Default::default(),
                faults: Default::default(),
            },
        )
        .await;
        let Err(e) = started else {
            panic!("{flag}: a refused selector must not start");
        };
        let e = format!("{e:#}");
        assert!(e.contains(flag) && e.contains("refused"), "{e}");
    }
}
