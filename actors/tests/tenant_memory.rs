//! Memory and metric series a tenant cannot grow (docs/security.md "Memory a tenant cannot
//! grow", "Metric series a tenant cannot mint"), against a real kube-apiserver and the
//! stand-in:
//!
//! - hundreds of large Secrets carrying the operator's labels, in a tenant's namespace and in
//!   the server's, are not held in the Secret cache while a team and an alert source converge
//!   beside them (the cache selected on a label anyone can set and kept whole Secrets);
//! - a status and annotations a tenant wrote on their own TerdutTeam cost the cache a bounded
//!   amount, whatever their size;
//! - Ready reasons a tenant wrote on paused teams count as `Other`, and the series of
//!   `terdut_operator_objects` that no object has any more is dropped.

mod common;
mod teams;

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use serde_json::json;
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutTeam};

use common::{TestOperator, eventually, server_with_standin, setup};
use teams::{WAIT, create, team, wait_reason};

const SECRETS_PORT: u16 = 19850;
const STATUS_PORT: u16 = 19851;
const CENSUS_PORT: u16 = 19852;

/// The labels of the operator's own Secrets: anyone who may write a Secret can set them.
fn operator_labels() -> serde_json::Value {
    json!({"terdut.ryuvia.com/managed": "true", "terdut.ryuvia.com/server": "terdut",
           "app.kubernetes.io/managed-by": "terdut-operator"})
}

/// Creates `count` Secrets of `bytes` each in `ns`, ten at a time.
async fn labelled_secrets(client: &kube::Client, ns: &str, count: usize, bytes: usize) {
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let filler = "x".repeat(bytes);
    for batch in (0..count).collect::<Vec<_>>().chunks(10) {
        let creates = batch.iter().map(|i| {
            let secret: Secret = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": format!("big-{i}"), "labels": operator_labels()},
                "stringData": {"token": filler, "url": filler},
            }))
            .unwrap();
            let api = api.clone();
            async move { api.create(&PostParams::default(), &secret).await.unwrap() }
        });
        futures::future::join_all(creates).await;
    }
}

/// The Secrets the operator's cache holds in `ns`, and what all of them cost as JSON.
fn cached_secrets(op: &TestOperator, ns: &str) -> (Vec<String>, usize) {
    let all = op.ctx.stores.secrets.state();
    let bytes = all
        .iter()
        .map(|s| serde_json::to_vec(&**s).map_or(0, |v| v.len()))
        .sum();
    let names = all
        .iter()
        .filter(|s| s.metadata.namespace.as_deref() == Some(ns))
        .filter_map(|s| s.metadata.name.clone())
        .collect();
    (names, bytes)
}

#[tokio::test]
async fn hundreds_of_large_labelled_secrets_are_not_held_while_a_tenants_team_converges() {
    let (cp, client, ns, op) = setup("mem-secrets").await;
    let _standin = server_with_standin(&client, &ns, "terdut", SECRETS_PORT).await;
    let tenant = cp.namespace(&client, "mem-secrets-tenant").await.unwrap();
    // 180 in a tenant's namespace, 20 beside the server's own key: 200 × 2 × 300 KB.
    labelled_secrets(&client, &tenant, 180, 300 * 1024).await;
    labelled_secrets(&client, &ns, 20, 300 * 1024).await;

    // The server's team and alert source converge meanwhile.
    let teams: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    create(
        &teams,
        &team("payments", json!({"name": "terdut"}), "Payments", json!({})),
    )
    .await;
    wait_reason(&teams, "payments", "Ready").await;
    let source: TerdutAlertSource = serde_json::from_value(json!({
        "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutAlertSource",
        "metadata": {"name": "am"},
        "spec": {"teamRef": {"name": "payments"}, "kind": "alertmanager", "name": "prod-am"},
    }))
    .unwrap();
    let sources: Api<TerdutAlertSource> = Api::namespaced(client.clone(), &ns);
    sources
        .create(&PostParams::default(), &source)
        .await
        .unwrap();
    // Its webhook Secret is created after every labelled one: once the cache has it, the
    // watch has delivered them all.
    eventually("the webhook Secret in the cache", WAIT, || async {
        op.ctx
            .stores
            .secrets
            .get(&ObjectRef::new("am-terdut-webhook").within(&ns))
            .map(|_| ())
    })
    .await;
    let live: Secret = Api::namespaced(client.clone(), &ns)
        .get("am-terdut-webhook")
        .await
        .unwrap();
    assert!(
        live.data.is_some_and(|d| d.contains_key("key")),
        "the source wrote its webhook Secret"
    );

    let (in_tenant, _) = cached_secrets(op, &tenant);
    assert!(in_tenant.is_empty(), "held: {in_tenant:?}");
    let (in_server_ns, bytes) = cached_secrets(op, &ns);
    let mut in_server_ns = in_server_ns;
    in_server_ns.sort();
    assert_eq!(
        in_server_ns,
        ["am-terdut-webhook", "terdut-operator-key"],
        "only the operator's own"
    );
    // Every Secret the test binary's operator caches, metadata only: a few hundred bytes each,
    // where the labelled ones alone were 120 MB.
    assert!(
        bytes < 64 * 1024,
        "the Secret cache holds {} KiB",
        bytes / 1024
    );
}

