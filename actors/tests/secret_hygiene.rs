//! Secret hygiene over a whole lifecycle (docs/reliability.md promise 4;
//! docs/design.md §4.5, §6; terdut-api.md "never appear in a CR's spec or status, a log line or an
//! Event").
//!
//! One TerdutServer (with a PDB) gets its operator key Secret; a TerdutTeam with a ladder and
//! dead man's switches is created, renamed, edited, briefly refers to an unknown user (an error
//! status), and gets a TerdutAlertSource that is renamed, rotated by a kind change and by the
//! rotate annotation. Then the operator key Secret is deleted: the operator mints a second key,
//! rolls the Deployment, and meets 401s from a terdut-server still keyed with the first, until
//! that server restarts (state kept in a data file) with the new key. Then everything is deleted,
//! the server last.
//!
//! Meanwhile every log line of the process (a process-wide subscriber at DEBUG for everything,
//! the operator, kube, hyper, reqwest and rustls included, `log` records bridged; the stand-in
//! itself excluded, as it is not the operator) is captured, and at every step every TerdutServer,
//! TerdutTeam and TerdutAlertSource (status, conditions and all), the Deployment, Service, PDB
//! and ReplicaSets the operator's server made; at the end every Event of the namespace and the
//! operator's metrics (whose labels carry error categories). None may contain either operator
//! key (as text, as base64, or its hex body), any integration key, webhook URL or URL token.
//!
//! The test can fail: a canary secret logged on purpose at DEBUG by an operator target must be
//! found by the same search, every secret searched for is checked non-empty and well-formed,
//! and the Deployment must reference the key through `secretKeyRef` only.

mod common;
mod log_capture;
mod source_fixture;
mod teams;

use std::time::Duration;

use common::{eventually, setup};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use log_capture::capture_logs;
use serde_json::json;
use source_fixture::{
    WAIT, Webhook, annotate, patch_spec as patch_source, sources, wait_event, wait_ready_id,
    wait_webhook,
};
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutServer, TerdutTeam};

const PORT: u16 = 19471;

/// What one secret looks like in the places it must not be.
struct Needle {
    what: String,
    value: String,
}

fn needles_of_operator_key(n: usize, token: &str) -> Vec<Needle> {
    assert!(
        token.starts_with("tdsa_") && token.len() == 53,
        "operator key {n} has the server format (length {})",
        token.len()
    );
    let b64 = serde_json::to_value(ByteString(token.as_bytes().to_vec())).unwrap();
    vec![
        Needle {
            what: format!("operator key {n}"),
            value: token.to_owned(),
        },
        Needle {
            what: format!("operator key {n} (hex body)"),
            value: token[5..].to_owned(),
        },
        Needle {
            what: format!("operator key {n} (base64)"),
            value: b64.as_str().unwrap().to_owned(),
        },
    ]
}

fn needles_of_webhook(n: usize, hook: &Webhook) -> Vec<Needle> {
    let token = hook.token();
    assert!(hook.key.starts_with("tdik_"), "webhook key {n} format");
    assert!(hook.key.len() >= 20, "webhook key {n} non-trivial");
    assert!(token.len() >= 16, "webhook url token {n} non-trivial");
    assert!(hook.url.starts_with("http"), "webhook url {n}");
    vec![
        Needle {
            what: format!("webhook key {n}"),
            value: hook.key.clone(),
        },
        Needle {
            what: format!("webhook key {n} (body)"),
            value: hook.key[5..].to_owned(),
        },
        Needle {
            what: format!("webhook url {n}"),
            value: hook.url.clone(),
        },
        Needle {
            what: format!("webhook url token {n}"),
            value: token,
        },
    ]
}

/// `(needle, place)` of every hit.
fn leaks(needles: &[Needle], places: &[(String, String)]) -> Vec<String> {
    let mut hits = vec![];
    for n in needles {
        for (place, text) in places {
            if text.contains(&n.value) {
                hits.push(format!("{} in {place}", n.what));
            }
        }
    }
    hits
}

/// `prefix` followed by 8+ lowercase hex characters anywhere in `text`.
fn has_prefixed_key(text: &str, prefix: &str) -> bool {
    text.match_indices(prefix).any(|(i, _)| {
        text[i + prefix.len()..]
            .chars()
            .take(8)
            .filter(|c| c.is_ascii_hexdigit())
            .count()
            == 8
    })
}

