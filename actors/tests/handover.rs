//! A new leader changes nothing a user sees (docs/adr/0018-upgrades-that-change-nothing.md),
//! against a real kube-apiserver and the stand-in. One operator converges a TerdutServer, a
//! team in its namespace, a team in another namespace that the server admits by a namespace
//! selector, and an alert source for each; it stops, and a second operator starts on the same
//! objects, as a new leader does after a handover, a crash or an upgrade. Watched from before
//! its start until it has been through every object: no TerdutTeam or TerdutAlertSource
//! leaves Ready, not even for a moment, and nothing is written to the server.
//!
//! A new leader used to judge its first passes from caches that had not listed yet (a
//! source's team not found, a namespace's labels unknown: `TeamNotFound`, `RefNotPermitted`)
//! and from a server actor before its first pass ("no operator key yet": `WaitingForServer`),
//! and wrote Ready=False for objects that were fine, on every handover and upgrade.
//!
//! This binary runs its own operators (no shared test operator).

mod common;
mod source_fixture;
mod teams;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{eventually, server_with_standin, start_operator, test_config};
use futures::StreamExt as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt as _};
use serde_json::json;
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutTeam};
use terdut_testenv::ControlPlane;

const PORT: u16 = 19797;
const LABEL: &str = "terdut.ryuvia.com/allowed-server";
const WAIT: Duration = Duration::from_secs(60);

fn ready_of(conditions: &[Condition]) -> Result<(), String> {
    match conditions.iter().find(|c| c.type_ == "Ready") {
        Some(c) if c.status == "True" => Ok(()),
        Some(c) => Err(format!("Ready={} {}: {}", c.status, c.reason, c.message)),
        None => Err("no Ready condition".into()),
    }
}

/// Every moment an object of kind `K` was seen not Ready, from its watch's first list on.
/// Resolves once that list is in (everything seen before the second operator starts).
async fn watch_ready<K>(
    client: &kube::Client,
    ns: &[String],
    seen: Arc<Mutex<Vec<String>>>,
    conditions: fn(&K) -> Vec<Condition>,
) -> tokio::task::JoinHandle<()>
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let api = Api::<K>::all(client.clone());
    let ns = ns.to_vec();
    let (listed_tx, listed) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let mut listed_tx = Some(listed_tx);
        let mut events = std::pin::pin!(watcher(api, watcher::Config::default()));
        while let Some(event) = events.next().await {
            let obj = match event {
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => o,
                Ok(watcher::Event::InitDone) => {
                    if let Some(tx) = listed_tx.take() {
                        let _ = tx.send(());
                    }
                    continue;
                }
                _ => continue,
            };
            let namespace = obj.namespace().unwrap_or_default();
            if !ns.contains(&namespace) || obj.meta().deletion_timestamp.is_some() {
                continue;
            }
            if let Err(why) = ready_of(&conditions(&obj)) {
                seen.lock().unwrap().push(format!(
                    "{} {namespace}/{}: {why}",
                    K::kind(&()),
                    obj.name_any()
                ));
            }
        }
    });
    listed.await.expect("the watch listed");
    task
}

/// Passes the operator has made of objects of `kind` (`""`: every kind), every outcome,
/// from its metrics.
fn passes(registry: &prometheus_client::registry::Registry, kind: &str) -> f64 {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    let prefix = match kind {
        "" => "reconciles_total{".to_owned(),
        kind => format!(r#"reconciles_total{{kind="{kind}","#),
    };
    text.lines()
        .filter(|l| l.starts_with(&prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn a_new_leader_writes_no_ready_false_and_nothing_to_the_server() {
    let cp = ControlPlane::shared().await.unwrap();
    let client = cp.client().await.unwrap();
    let ns = cp.namespace(&client, "handover").await.unwrap();
    let visitors = format!("{ns}-teams");
    cp.create_namespace(
        &client,
        &visitors,
        BTreeMap::from([(LABEL.to_owned(), "yes".to_owned())]),
    )
    .await
    .unwrap();
    let kubeconfig = cp.operator_kubeconfig();

    let (first, _) = start_operator(&kubeconfig, test_config()).await;
    let standin = server_with_standin(&client, &ns, "terdut", PORT).await;
    teams::allow(
        &client,
        &ns,
        "terdut",
        json!({"from": "Selector", "selector": {"matchLabels": {LABEL: "yes"}}}),
    )
    .await;
    let home: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    let away: Api<TerdutTeam> = Api::namespaced(client.clone(), &visitors);
    let server = json!({"name": "terdut", "namespace": ns});
    teams::create(
        &home,
        &teams::team("home", server.clone(), "Home", json!({})),
    )
    .await;
    teams::create(&away, &teams::team("visitor", server, "Visitor", json!({}))).await;
    for (namespace, team) in [(&ns, "home"), (&visitors, "visitor")] {
        source_fixture::sources(&client, namespace)
            .create(
                &PostParams::default(),
                &source_fixture::source(&format!("{team}-alerts"), team, "alertmanager", "Alerts"),
            )
            .await
            .unwrap();
    }
    teams::wait_reason(&home, "home", "Ready").await;
    teams::wait_reason(&away, "visitor", "Ready").await;
    for (namespace, team) in [(&ns, "home"), (&visitors, "visitor")] {
        source_fixture::wait_reason(&client, namespace, &format!("{team}-alerts"), "Ready").await;
    }
    first.stop().await;

    let seen = Arc::new(Mutex::new(vec![]));
    let namespaces = [ns.clone(), visitors.clone()];
    let watches = [
        watch_ready::<TerdutTeam>(&client, &namespaces, seen.clone(), |t| {
            t.status
                .as_ref()
                .map(|s| s.conditions.clone())
                .unwrap_or_default()
        })
        .await,
        watch_ready::<TerdutAlertSource>(&client, &namespaces, seen.clone(), |s| {
            s.status
                .as_ref()
                .map(|s| s.conditions.clone())
                .unwrap_or_default()
        })
        .await,
    ];
    assert!(
        seen.lock().unwrap().is_empty(),
        "not everything was Ready before the second operator started: {:?}",
        seen.lock().unwrap()
    );
    let admin = standin.admin();
    admin.reset_calls().await.unwrap();

    // The new leader, through a pass of every object (the server, two teams, two sources),
    // then a moment for whatever those passes start.
    let (second, registry) = start_operator(&kubeconfig, test_config()).await;
    eventually(
        "the new leader through a pass of every object",
        WAIT,
        || async { (passes(&registry, "") >= 5.0).then_some(()) },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    for w in &watches {
        w.abort();
    }
    let calls = admin.calls().await.unwrap();
    let (team_passes, source_passes) = (passes(&registry, "team"), passes(&registry, "source"));
    second.stop().await;

    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.is_empty(),
        "the new leader wrote {} statuses that are not Ready: {seen:#?}",
        seen.len()
    );
    assert_eq!(
        calls.writes(),
        0,
        "the new leader wrote to the server: {calls:?}"
    );
    assert!(calls.total() > 0, "the new leader never asked the server");
    // One pass each: the server actor's first pass answers the questions it held, and
    // nudges nobody for credentials its children already heard (a second pass of every
    // child, and its server calls, on every handover).
    assert_eq!(
        (team_passes, source_passes),
        (2.0, 2.0),
        "passes of the two teams and the two sources; calls {calls:?}"
    );
}
