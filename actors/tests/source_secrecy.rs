//! Secrecy of the webhook URL and key (docs/design.md §4.5; terdut-api.md "both are
//! secrets and never appear in a CR's spec or status, a log line or an Event").
//!
//! A full create / rename / kind-change rotation / requested rotation / delete cycle runs while
//! the operator's logs (a process-wide subscriber at debug for the operator and kube, installed
//! before the operator of this binary starts), every status and every Event are captured; none
//! may contain a url, a url token or a key the stand-in issued (read from the webhook Secrets,
//! the one place they belong). A binary of its own: the subscriber is process-wide.

mod common;
mod log_capture;
mod source_fixture;

use std::time::Duration;

use common::{eventually, setup};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use log_capture::capture_logs;
use serde_json::json;
use source_fixture::*;

#[tokio::test]
async fn no_url_or_key_in_logs_events_or_status() {
    let logs =
        capture_logs("terdut_actors=debug,kube=debug,kube_client=debug,kube_runtime=debug,warn");
    let (_, client, ns, _) = setup("src-secrecy").await;
    let (_standin, _) = server_and_team(&client, &ns, 19310, "platform").await;
    let api = sources(&client, &ns);
    let mut statuses: Vec<String> = vec![];
    let mut hooks: Vec<Webhook> = vec![];
    let snapshot = |statuses: &mut Vec<String>, obj: &terdut_crds::v1alpha1::TerdutAlertSource| {
        statuses.push(serde_json::to_string(obj).unwrap());
    };

    // Create.
    api.create(
        &PostParams::default(),
        &source("am", "platform", "alertmanager", "prod-am"),
    )
    .await
    .unwrap();
    let id1 = wait_ready_id(&client, &ns, "am", None).await;
    hooks.push(wait_webhook(&client, &ns, "am", id1).await);
    snapshot(&mut statuses, &api.get("am").await.unwrap());

    // Rename.
    patch_spec(&client, &ns, "am", json!({"name": "prod-am-renamed"})).await;
    eventually("the rename", WAIT, || async {
        let st = api.get("am").await.ok()?.status?;
        let c = st.conditions.iter().find(|c| c.type_ == "Ready")?;
        (c.observed_generation == Some(2) && c.status == "True").then_some(())
    })
    .await;
    snapshot(&mut statuses, &api.get("am").await.unwrap());

    // Kind change: a rotation.
    patch_spec(&client, &ns, "am", json!({"kind": "generic"})).await;
    let id2 = wait_ready_id(&client, &ns, "am", Some(id1)).await;
    hooks.push(wait_webhook(&client, &ns, "am", id2).await);
    snapshot(&mut statuses, &api.get("am").await.unwrap());

    // Requested rotation.
    annotate(
        &client,
        &ns,
        "am",
        json!({"terdut.ryuvia.com/rotate-webhook-key": "secrecy-1"}),
    )
    .await;
    let id3 = wait_ready_id(&client, &ns, "am", Some(id2)).await;
    hooks.push(wait_webhook(&client, &ns, "am", id3).await);
    snapshot(&mut statuses, &api.get("am").await.unwrap());

    // Delete.
    api.delete("am", &DeleteParams::default()).await.unwrap();
    eventually("the TerdutAlertSource to go", WAIT, || async {
        api.get_opt("am").await.unwrap().is_none().then_some(())
    })
    .await;
    wait_event(&client, &ns, "am", "Normal", "IntegrationDeleted").await;
    // Let trailing log lines of the last pass land.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    let events: Vec<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|e| serde_json::to_string(e).unwrap())
        .collect();
    let logs = logs.text();

    // The capture works and saw this object's passes.
    assert!(events.len() >= 5, "{} events", events.len());
    assert!(
        logs.contains("created integration"),
        "operator logs captured"
    );
    assert!(logs.contains(&format!("{ns}/am")), "logs name the object");
    assert!(logs.contains("DEBUG"), "debug level captured");

    for hook in &hooks {
        let token = hook.token();
        assert!(token.len() >= 16, "a url token to look for");
        for (what, value) in [
            ("key", &hook.key),
            ("url", &hook.url),
            ("url token", &token),
        ] {
            assert!(
                !logs.contains(value.as_str()),
                "a webhook {what} appears in the operator's logs"
            );
            for (i, s) in statuses.iter().enumerate() {
                assert!(
                    !s.contains(value.as_str()),
                    "a webhook {what} appears in the TerdutAlertSource at step {i}"
                );
            }
            for e in &events {
                assert!(
                    !e.contains(value.as_str()),
                    "a webhook {what} appears in an Event"
                );
            }
        }
    }
    // No key prefix anywhere either (the stand-in's keys are tdik_; the operator key tdsa_).
    assert!(
        !logs.contains("tdik_"),
        "an integration key prefix in the logs"
    );
    assert!(
        !logs.contains("tdsa_"),
        "an operator key prefix in the logs"
    );
    for e in &events {
        assert!(
            !e.contains("tdik_") && !e.contains("<redacted: note"),
            "{e}"
        );
    }
}
