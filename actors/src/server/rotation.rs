//! What rolls the server's pods when a credential they read at start changes (docs/design.md §6,
//! §8): pod-template annotations whose values change with it.
//!
//! - The operator key: [`KEY_HASH_ANNOTATION`], a truncated hash of the key, which the operator
//!   holds anyway (it calls the API with it).
//! - The database password (`PGPASSWORD`, from `passwordSecretRef`, the Zalando credentials or
//!   the CloudNativePG application Secret): [`DATABASE_SECRET_ANNOTATION`], a truncated hash of
//!   that Secret's `uid` and `resourceVersion`. The operator never reads or hashes the password:
//!   the pods take it by `secretKeyRef`, and every write of the Secret (a rotation, or any other
//!   change of it) gives it a new `resourceVersion`, so the pods roll once per write. A Secret
//!   deleted and made again has a new `uid`.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::references::{Checked, Found, SecretVersion};

pub use super::key::KEY_HASH_ANNOTATION;

/// Pod-template annotation whose change rolls the pods onto a rotated database password.
pub const DATABASE_SECRET_ANNOTATION: &str = "terdut.ryuvia.com/database-secret-hash";
/// Hex characters kept: 64 bits tell versions apart.
const HASH_LEN: usize = 16;

/// The annotations the operator sets on the pod template; a user's `spec.pod.annotations` of
/// the same names are ignored (`SpecWarning::AnnotationReserved`).
pub const RESERVED: [&str; 2] = [KEY_HASH_ANNOTATION, DATABASE_SECRET_ANNOTATION];

/// The values of the annotations of [`RESERVED`] for one pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RollTriggers {
    /// `OperatorKeyValue::hash` of the current key.
    pub key_hash: String,
    /// [`database_secret_hash`] of the database password's Secret, when there is one.
    pub database_secret: Option<String>,
}

impl RollTriggers {
    /// Only the key (a DSN without a password Secret).
    pub fn key(key_hash: &str) -> Self {
        Self {
            key_hash: key_hash.to_owned(),
            database_secret: None,
        }
    }

    /// For the pod template.
    pub fn annotations(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::from([(KEY_HASH_ANNOTATION.to_owned(), self.key_hash.clone())]);
        if let Some(h) = &self.database_secret {
            out.insert(DATABASE_SECRET_ANNOTATION.to_owned(), h.clone());
        }
        out
    }
}

/// The hash of the database password Secret's version among `checked`, if that Secret was
/// found (a missing one holds the Deployment back anyway: `references::first_missing`).
pub fn database_secret_hash(checked: &[Checked]) -> Option<String> {
    checked
        .iter()
        .filter(|c| c.reference.database)
        .find_map(|c| match &c.found {
            Found::Present(version) => Some(version_hash(version)),
            Found::NoSecret | Found::NoKey => None,
        })
}

/// First [`HASH_LEN`] hex characters of SHA-256 over `uid` and `resourceVersion`.
fn version_hash(v: &SecretVersion) -> String {
    let mut h = Sha256::new();
    h.update(v.uid.as_bytes());
    // A separator no uid contains, so ("ab", "1") and ("a", "b1") differ.
    h.update(b"/");
    h.update(v.resource_version.as_bytes());
    hex::encode(h.finalize())[..HASH_LEN].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::references::Reference;

    fn checked(database: bool, uid: &str, rv: &str) -> Checked {
        Checked {
            reference: Reference {
                field: "f",
                name: "s".into(),
                key: "password".into(),
                database,
            },
            found: Found::Present(SecretVersion {
                uid: uid.into(),
                resource_version: rv.into(),
            }),
        }
    }

    #[test]
    fn the_hash_follows_the_database_secrets_version_only() {
        let a = database_secret_hash(&[checked(true, "u1", "10")]).unwrap();
        assert_eq!(a.len(), 16);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()));
        // Same version: same hash (no roll on a resync).
        assert_eq!(
            database_secret_hash(&[checked(true, "u1", "10")]),
            Some(a.clone())
        );
        // A write of the Secret, or a new Secret of that name: another hash (one roll).
        assert_ne!(
            database_secret_hash(&[checked(true, "u1", "11")]),
            Some(a.clone())
        );
        assert_ne!(
            database_secret_hash(&[checked(true, "u2", "10")]),
            Some(a.clone())
        );
        assert_ne!(
            database_secret_hash(&[checked(true, "u", "110")]),
            database_secret_hash(&[checked(true, "u1", "10")])
        );
        // The ntfy token or the OIDC client secret does not count.
        assert_eq!(database_secret_hash(&[checked(false, "u1", "10")]), None);
        let mut missing = checked(true, "u1", "10");
        missing.found = Found::NoSecret;
        assert_eq!(database_secret_hash(&[missing]), None);
    }

    #[test]
    fn annotations_carry_what_is_known() {
        assert_eq!(
            RollTriggers::key("k").annotations(),
            BTreeMap::from([(KEY_HASH_ANNOTATION.to_owned(), "k".to_owned())])
        );
        let both = RollTriggers {
            key_hash: "k".into(),
            database_secret: Some("d".into()),
        };
        assert_eq!(both.annotations()[DATABASE_SECRET_ANNOTATION], "d");
        assert_eq!(both.annotations().len(), 2);
    }
}