/// Every object of the namespace that may show a secret by mistake, as JSON, labelled.
async fn snapshot(client: &kube::Client, ns: &str, step: &str, out: &mut Vec<(String, String)>) {
    async fn all<K>(client: &kube::Client, ns: &str, step: &str, out: &mut Vec<(String, String)>)
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned
            + serde::Serialize,
        K::DynamicType: Default,
    {
        let api: Api<K> = Api::namespaced(client.clone(), ns);
        for o in api.list(&ListParams::default()).await.unwrap().items {
            let name = o.meta().name.clone().unwrap_or_default();
            let kind = K::kind(&Default::default()).into_owned();
            out.push((
                format!("{kind} {name} at step {step:?}"),
                serde_json::to_string(&o).unwrap(),
            ));
        }
    }
    all::<TerdutServer>(client, ns, step, out).await;
    all::<TerdutTeam>(client, ns, step, out).await;
    all::<TerdutAlertSource>(client, ns, step, out).await;
    all::<Deployment>(client, ns, step, out).await;
    all::<ReplicaSet>(client, ns, step, out).await;
    all::<Service>(client, ns, step, out).await;
    all::<PodDisruptionBudget>(client, ns, step, out).await;
}

/// The `token` of the operator key Secret, once it is there and differs from `not`.
async fn operator_key(client: &kube::Client, ns: &str, not: Option<&str>) -> String {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    eventually("the operator key Secret", WAIT, || async {
        let s = secrets.get_opt("terdut-operator-key").await.ok()??;
        let token = String::from_utf8(s.data?.get("token")?.0.clone()).ok()?;
        (!token.is_empty() && Some(token.as_str()) != not).then_some(token)
    })
    .await
}

async fn start_standin(key: &str, data_file: &std::path::Path) -> terdut_standin::Handle {
    let mut config = terdut_standin::Config::for_tests().with_operator_key(key.to_owned());
    config.listen = std::net::SocketAddr::from(([127, 0, 0, 1], PORT));
    config.data_file = Some(data_file.to_owned());
    terdut_standin::spawn(config).await.expect("stand-in")
}

/// The Deployment of the server, once it carries the hash of the operator key `hash`-ed from
/// the current Secret (i.e. after the roll for a new key).
async fn deployment_with_hash(client: &kube::Client, ns: &str, not: Option<&str>) -> Deployment {
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    eventually("the server's Deployment", WAIT, || async {
        let d = api.get_opt("terdut").await.ok()??;
        let hash = d
            .spec
            .template
            .metadata
            .as_ref()?
            .annotations
            .as_ref()?
            .get("terdut.ryuvia.com/operator-key-hash")?
            .clone();
        (Some(hash.as_str()) != not).then_some(d)
    })
    .await
}

fn key_hash(d: &Deployment) -> String {
    d.spec
        .template
        .metadata
        .as_ref()
        .unwrap()
        .annotations
        .as_ref()
        .unwrap()["terdut.ryuvia.com/operator-key-hash"]
        .clone()
}

/// The key reaches the pod only through `secretKeyRef` to `terdut-operator-key`/`token`.
fn assert_key_by_reference_only(d: &Deployment) {
    let pod = d.spec.template.spec.as_ref().unwrap();
    let mut refs = 0;
    for c in pod
        .containers
        .iter()
        .chain(pod.init_containers.iter().flatten())
    {
        for e in c.env.iter().flatten() {
            let by_ref = e
                .value_from
                .as_ref()
                .and_then(|v| v.secret_key_ref.as_ref())
                .is_some_and(|r| r.name == "terdut-operator-key" && r.key == "token");
            if by_ref {
                assert!(e.value.is_none(), "{} has a value and a ref", e.name);
                assert_eq!(e.name, "TERDUT_OPERATOR_KEY");
                refs += 1;
            }
            if e.name == "TERDUT_OPERATOR_KEY" {
                assert!(by_ref, "TERDUT_OPERATOR_KEY not by secretKeyRef: {e:?}");
            }
        }
    }
    assert_eq!(refs, 1, "exactly one secretKeyRef to the operator key");
}

async fn wait_team_ready(api: &Api<TerdutTeam>) -> TerdutTeam {
    teams::wait_reason(api, "platform", "Ready").await
}

async fn patch_team(api: &Api<TerdutTeam>, spec: serde_json::Value) {
    teams::patch_spec(api, "platform", spec).await;
}

