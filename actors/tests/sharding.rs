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
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
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
const PORT_F: u16 = 19786;
const PORT_G: u16 = 19787;
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

/// The records the shards share (ADR 0013) are read again for an object another shard may have
/// recorded: one that carries the finalizer. Shard "lost-b" loads its records first; then
/// "lost-a" creates the team (its record written after b's load), stops, and the team, its
/// status lost, moves to "lost-b". b's first pass has no id to go by, finds the team by its
/// `external_id`, and must know from a's record that this object made it: Ready on the same
/// team, not `Adopted`.
#[tokio::test]
async fn a_team_moved_to_another_shard_with_its_status_lost_finds_its_own_team() {
    let cp = ControlPlane::shared().await.unwrap();
    let client = cp.client().await.unwrap();
    let ns = cp.namespace(&client, "lost-status").await.unwrap();
    let shard = |name: &'static str| {
        move |c: &mut terdut_actors::context::OperatorConfig| {
            c.instance_name = name.into();
            c.selector = Some(format!("{SHARD}={name}"));
        }
    };
    let a = operator_with(cp, shard("lost-a")).await;
    let b = operator_with(cp, shard("lost-b")).await;
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    let teams: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    // A server of `shard` with its stand-in, and a team on it, Ready.
    let ready_team = async |server: &str, port: u16, name: &str, shard: &str| {
        servers
            .create(
                &PostParams::default(),
                &labelled(test_server(server, i32::from(port)), shard),
            )
            .await
            .unwrap();
        let standin = standin_for(&client, &ns, server, port).await;
        teams
            .create(&PostParams::default(), &labelled(team(name, server), shard))
            .await
            .unwrap();
        ready(&teams, name).await;
        standin
    };

    // Shard b answers a records question (and so loads them) before shard a records "moved".
    let _standin_b = ready_team("sb", PORT_F, "warm", "lost-b").await;
    let standin_a = ready_team("sa", PORT_G, "moved", "lost-a").await;
    let id = teams.get("moved").await.unwrap().status.unwrap().team_id;
    assert!(id.is_some());

    // Shard a goes away; the status is lost; the server and the team move to shard b.
    a.stop().await;
    teams
        .patch_status(
            "moved",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"teamID": null, "conditions": []}})),
        )
        .await
        .unwrap();
    relabel(&servers, "sa", "lost-b").await;
    relabel(&teams, "moved", "lost-b").await;

    let back = eventually("moved Ready again under shard b", WAIT, || async {
        let t = teams.get("moved").await.ok()?;
        let st = t.status?;
        let ready = st
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        (ready && st.team_id.is_some()).then_some(st.team_id)
    })
    .await;
    assert_eq!(back, id, "the same team, found by its external_id");
    assert!(
        event_notes(&client, &ns, "moved", "Adopted")
            .await
            .is_empty(),
        "shard b declined a team this object made"
    );
    let state = standin_a.admin().state().await.unwrap();
    assert_eq!(
        state
            .teams
            .iter()
            .filter(|t| t.external_id == format!("{ns}/moved"))
            .count(),
        1
    );
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

const PORT_D: u16 = 19783;
const PORT_E: u16 = 19784;
const FINALIZER: &str = "terdut.ryuvia.com/team-cleanup";

/// `(reason, message)` of the team's Ready condition, once it has `reason`.
async fn wait_team_reason(api: &Api<TerdutTeam>, name: &str, reason: &str) -> String {
    eventually(&format!("team {name} {reason}"), WAIT, || async {
        let t = api.get(name).await.ok()?;
        t.status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Ready" && c.reason == reason)
            .map(|c| c.message)
    })
    .await
}

async fn gone(api: &Api<TerdutTeam>, name: &str) {
    eventually(&format!("{name} gone"), WAIT, || async {
        api.get_opt(name).await.unwrap().is_none().then_some(())
    })
    .await
}

