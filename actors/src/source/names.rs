//! Names, labels, annotations and identities of a TerdutAlertSource (docs/design.md §4.5, §7).
//!
//! Everything is derived from the object's own namespace and name, so a retry, a restart or a
//! lost status finds the same Secret and the same integration (`external_id`) instead of
//! making new ones.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::server::names::{FIELD_MANAGER, LABEL_MANAGED, LABEL_MANAGED_BY};

/// The finalizer that deletes the integration on the server before the object goes
/// (docs/design.md §5 "Finalizers").
pub const FINALIZER: &str = "terdut.ryuvia.com/source-cleanup";

/// Suffix of the webhook Secret, `<name>-terdut-webhook` (docs/design.md §4.5).
pub const SECRET_SUFFIX: &str = "-terdut-webhook";
/// Data key of the webhook URL in the Secret.
pub const DATA_URL: &str = "url";
/// Data key of the webhook key in the Secret.
pub const DATA_KEY: &str = "key";

/// Label on the webhook Secret naming its TerdutAlertSource.
pub const LABEL_ALERT_SOURCE: &str = "terdut.ryuvia.com/alert-source";
/// Annotation on the webhook Secret: the id of the integration whose key it holds. A Secret
/// whose id is not the integration's is stale: it does not hold that integration's key.
pub const ANNOTATION_INTEGRATION_ID: &str = "terdut.ryuvia.com/integration-id";

/// Annotation a user sets on the TerdutAlertSource to rotate the webhook key: any new value
/// (a timestamp, a nonce) rotates once.
pub const ANNOTATION_ROTATE: &str = "terdut.ryuvia.com/rotate-webhook-key";
/// The rotate value last handled, recorded by the operator on the webhook Secret and on the
/// TerdutAlertSource (the latter survives a lost Secret, so a lost Secret plus an old rotate
/// value never mints a key silently).
pub const ANNOTATION_ROTATED_FOR: &str = "terdut.ryuvia.com/webhook-key-rotated-for";

/// The longest object name whose Secret name is still a valid object name (253).
pub const MAX_SOURCE_NAME_LEN: usize = 253 - SECRET_SUFFIX.len();

/// `<name>-terdut-webhook`.
pub fn secret_name(source: &str) -> String {
    format!("{source}{SECRET_SUFFIX}")
}

/// The integration's identity on the server: `<namespace>/<name>` (docs/design.md §2,
/// terdut-api.md).
pub fn external_id(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// A label value naming the source: the name itself when it fits a label value (63), else a
/// prefix plus a hash, so the label is always valid and still distinct.
pub fn source_label_value(source: &str) -> String {
    if source.len() <= 63 {
        return source.to_owned();
    }
    let digest = hex::encode(Sha256::digest(source.as_bytes()));
    let prefix = source[..54].trim_end_matches(['-', '.']);
    format!("{prefix}-{}", &digest[..8])
}

/// Labels of the webhook Secret. [`LABEL_MANAGED`] makes the operator's Secret informer see it
/// (and nudge this source when it changes or goes).
pub fn secret_labels(source: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_MANAGED.to_owned(), "true".to_owned()),
        (LABEL_MANAGED_BY.to_owned(), FIELD_MANAGER.to_owned()),
        (LABEL_ALERT_SOURCE.to_owned(), source_label_value(source)),
    ])
}

/// Refuses a name whose Secret name would be too long.
pub fn validate_source_name(name: &str) -> Result<(), String> {
    if name.len() <= MAX_SOURCE_NAME_LEN {
        Ok(())
    } else {
        Err(format!(
            "the TerdutAlertSource name is {} characters; its webhook Secret {name}{SECRET_SUFFIX} \
             needs it to be at most {MAX_SOURCE_NAME_LEN}: recreate it under a shorter name",
            name.len()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::names::MANAGED_SECRET_SELECTOR;

    #[test]
    fn names_follow_the_design() {
        assert_eq!(
            secret_name("prod-alertmanager"),
            "prod-alertmanager-terdut-webhook"
        );
        assert_eq!(
            external_id("team-ns", "prod-alertmanager"),
            "team-ns/prod-alertmanager"
        );
    }

    #[test]
    fn secret_labels_match_the_informer_selector() {
        let l = secret_labels("am");
        let (k, v) = MANAGED_SECRET_SELECTOR.split_once('=').unwrap();
        assert_eq!(l[k], v);
        assert_eq!(l[LABEL_ALERT_SOURCE], "am");
    }

    #[test]
    fn long_names_get_a_valid_distinct_label() {
        let a = format!("{}a", "x".repeat(70));
        let b = format!("{}b", "x".repeat(70));
        let (la, lb) = (source_label_value(&a), source_label_value(&b));
        assert!(la.len() <= 63 && lb.len() <= 63);
        assert_ne!(la, lb);
        assert!(la.chars().last().unwrap().is_ascii_alphanumeric());
    }

    #[test]
    fn too_long_names_are_refused() {
        assert!(validate_source_name(&"a".repeat(MAX_SOURCE_NAME_LEN)).is_ok());
        assert!(validate_source_name(&"a".repeat(MAX_SOURCE_NAME_LEN + 1)).is_err());
    }
}
