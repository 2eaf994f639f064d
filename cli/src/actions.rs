//! The commands that change something. Each is an annotation the operator already honours, or
//! (for the server key) the deletion the operator answers with a new key: the plugin adds no
//! API of its own, so `kubectl annotate` does exactly the same.

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::kinds::{Kind, KindName};
use crate::view::PAUSE_ANNOTATION;

/// Each new value rotates the source's webhook key once (docs/runbook.md).
pub const ROTATE_ANNOTATION: &str = "terdut.ryuvia.com/rotate-webhook-key";
/// Any change of an object's metadata starts a pass of its actor; this one says who asked and
/// when. The operator reads nothing from it.
pub const RECONCILE_ANNOTATION: &str = "terdut.ryuvia.com/reconcile-requested-at";
/// The field manager of the plugin's writes; the `WebhookKeyRotated` Event names it.
pub const FIELD_MANAGER: &str = "kubectl-terdut";

/// Asks the user before something that cannot be undone; false aborts.
pub type Confirm<'a> = &'a mut dyn FnMut(&str) -> bool;

async fn annotate(
    client: &Client,
    namespace: &str,
    target: &KindName,
    key: &str,
    value: Value,
) -> anyhow::Result<()> {
    let patch = json!({"metadata": {"annotations": {key: value}}});
    target
        .kind
        .api(client, Some(namespace))
        .patch(
            &target.name,
            &PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            },
            &Patch::Merge(&patch),
        )
        .await
        .with_context(|| format!("annotating {} {namespace}/{}", target.kind, target.name))?;
    Ok(())
}

pub async fn pause(client: &Client, namespace: &str, target: &KindName) -> anyhow::Result<String> {
    annotate(client, namespace, target, PAUSE_ANNOTATION, json!("true")).await?;
    // docs/design.md §5: one annotation, one meaning on every kind.
    Ok(format!(
        "{} {namespace}/{} paused: no writes to the server or to Kubernetes until `kubectl terdut resume`",
        target.kind, target.name
    ))
}

pub async fn resume(client: &Client, namespace: &str, target: &KindName) -> anyhow::Result<String> {
    annotate(client, namespace, target, PAUSE_ANNOTATION, Value::Null).await?;
    Ok(format!(
        "{} {namespace}/{} resumed",
        target.kind, target.name
    ))
}

pub async fn reconcile(
    client: &Client,
    namespace: &str,
    target: &KindName,
    now: Timestamp,
) -> anyhow::Result<String> {
    annotate(
        client,
        namespace,
        target,
        RECONCILE_ANNOTATION,
        json!(now.to_string()),
    )
    .await?;
    Ok(format!(
        "{} {namespace}/{}: pass requested ({RECONCILE_ANNOTATION}={now})",
        target.kind, target.name
    ))
}

/// Sets the rotate annotation to a value never used before (the time, to the nanosecond).
pub async fn rotate_source(
    client: &Client,
    namespace: &str,
    name: &str,
    now: Timestamp,
    confirm: Confirm<'_>,
) -> anyhow::Result<String> {
    let target = KindName {
        kind: Kind::Source,
        name: name.into(),
    };
    // Fail on a missing source before asking.
    Kind::Source
        .api(client, Some(namespace))
        .get(name)
        .await
        .with_context(|| format!("reading TerdutAlertSource {namespace}/{name}"))?;
    let question = format!(
        "Rotate the webhook key of TerdutAlertSource {namespace}/{name}? The current key stops \
         working at once; senders need the new one from Secret {name}-terdut-webhook."
    );
    if !confirm(&question) {
        bail!("not rotated");
    }
    annotate(
        client,
        namespace,
        &target,
        ROTATE_ANNOTATION,
        json!(now.to_string()),
    )
    .await?;
    Ok(format!(
        "TerdutAlertSource {namespace}/{name}: rotation requested ({ROTATE_ANNOTATION}={now}); \
         the WebhookKeyRotated Event follows"
    ))
}

/// Deletes the server's key Secret, which the operator answers with a new key and a rollout.
/// Only a Secret the server controls: a foreign one of that name (`KeySecretNotOwned`) is
/// never touched, and the delete is conditional on the uid that was checked.
pub async fn rotate_server_key(
    client: &Client,
    namespace: &str,
    name: &str,
    confirm: Confirm<'_>,
) -> anyhow::Result<String> {
    let server = Kind::Server
        .api(client, Some(namespace))
        .get(name)
        .await
        .with_context(|| format!("reading TerdutServer {namespace}/{name}"))?;
    let server_uid = server.metadata.uid.unwrap_or_default();
    let secret_name = format!("{name}-operator-key");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    // Metadata only: the plugin never reads the key.
    let meta = secrets
        .get_metadata_opt(&secret_name)
        .await
        .with_context(|| format!("reading Secret {namespace}/{secret_name}"))?;
    let Some(meta) = meta else {
        bail!(
            "Secret {namespace}/{secret_name} does not exist: the operator creates a key at its next pass"
        );
    };
    let owned = meta
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == server_uid);
    if !owned {
        bail!(
            "Secret {namespace}/{secret_name} is not controlled by TerdutServer {namespace}/{name}; \
             not deleting it (docs/runbook-server.md, KeySecretNotOwned)"
        );
    }
    let question = format!(
        "Rotate the operator key of TerdutServer {namespace}/{name}? Secret {secret_name} is \
         deleted, the operator makes a new key and rolls the server's pods; its teams and \
         sources wait (WaitingForServer) until the new pods accept it."
    );
    if !confirm(&question) {
        bail!("not rotated");
    }
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: meta.metadata.uid.clone(),
            resource_version: None,
        }),
        ..Default::default()
    };
    secrets
        .delete(&secret_name, &dp)
        .await
        .with_context(|| format!("deleting Secret {namespace}/{secret_name}"))?;
    Ok(format!(
        "TerdutServer {namespace}/{name}: Secret {secret_name} deleted; the operator makes a \
         new key (Event OperatorKeyCreated) and rolls the pods"
    ))
}