#[tokio::test]
async fn no_operator_key_integration_key_or_url_anywhere_over_a_lifecycle() {
    let logs = capture_logs("debug,terdut_standin=warn,tower=info");
    let (cp, client, ns, op) = setup("hygiene").await;
    let data_dir = cp.dir().join(format!("hygiene-{ns}"));
    std::fs::create_dir_all(&data_dir).unwrap();
    let data_file = data_dir.join("standin.json");
    let mut places: Vec<(String, String)> = vec![];
    let mut needles: Vec<Needle> = vec![];
    let mut hooks: Vec<Webhook> = vec![];

    // The capture sees an operator target's DEBUG lines, and the search finds a secret there.
    let canary = format!("tdsa_{}", "c0ffee".repeat(8));
    tracing::debug!(target: "terdut_actors::hygiene_canary", "canary {canary}");

    // 1. The server and its operator key.
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    let mut server = common::test_server("terdut", i32::from(PORT));
    server.spec.pod.disruption_budget =
        Some(serde_json::from_value(json!({"minAvailable": 1})).unwrap());
    servers
        .create(&PostParams::default(), &server)
        .await
        .unwrap();
    let key1 = operator_key(&client, &ns, None).await;
    needles.extend(needles_of_operator_key(1, &key1));
    let mut standin = start_standin(&key1, &data_file).await;
    standin.admin().seed_users(["alice"]).await.unwrap();
    let d1 = deployment_with_hash(&client, &ns, None).await;
    assert_key_by_reference_only(&d1);
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &ns);
    eventually("the PDB", WAIT, || async {
        pdbs.get_opt("terdut").await.ok().flatten()
    })
    .await;
    snapshot(&client, &ns, "server", &mut places).await;

    // 2. A team with a ladder and switches.
    let team_api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    teams::create(
        &team_api,
        &teams::team(
            "platform",
            json!({"name": "terdut"}),
            "Platform",
            teams::full_spec(),
        ),
    )
    .await;
    wait_team_ready(&team_api).await;
    snapshot(&client, &ns, "team created", &mut places).await;

    // Rename, ladder edit, a second switch.
    patch_team(
        &team_api,
        json!({
            "displayName": "Platform Renamed",
            "escalation": {"repeatCount": 1, "levels": [
                {"timeout": "10m", "targets": [{"kind": "user", "username": "alice"}]}]},
            "deadmanSwitches": [
                {"name": "watchdog", "matcher": "alertname=Watchdog", "timeout": "20m"},
                {"name": "heartbeat", "matcher": "alertname=Heartbeat", "timeout": "1h", "severity": "info"}],
        }),
    )
    .await;
    wait_team_ready(&team_api).await;
    snapshot(&client, &ns, "team edited", &mut places).await;

    // An error status: a user the server does not know, then fixed.
    patch_team(
        &team_api,
        json!({"escalation": {"repeatCount": 1, "levels": [
            {"timeout": "10m", "targets": [{"kind": "user", "username": "mallory"}]}]}}),
    )
    .await;
    let t = teams::wait_reason(&team_api, "platform", "UnknownUser").await;
    assert!(teams::ready(&t).unwrap().2.contains("mallory"));
    snapshot(&client, &ns, "team unknown user", &mut places).await;
    patch_team(
        &team_api,
        json!({"escalation": {"repeatCount": 1, "levels": [
            {"timeout": "10m", "targets": [{"kind": "oncall"}]}]}}),
    )
    .await;
    wait_team_ready(&team_api).await;

    // 3. An alert source: create, rename, kind-change rotation, requested rotation.
    let src = sources(&client, &ns);
    src.create(
        &PostParams::default(),
        &source_fixture::source("am", "platform", "alertmanager", "prod-am"),
    )
    .await
    .unwrap();
    let id1 = wait_ready_id(&client, &ns, "am", None).await;
    hooks.push(wait_webhook(&client, &ns, "am", id1).await);
    snapshot(&client, &ns, "source created", &mut places).await;

    patch_source(&client, &ns, "am", json!({"name": "prod-am-renamed"})).await;
    eventually("the source rename", WAIT, || async {
        let st = src.get("am").await.ok()?.status?;
        let c = st.conditions.iter().find(|c| c.type_ == "Ready")?;
        (c.observed_generation == Some(2) && c.status == "True").then_some(())
    })
    .await;
    snapshot(&client, &ns, "source renamed", &mut places).await;

    patch_source(&client, &ns, "am", json!({"kind": "grafana"})).await;
    let id2 = wait_ready_id(&client, &ns, "am", Some(id1)).await;
    hooks.push(wait_webhook(&client, &ns, "am", id2).await);
    snapshot(&client, &ns, "source kind changed", &mut places).await;

    annotate(
        &client,
        &ns,
        "am",
        json!({"terdut.ryuvia.com/rotate-webhook-key": "hygiene-1"}),
    )
    .await;
    let id3 = wait_ready_id(&client, &ns, "am", Some(id2)).await;
    hooks.push(wait_webhook(&client, &ns, "am", id3).await);
    snapshot(&client, &ns, "source rotated", &mut places).await;

    // 4. A new operator key: the Secret is deleted, the operator mints another and rolls the
    // Deployment; the server still knows the old one, so the operator's calls meet 401s.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    secrets
        .delete("terdut-operator-key", &DeleteParams::default())
        .await
        .unwrap();
    let key2 = operator_key(&client, &ns, Some(&key1)).await;
    needles.extend(needles_of_operator_key(2, &key2));
    let d2 = deployment_with_hash(&client, &ns, Some(&key_hash(&d1))).await;
    assert_key_by_reference_only(&d2);
    patch_team(&team_api, json!({"displayName": "Platform 401"})).await;
    let t = eventually("the team to report the refused key", WAIT, || async {
        let t = team_api.get("platform").await.ok()?;
        let (status, _, _) = teams::ready(&t)?;
        let at_gen = t.status.as_ref()?.observed_generation == t.metadata.generation;
        (at_gen && status == "False").then_some(t)
    })
    .await;
    let (_, reason, message) = teams::ready(&t).unwrap();
    assert!(
        message.contains("401") || reason.contains("Unauthorized") || message.contains("key"),
        "{reason}: {message}"
    );
    snapshot(&client, &ns, "operator key refused", &mut places).await;
    // The server restarts with the new key (its state kept): everything heals.
    standin.shutdown().await;
    standin = start_standin(&key2, &data_file).await;
    teams::resync(op, &ns, "platform").await;
    wait_team_ready(&team_api).await;
    source_fixture::nudge(&client, &ns, "am").await;
    let id4 = wait_ready_id(&client, &ns, "am", None).await;
    assert_eq!(id4, id3, "a new operator key rotates no webhook key");
    snapshot(&client, &ns, "new operator key", &mut places).await;

    // 5. Deletions, the server last.
    src.delete("am", &DeleteParams::default()).await.unwrap();
    eventually("the TerdutAlertSource to go", WAIT, || async {
        src.get_opt("am").await.unwrap().is_none().then_some(())
    })
    .await;
    wait_event(&client, &ns, "am", "Normal", "IntegrationDeleted").await;
    team_api
        .delete("platform", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the TerdutTeam to go", WAIT, || async {
        team_api
            .get_opt("platform")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    snapshot(&client, &ns, "team and source deleted", &mut places).await;
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
    snapshot(&client, &ns, "server deleted", &mut places).await;
    // Let trailing log lines of the last passes land.
    tokio::time::sleep(Duration::from_millis(800)).await;
    standin.shutdown().await;

    // Events, metrics, logs.
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    let events = events.list(&ListParams::default()).await.unwrap().items;
    for e in &events {
        places.push((
            format!(
                "Event {} {}",
                e.reason.as_deref().unwrap_or_default(),
                e.metadata.name.as_deref().unwrap_or_default()
            ),
            serde_json::to_string(e).unwrap(),
        ));
    }
    let mut metrics = String::new();
    prometheus_client::encoding::text::encode(&mut metrics, &op.registry).unwrap();
    let logs = logs.text();

    // The capture machinery works: it saw this lifecycle at DEBUG, from the operator and from
    // the libraries below it, and finds a secret that was logged.
    assert!(logs.contains("DEBUG"), "debug level captured");
    assert!(logs.contains(&format!("{ns}/am")), "logs name the source");
    assert!(
        logs.contains(&format!("{ns}/platform")),
        "logs name the team"
    );
    assert!(
        logs.contains("created integration"),
        "operator logs captured"
    );
    assert!(
        logs.contains("terdut-server call"),
        "API client logs captured"
    );
    assert!(
        logs.lines().any(|l| l.contains(" kube")),
        "kube's logs captured"
    );
    let canary_needles = [Needle {
        what: "canary".into(),
        value: canary.clone(),
    }];
    let log_place = [("the logs".to_owned(), logs.clone())];
    assert_eq!(
        leaks(&canary_needles, &log_place),
        ["canary in the logs"],
        "the search finds a logged secret"
    );
    assert!(
        has_prefixed_key(&logs, "tdsa_"),
        "the prefix search finds the canary"
    );
    let logs: String = logs
        .lines()
        .filter(|l| !l.contains("hygiene_canary"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(events.len() >= 8, "{} events captured", events.len());
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("IntegrationDeleted")),
        "the operator's Events captured"
    );
    assert!(
        metrics.contains("unauthorized"),
        "the 401s reached the metrics"
    );
    assert!(places.len() >= 40, "{} objects captured", places.len());
    assert!(
        places
            .iter()
            .any(|(p, t)| p.starts_with("TerdutTeam") && t.contains("mallory")),
        "an error status captured"
    );

    for (n, hook) in hooks.iter().enumerate() {
        needles.extend(needles_of_webhook(n + 1, hook));
    }
    assert_eq!(hooks.len(), 3);
    assert_eq!(needles.len(), 2 * 3 + 3 * 4);
    let mut all_places = places;
    all_places.push(("the logs".into(), logs.clone()));
    all_places.push(("the metrics".into(), metrics));
    let hits = leaks(&needles, &all_places);
    assert!(hits.is_empty(), "secrets leaked: {hits:#?}");
    for (place, text) in &all_places {
        for prefix in ["tdsa_", "tdik_"] {
            assert!(!has_prefixed_key(text, prefix), "a {prefix} key in {place}");
        }
    }
}