/// The notes of the Events of `reason` about `name`.
async fn event_notes(client: &kube::Client, ns: &str, name: &str, reason: &str) -> Vec<String> {
    Api::<k8s_openapi::api::events::v1::Event>::namespaced(client.clone(), ns)
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter(|e| e.reason.as_deref() == Some(reason))
        .map(|e| e.note.unwrap_or_default())
        .collect()
}

fn with_finalizer(mut t: TerdutTeam) -> TerdutTeam {
    t.metadata.finalizers = Some(vec![FINALIZER.into()]);
    t
}

#[tokio::test]
async fn a_team_whose_server_is_another_shards_says_so_and_its_deletion_ends() {
    let cp = ControlPlane::shared().await.unwrap();
    let client = cp.client().await.unwrap();
    let ns = cp.namespace(&client, "not-mine").await.unwrap();
    let shard = |s: &str| format!("{SHARD}=not-mine-{s}");
    let a = operator_with(cp, |c| c.selector = Some(shard("a"))).await;
    let b = operator_with(cp, |c| c.selector = Some(shard("b"))).await;
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    servers
        .create(
            &PostParams::default(),
            &labelled(test_server("sb", i32::from(PORT_D)), "not-mine-b"),
        )
        .await
        .unwrap();
    let standin = standin_for(&client, &ns, "sb", PORT_D).await;
    let teams: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);

    // A team of shard a naming shard b's server, with the finalizer set by hand: deleting it
    // ends (it never made anything there), however far its first pass got.
    teams
        .create(
            &PostParams::default(),
            &with_finalizer(labelled(team("stray", "sb"), "not-mine-a")),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    teams
        .delete("stray", &DeleteParams::default())
        .await
        .unwrap();
    gone(&teams, "stray").await;

    // A team shard b made, relabelled into shard a: shard a cannot delete it on the server
    // and shard b no longer sees the object, so its deletion ends with a Warning saying what
    // is left there.
    teams
        .create(
            &PostParams::default(),
            &labelled(team("moved", "sb"), "not-mine-b"),
        )
        .await
        .unwrap();
    ready(&teams, "moved").await;
    relabel(&teams, "moved", "not-mine-a").await;
    // Shard a says the server exists but is not its own, rather than "does not exist".
    let message = wait_team_reason(&teams, "moved", "ServerNotReconciled").await;
    assert!(
        message.contains(&format!("--selector {}", shard("a"))),
        "{message}"
    );
    teams
        .delete("moved", &DeleteParams::default())
        .await
        .unwrap();
    gone(&teams, "moved").await;
    let notes = event_notes(&client, &ns, "moved", "TeamLeftOnServer").await;
    assert!(
        notes
            .iter()
            .any(|n| n.contains("not reconciled by this operator instance")),
        "{notes:?}"
    );
    let state = standin.admin().state().await.unwrap();
    assert!(state.team_by_external_id(&format!("{ns}/moved")).is_some());
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn a_team_whose_server_is_outside_the_watched_namespaces_says_so_and_its_deletion_ends() {
    let cp = ControlPlane::shared().await.unwrap();
    let client = cp.client().await.unwrap();
    let watched = cp.namespace(&client, "watched").await.unwrap();
    let elsewhere = cp.namespace(&client, "elsewhere").await.unwrap();
    let op = operator_with(cp, |c| {
        c.watch_namespaces = vec![watched.clone()];
        // Only this test's objects: the other tests' operators run in this binary too.
        c.selector = Some(format!("{SHARD}=scoped"));
    })
    .await;
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &elsewhere);
    servers
        .create(
            &PostParams::default(),
            &labelled(test_server("terdut", i32::from(PORT_E)), "scoped"),
        )
        .await
        .unwrap();
    let teams: Api<TerdutTeam> = Api::namespaced(client.clone(), &watched);
    let elsewhere_team = |name: &str| {
        let mut t = labelled(team(name, "terdut"), "scoped");
        t.spec.server_ref.namespace = Some(elsewhere.clone());
        t
    };
    // With the finalizer set by hand: its deletion ends.
    teams
        .create(&PostParams::default(), &with_finalizer(elsewhere_team("t")))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    teams.delete("t", &DeleteParams::default()).await.unwrap();
    gone(&teams, "t").await;
    // And it says why nothing happens, rather than "does not exist".
    teams
        .create(&PostParams::default(), &elsewhere_team("u"))
        .await
        .unwrap();
    let message = wait_team_reason(&teams, "u", "ServerNotReconciled").await;
    assert!(
        message.contains(&format!("namespace {elsewhere}"))
            && message.contains("--watch-namespaces"),
        "{message}"
    );
    op.stop().await;
}

