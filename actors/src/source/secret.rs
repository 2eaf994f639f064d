//! The webhook Secret, pure: building it around a freshly created integration's url and key,
//! and reading back what the planner needs to know about one (never the values).
//!
//! The Secret holds the only copy the cluster will ever have of the key (the server shows it
//! once, docs/design.md §4.5). It is owned by its TerdutAlertSource (controller,
//! blockOwnerDeletion) so garbage collection removes it with the object (docs/design.md §7), and
//! annotated with the id of the integration whose key it holds, so a stale Secret is told apart
//! from a current one.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;
use terdut_crds::v1alpha1::TerdutAlertSource;

use super::names::{
    ANNOTATION_INTEGRATION_ID, ANNOTATION_ROTATED_FOR, DATA_KEY, DATA_URL, secret_labels,
    secret_name,
};
use super::plan::{OwnedSecret, SecretView};
use crate::api::{CreatedIntegration, Id};

/// A TerdutAlertSource read from a cache always has these; one built by hand may not.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("TerdutAlertSource is missing metadata.{0}")]
pub struct MissingMetadata(pub &'static str);

/// The controller owner reference the webhook Secret carries.
pub fn owner_reference(source: &TerdutAlertSource) -> Result<OwnerReference, MissingMetadata> {
    let mut owner = source
        .controller_owner_ref(&())
        .ok_or(MissingMetadata("uid"))?;
    owner.block_owner_deletion = Some(true);
    Ok(owner)
}

/// A new webhook Secret for `created`. `rotated_for` is the rotate annotation value this write
/// answers, if any.
pub fn webhook_secret(
    source: &TerdutAlertSource,
    created: &CreatedIntegration,
    rotated_for: Option<&str>,
) -> Result<Secret, MissingMetadata> {
    let name = source
        .metadata
        .name
        .as_deref()
        .ok_or(MissingMetadata("name"))?;
    let namespace = source
        .metadata
        .namespace
        .clone()
        .ok_or(MissingMetadata("namespace"))?;
    let mut secret = Secret {
        metadata: ObjectMeta {
            name: Some(secret_name(name)),
            namespace: Some(namespace),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        ..Default::default()
    };
    fill(&mut secret, source, created, rotated_for)?;
    Ok(secret)
}

/// Puts `created`'s url and key into an existing Secret of this source (a replacement after a
/// rotation), keeping labels and annotations others added to it.
pub fn refill(
    mut secret: Secret,
    source: &TerdutAlertSource,
    created: &CreatedIntegration,
    rotated_for: Option<&str>,
) -> Result<Secret, MissingMetadata> {
    secret.metadata.managed_fields = None;
    fill(&mut secret, source, created, rotated_for)?;
    Ok(secret)
}

fn fill(
    secret: &mut Secret,
    source: &TerdutAlertSource,
    created: &CreatedIntegration,
    rotated_for: Option<&str>,
) -> Result<(), MissingMetadata> {
    let name = source
        .metadata
        .name
        .as_deref()
        .ok_or(MissingMetadata("name"))?;
    let owner = owner_reference(source)?;
    let meta = &mut secret.metadata;
    meta.labels
        .get_or_insert_with(BTreeMap::new)
        .extend(secret_labels(name));
    let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
    annotations.insert(
        ANNOTATION_INTEGRATION_ID.to_owned(),
        created.integration.id.to_string(),
    );
    match rotated_for {
        Some(v) => {
            annotations.insert(ANNOTATION_ROTATED_FOR.to_owned(), v.to_owned());
        }
        None => {
            annotations.remove(ANNOTATION_ROTATED_FOR);
        }
    }
    let owners = meta.owner_references.get_or_insert_with(Vec::new);
    owners.retain(|o| o.uid != owner.uid && o.controller != Some(true));
    owners.push(owner);
    // The one place the url and key leave the process on purpose.
    secret.data = Some(BTreeMap::from([
        (
            DATA_URL.to_owned(),
            ByteString(created.url.expose().as_bytes().to_vec()),
        ),
        (
            DATA_KEY.to_owned(),
            ByteString(created.key.expose().as_bytes().to_vec()),
        ),
    ]));
    secret.string_data = None;
    Ok(())
}

/// Whether `secret` is controlled by the object with `uid`.
pub fn controlled_by(secret: &Secret, uid: &str) -> bool {
    secret
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

/// What the planner may know about the Secret found under the webhook Secret's name.
pub fn view(secret: Option<&Secret>, source_uid: &str) -> SecretView {
    let Some(secret) = secret else {
        return SecretView::Absent;
    };
    let non_empty = |k: &str| {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(k))
            .is_some_and(|v| !v.0.is_empty())
    };
    view_of_metadata(
        &secret.metadata,
        source_uid,
        non_empty(DATA_URL) && non_empty(DATA_KEY),
    )
}

/// [`view`] from the Secret's metadata, with whether its data holds a url and a key as found
/// (or remembered) by the caller.
pub fn view_of_metadata(meta: &ObjectMeta, source_uid: &str, has_credentials: bool) -> SecretView {
    let controlled = meta
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == source_uid);
    if !controlled {
        return SecretView::Foreign;
    }
    let annotations = meta.annotations.as_ref();
    let annotation = |k: &str| annotations.and_then(|a| a.get(k)).cloned();
    SecretView::Owned(OwnedSecret {
        integration_id: annotation(ANNOTATION_INTEGRATION_ID).and_then(|v| v.parse::<Id>().ok()),
        has_credentials,
        rotated_for: annotation(ANNOTATION_ROTATED_FOR),
    })
}

/// The name of a Secret, for messages. Never `Debug`-print a Secret: its data is the key.
pub fn describe(secret: &Secret) -> String {
    format!(
        "Secret {}/{}",
        secret.metadata.namespace.as_deref().unwrap_or(""),
        secret.metadata.name.as_deref().unwrap_or("")
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::api::{Integration, IntegrationKind, SecretString};
    use terdut_crds::v1alpha1::TerdutAlertSourceSpec;

    pub(crate) fn source() -> TerdutAlertSource {
        let spec: TerdutAlertSourceSpec = serde_json::from_value(serde_json::json!({
            "teamRef": {"name": "platform"}, "kind": "alertmanager", "name": "prod-am",
        }))
        .unwrap();
        let mut s = TerdutAlertSource::new("am", spec);
        s.metadata.namespace = Some("team-ns".into());
        s.metadata.uid = Some("uid-7".into());
        s.metadata.generation = Some(1);
        s
    }

    pub(crate) fn created(id: Id) -> CreatedIntegration {
        CreatedIntegration {
            integration: Integration {
                id,
                kind: IntegrationKind::Alertmanager,
                name: "prod-am".into(),
                external_id: "team-ns/am".into(),
            },
            url: SecretString::from("http://x/api/v1/ingest/alertmanager/tok"),
            key: SecretString::from("tdik_0123"),
        }
    }

    #[test]
    fn new_secret_is_owned_labelled_annotated_and_holds_url_and_key() {
        let s = webhook_secret(&source(), &created(3), Some("r1")).unwrap();
        assert_eq!(s.metadata.name.as_deref(), Some("am-terdut-webhook"));
        assert_eq!(s.metadata.namespace.as_deref(), Some("team-ns"));
        let owner = &s.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (
                owner.kind.as_str(),
                owner.uid.as_str(),
                owner.controller,
                owner.block_owner_deletion
            ),
            ("TerdutAlertSource", "uid-7", Some(true), Some(true))
        );
        let labels = s.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["terdut.ryuvia.com/managed"], "true");
        assert_eq!(labels["terdut.ryuvia.com/alert-source"], "am");
        let ann = s.metadata.annotations.as_ref().unwrap();
        assert_eq!(ann[ANNOTATION_INTEGRATION_ID], "3");
        assert_eq!(ann[ANNOTATION_ROTATED_FOR], "r1");
        let data = s.data.as_ref().unwrap();
        assert_eq!(data[DATA_KEY].0, b"tdik_0123");
        assert_eq!(data[DATA_URL].0, b"http://x/api/v1/ingest/alertmanager/tok");
        assert_eq!(
            view(Some(&s), "uid-7"),
            SecretView::Owned(OwnedSecret {
                integration_id: Some(3),
                has_credentials: true,
                rotated_for: Some("r1".into()),
            })
        );
    }

    #[test]
    fn refill_keeps_foreign_annotations_and_replaces_the_rest() {
        let mut s = webhook_secret(&source(), &created(3), Some("r1")).unwrap();
        s.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert("reflector/allowed".into(), "yes".into());
        s.metadata.resource_version = Some("42".into());
        let s = refill(s, &source(), &created(9), None).unwrap();
        let ann = s.metadata.annotations.as_ref().unwrap();
        assert_eq!(ann["reflector/allowed"], "yes");
        assert_eq!(ann[ANNOTATION_INTEGRATION_ID], "9");
        assert!(!ann.contains_key(ANNOTATION_ROTATED_FOR));
        assert_eq!(s.metadata.resource_version.as_deref(), Some("42"));
        assert_eq!(s.metadata.owner_references.as_ref().unwrap().len(), 1);
    }

    #[test]
    fn a_secret_of_someone_else_is_foreign() {
        let s = webhook_secret(&source(), &created(3), None).unwrap();
        assert_eq!(view(Some(&s), "other-uid"), SecretView::Foreign);
        let mut plain = s.clone();
        plain.metadata.owner_references = None;
        assert_eq!(view(Some(&plain), "uid-7"), SecretView::Foreign);
        assert_eq!(view(None, "uid-7"), SecretView::Absent);
    }

    #[test]
    fn a_secret_without_its_key_has_no_credentials() {
        let mut s = webhook_secret(&source(), &created(3), None).unwrap();
        s.data.as_mut().unwrap().remove(DATA_KEY);
        let SecretView::Owned(o) = view(Some(&s), "uid-7") else {
            panic!("owned")
        };
        assert!(!o.has_credentials);
        assert_eq!(o.integration_id, Some(3));
    }
}