#[tokio::test]
async fn a_status_and_annotations_a_tenant_wrote_cost_the_cache_a_bounded_amount() {
    let (_cp, client, ns, op) = setup("mem-status").await;
    let _standin = server_with_standin(&client, &ns, "terdut", STATUS_PORT).await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    create(
        &api,
        &team("payments", json!({"name": "terdut"}), "Payments", json!({})),
    )
    .await;
    wait_reason(&api, "payments", "Ready").await;
    // Paused, so the operator leaves the status as the tenant writes it.
    let paused = |on: bool| json!({"metadata": {"annotations": {"terdut.ryuvia.com/paused": if on { json!("true") } else { json!(null) }}}});
    api.patch(
        "payments",
        &PatchParams::default(),
        &Patch::Merge(paused(true)),
    )
    .await
    .unwrap();
    let own = eventually("the team paused", WAIT, || async {
        let t = api.get("payments").await.ok()?;
        let conditions = t.status?.conditions;
        conditions
            .iter()
            .any(|c| c.type_ == "Paused")
            .then_some(conditions)
    })
    .await;
    // The tenant's own annotations (not the operator's), 200 KB, and a status of 200 more
    // conditions of 4 KB each after the operator's own, as anyone with `*/status` in the
    // namespace can write.
    let annotations: serde_json::Map<String, serde_json::Value> = (0..20)
        .map(|i| (format!("example.com/a{i}"), json!("y".repeat(10_000))))
        .collect();
    api.patch(
        "payments",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": annotations}})),
    )
    .await
    .unwrap();
    let mut conditions: Vec<serde_json::Value> = own
        .iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect();
    conditions.extend((0..200).map(|i| {
        json!({"type": format!("Forged{i}"), "status": "True", "reason": "Forged",
           "message": "m".repeat(4_000), "lastTransitionTime": "2026-01-01T00:00:00Z"})
    }));
    let written = api
        .patch_status(
            "payments",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": conditions}})),
        )
        .await
        .unwrap();
    let written_rv: u64 = written
        .metadata
        .resource_version
        .clone()
        .unwrap()
        .parse()
        .unwrap();
    let size = |t: &TerdutTeam| serde_json::to_vec(t).unwrap().len();
    assert!(size(&written) > 900_000, "the API server kept it whole");
    let cached = eventually("the forged version in the cache", WAIT, || async {
        let cached = op
            .ctx
            .stores
            .teams
            .get(&ObjectRef::new("payments").within(&ns))?;
        let rv: u64 = cached.metadata.resource_version.as_deref()?.parse().ok()?;
        (rv >= written_rv).then_some(cached)
    })
    .await;
    let live = api.get("payments").await.unwrap();
    assert!(
        size(&live) > 900_000,
        "the forged status is still the object's, so the cache saw it"
    );
    assert!(
        size(&cached) <= 40 * 1024,
        "one team costs the cache {} KiB",
        size(&cached) / 1024
    );
    let kept = cached.metadata.annotations.clone().unwrap_or_default();
    assert!(
        kept.keys().all(|k| k.starts_with("terdut.ryuvia.com/")),
        "{:?}",
        kept.keys()
    );
    api.patch(
        "payments",
        &PatchParams::default(),
        &Patch::Merge(paused(false)),
    )
    .await
    .unwrap();
    // The team still works: a spec change converges.
    teams::patch_spec(&api, "payments", json!({"displayName": "Payments EU"})).await;
    wait_reason(&api, "payments", "Ready").await;
}

/// The lines of the test operator's `objects` family for teams.
fn team_series(op: &TestOperator) -> Vec<String> {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &op.registry).unwrap();
    text.lines()
        .filter(|l| l.starts_with("objects{") && l.contains("kind=\"team\""))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn ready_reasons_a_tenant_wrote_add_no_series_and_empty_series_go() {
    let (_cp, client, ns, op) = setup("mem-census").await;
    let _standin = server_with_standin(&client, &ns, "terdut", CENSUS_PORT).await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    // Paused teams: the operator leaves their status as the tenant writes it.
    const FORGED: usize = 30;
    for i in 0..FORGED {
        let mut t = team(
            &format!("t{i}"),
            json!({"name": "terdut"}),
            &format!("T{i}"),
            json!({}),
        );
        t.metadata.annotations = Some([("terdut.ryuvia.com/paused".into(), "true".into())].into());
        create(&api, &t).await;
    }
    for i in 0..FORGED {
        let name = format!("t{i}");
        eventually("the team paused", WAIT, || async {
            let t = api.get(&name).await.ok()?;
            let paused = t.status?.conditions.iter().any(|c| c.type_ == "Paused");
            paused.then_some(())
        })
        .await;
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [
                {"type": "Ready", "status": "False", "reason": format!("Forged{i}"),
                 "message": "written by the tenant", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})),
        )
        .await
        .unwrap();
    }
    let other = r#"objects{kind="team",ready="False",reason="Other"}"#;
    let counted = eventually("the forged reasons counted", WAIT, || async {
        let series = team_series(op);
        series
            .iter()
            .find(|l| l.starts_with(other))
            .and_then(|l| l.split_whitespace().last()?.parse::<usize>().ok())
            .filter(|n| *n >= FORGED)
            .map(|_| series)
    })
    .await;
    assert!(
        counted.iter().all(|l| !l.contains("Forged")),
        "a series per forged reason: {counted:#?}"
    );

    // Once no team has such a reason, the series goes to 0, and is dropped a minute later.
    for i in 0..FORGED {
        api.delete(&format!("t{i}"), &Default::default())
            .await
            .unwrap();
    }
    eventually(
        "the emptied series dropped",
        Duration::from_secs(120),
        || async {
            team_series(op)
                .iter()
                .all(|l| !l.starts_with(other))
                .then_some(())
        },
    )
    .await;
}