/// The sum of `reconciles_total` of `kind` in a registry.
fn passes(registry: &prometheus_client::registry::Registry, kind: &str) -> f64 {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    text.lines()
        .filter(|l| l.starts_with(&format!("reconciles_total{{kind=\"{kind}\"")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn overlapping_shards_leave_an_object_both_select_to_one_of_them() {
    let cp = ControlPlane::shared().await.unwrap();
    let client = cp.client().await.unwrap();
    let ns = cp.namespace(&client, "overlap").await.unwrap();
    let tier = format!("tier-{ns}");
    let kubeconfig = cp.operator_kubeconfig();
    let start = |name: &'static str, selector: String| {
        let mut config = test_config();
        config.instance_name = name.into();
        config.selector = Some(selector);
        start_operator(&kubeconfig, config)
    };
    // Two shards whose selectors a label can join: a shard label, and a tier label.
    let (c, _c_metrics) = start("overlap-c", format!("{SHARD}=overlap")).await;
    let (d, d_metrics) = start("overlap-d", format!("{tier}=gold")).await;

    let both = |mut o: serde_json::Value| {
        o["metadata"]["labels"] = json!({SHARD: "overlap", tier.as_str(): "gold"});
        o
    };
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    let server = serde_json::to_value(test_server("terdut", 19785)).unwrap();
    servers
        .create(
            &PostParams::default(),
            &serde_json::from_value(both(server)).unwrap(),
        )
        .await
        .unwrap();
    let standin = standin_for(&client, &ns, "terdut", 19785).await;
    let teams: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    let t = serde_json::to_value(team("t", "terdut")).unwrap();
    teams
        .create(
            &PostParams::default(),
            &serde_json::from_value(both(t)).unwrap(),
        )
        .await
        .unwrap();

    // One of them reconciles it (the one whose name sorts first), the other leaves it alone
    // and says so on each object.
    ready(&teams, "t").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        passes(&d_metrics, "team"),
        0.0,
        "overlap-d reconciled the team too"
    );
    assert_eq!(
        passes(&d_metrics, "server"),
        0.0,
        "overlap-d reconciled the server too"
    );
    for name in ["t", "terdut"] {
        let notes = eventually("the SelectedByTwoInstances Event", WAIT, || async {
            let notes = event_notes(&client, &ns, name, "SelectedByTwoInstances").await;
            (!notes.is_empty()).then_some(notes)
        })
        .await;
        assert!(
            notes[0].contains("overlap-c reconciles it")
                && notes[0].contains("overlap-d leaves it alone"),
            "{notes:?}"
        );
    }
    assert_eq!(
        passes(&d_metrics, "team"),
        0.0,
        "overlap-d ran no pass of the team"
    );
    assert_eq!(
        passes(&d_metrics, "server"),
        0.0,
        "overlap-d ran no pass of the server"
    );
    let state = standin.admin().state().await.unwrap();
    assert_eq!(
        state
            .teams
            .iter()
            .filter(|t| t.external_id == format!("{ns}/t"))
            .count(),
        1
    );
    c.stop().await;
    d.stop().await;
}
