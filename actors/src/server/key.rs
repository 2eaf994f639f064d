//! The operator key: its generation, format, hash and Secret (docs/design.md §2, §6).
//!
//! One key per TerdutServer, `tdsa_` + 48 lowercase hex, in the Secret `<server>-operator-key`
//! (data key `token`). The Secret is created once and never overwritten while it exists, since the
//! running server was seeded with it; deleting it is how a user rotates the key (docs/design.md
//! §6). The key value is an [`OperatorKeyValue`], the one type for key material
//! (`api/secret.rs`): it never prints itself and is zeroed when dropped.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rand::TryRngCore;
use rand::rngs::OsRng;
use sha2::{Digest, Sha256};
use zeroize::{Zeroize as _, Zeroizing};

pub use crate::api::SecretString as OperatorKeyValue;

use super::names::{KEY_SECRET_DATA_KEY, Parent, key_secret_name, secret_labels};

/// Every operator key starts with this (terdut-api.md "Operator account").
pub const KEY_PREFIX: &str = "tdsa_";
/// Lowercase hex characters after the prefix: 24 random bytes, 192 bits.
pub const KEY_HEX_LEN: usize = 48;
/// Pod template annotation holding [`OperatorKeyValue::hash`]: a replaced Secret changes it and
/// so rolls the pods, which re-seed the server's account from the new key (docs/design.md §6 step
/// 2).
pub const KEY_HASH_ANNOTATION: &str = "terdut.ryuvia.com/operator-key-hash";
/// Hex characters of the hash kept in the annotation. 64 bits tell keys apart; the full digest
/// is not needed and would only be a better offline-guessing target (though 192 random bits
/// make guessing hopeless either way).
pub const KEY_HASH_LEN: usize = 16;
/// Hex characters of the hash in `status.keyFingerprint`: enough to tell keys apart by eye, and
/// a prefix of the pod annotation, so the two can be compared.
pub const KEY_FINGERPRINT_LEN: usize = 12;

/// A key that is not `tdsa_` + 48 lowercase hex. Carries no part of the value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("operator key is not tdsa_ followed by 48 lowercase hex characters")]
pub struct InvalidKey;

/// The OS random source failed; retried by the caller, never papered over with a weaker source.
#[derive(Debug, thiserror::Error)]
#[error("the OS random number generator failed: {0}")]
pub struct KeyGenError(String);

impl KeyGenError {
    #[cfg(test)]
    pub(crate) fn for_test() -> Self {
        Self("test".into())
    }
}

/// The operator key's own rules, on the one type for key material: its format, its generation
/// and its hash. `expose` is the only way to the value.
impl OperatorKeyValue {
    /// A fresh key from the OS CSPRNG (the only impure function of this module).
    pub fn generate() -> Result<Self, KeyGenError> {
        let mut bytes = [0u8; KEY_HEX_LEN / 2];
        let filled = OsRng
            .try_fill_bytes(&mut bytes)
            .map_err(|e| KeyGenError(e.to_string()));
        let key = filled.map(|()| Self::from_entropy(bytes));
        bytes.zeroize();
        key
    }

    /// The key for given random bytes; lets tests make keys deterministically.
    pub fn from_entropy(bytes: [u8; KEY_HEX_LEN / 2]) -> Self {
        let hex = Zeroizing::new(hex::encode(bytes));
        let mut key = String::with_capacity(KEY_PREFIX.len() + KEY_HEX_LEN);
        key.push_str(KEY_PREFIX);
        key.push_str(&hex);
        Self::new(key)
    }

    /// Accepts exactly the format the server expects.
    pub fn parse(s: &str) -> Result<Self, InvalidKey> {
        if is_valid_key(s) {
            Ok(Self::new(s))
        } else {
            Err(InvalidKey)
        }
    }

    /// Truncated SHA-256 hex of the key, for [`KEY_HASH_ANNOTATION`].
    pub fn hash(&self) -> String {
        let digest = hex::encode(Sha256::digest(self.expose().as_bytes()));
        digest[..KEY_HASH_LEN].to_owned()
    }

    /// The first [`KEY_FINGERPRINT_LEN`] characters of [`Self::hash`], for
    /// `status.keyFingerprint`: which key the operator uses, never the key (192 random bits
    /// cannot be found from 48 bits of their hash).
    pub fn fingerprint(&self) -> String {
        self.hash()[..KEY_FINGERPRINT_LEN].to_owned()
    }
}

/// True when `s` is `tdsa_` followed by exactly 48 lowercase hex characters.
pub fn is_valid_key(s: &str) -> bool {
    s.strip_prefix(KEY_PREFIX).is_some_and(|hex| {
        hex.len() == KEY_HEX_LEN
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// The key Secret, to be created (never applied over an existing one, docs/design.md §6).
///
/// Created once, never written again by the operator (deleting it is how a user rotates the
/// key, docs/design.md §6). Deliberately not `immutable`: the kubelet never refreshes an
/// immutable Secret it has cached, so after a rotation the new pods, started while the old
/// ones still ran on the node, got the old key (found on a real node, docs/node.md).
pub fn key_secret(parent: &Parent, key: &OperatorKeyValue) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(key_secret_name(&parent.name)),
            namespace: Some(parent.namespace.clone()),
            labels: Some(secret_labels(&parent.name)),
            owner_references: Some(vec![parent.owner.clone()]),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            KEY_SECRET_DATA_KEY.to_owned(),
            ByteString(key.expose().as_bytes().to_vec()),
        )])),
        ..Default::default()
    }
}

/// What the operator found where its key Secret should be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeySecretState {
    /// Ours and well-formed: use it.
    Present(OperatorKeyValue),
    /// Not there: create a new one (first start, or the user deleted it to rotate, docs/design.md
    /// §6).
    Missing,
    /// Ours but its `token` is absent or malformed. Fails closed: not overwritten (docs/design.md
    /// §6), reported so the user deletes it and the operator makes a new one.
    Invalid,
    /// A Secret of that name not controlled by this TerdutServer: never adopted (docs/design.md
    /// §1). Also seen briefly after a server is recreated under the same name, until GC removes
    /// the old server's Secret.
    NotOwned,
}

/// Classifies the observed key Secret (`None`: not in the cache). `unlisted`: the metadata of
/// a Secret of that name the label-selected cache does not show; it is someone else's (one the
/// operator controls is read in full and given as `observed`), so it is never overwritten and
/// its data is never read or used (docs/design.md §1, §6).
pub fn classify_key_secret(
    parent: &Parent,
    observed: Option<&Secret>,
    unlisted: Option<&ObjectMeta>,
) -> KeySecretState {
    let Some(secret) = observed else {
        return match unlisted {
            Some(_) => KeySecretState::NotOwned,
            None => KeySecretState::Missing,
        };
    };
    let ours = secret
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.uid == parent.owner.uid && o.controller == Some(true));
    if !ours {
        return KeySecretState::NotOwned;
    }
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(KEY_SECRET_DATA_KEY))
        .and_then(|b| std::str::from_utf8(&b.0).ok())
        .and_then(|s| OperatorKeyValue::parse(s).ok())
        .map_or(KeySecretState::Invalid, KeySecretState::Present)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::names::tests::parent;
    use crate::server::names::{LABEL_MANAGED, LABEL_SERVER};

    fn key(n: u8) -> OperatorKeyValue {
        OperatorKeyValue::from_entropy([n; 24])
    }

    #[test]
    fn generated_keys_have_the_server_format_and_differ() {
        let a = OperatorKeyValue::generate().unwrap();
        let b = OperatorKeyValue::generate().unwrap();
        assert!(is_valid_key(a.expose()), "bad format");
        assert_ne!(a, b);
    }

    #[test]
    fn validator_accepts_only_the_exact_format() {
        let good = format!("tdsa_{}", "0123456789abcdef".repeat(3));
        assert!(is_valid_key(&good));
        for bad in [
            String::new(),
            "tdsa_".into(),
            good.to_uppercase(),
            format!("tdsa_{}", "A".repeat(48)),
            format!("tdsa_{}", "a".repeat(47)),
            format!("tdsa_{}", "a".repeat(49)),
            format!("tdik_{}", "a".repeat(48)),
            format!("tdsa_{}g", "a".repeat(47)),
            format!("{good}\n"),
        ] {
            assert!(!is_valid_key(&bad), "{bad:?}");
        }
    }

    #[test]
    fn debug_never_shows_the_value() {
        let k = key(7);
        let printed = format!("{k:?} {:?}", KeySecretState::Present(k.clone()));
        assert!(!printed.contains(&k.expose()[5..]));
        assert!(printed.contains("<redacted>"));
    }

    #[test]
    fn hash_is_short_stable_and_distinguishes_keys() {
        assert_eq!(key(1).hash().len(), KEY_HASH_LEN);
        assert_eq!(key(1).hash(), key(1).hash());
        assert_ne!(key(1).hash(), key(2).hash());
        assert!(key(1).hash().bytes().all(|b| b.is_ascii_hexdigit()));
    }

    #[test]
    fn the_fingerprint_is_a_prefix_of_the_pod_annotation() {
        let k = key(5);
        assert_eq!(k.fingerprint().len(), 12);
        assert!(k.hash().starts_with(&k.fingerprint()));
        assert_ne!(key(5).fingerprint(), key(6).fingerprint());
    }

    #[test]
    fn hash_is_truncated_sha256() {
        // sha256("tdsa_" + "00" * 24), first 16 hex characters, computed independently.
        let k = OperatorKeyValue::from_entropy([0; 24]);
        let full = hex::encode(Sha256::digest(k.expose().as_bytes()));
        assert_eq!(k.hash(), full[..16]);
    }

    #[test]
    fn secret_is_owned_labelled_mutable_and_carries_the_token() {
        let p = parent();
        let s = key_secret(&p, &key(3));
        assert_eq!(s.metadata.name.as_deref(), Some("terdut-operator-key"));
        assert_eq!(s.metadata.namespace.as_deref(), Some("oncall"));
        assert_eq!(s.metadata.owner_references, Some(vec![p.owner.clone()]));
        let labels = s.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[LABEL_MANAGED], "true");
        assert_eq!(labels[LABEL_SERVER], "terdut");
        assert_eq!(s.type_.as_deref(), Some("Opaque"));
        // Mutable, or a kubelet keeps serving the old key after a rotation.
        assert_eq!(s.immutable, None);
        let token = &s.data.as_ref().unwrap()["token"];
        assert_eq!(token.0, key(3).expose().as_bytes());
        assert!(s.string_data.is_none());
    }

    #[test]
    fn classify_reads_back_what_key_secret_wrote() {
        let p = parent();
        let s = key_secret(&p, &key(4));
        assert_eq!(
            classify_key_secret(&p, Some(&s), None),
            KeySecretState::Present(key(4))
        );
        assert_eq!(classify_key_secret(&p, None, None), KeySecretState::Missing);
    }

    #[test]
    fn classify_fails_closed_on_a_bad_token() {
        let p = parent();
        let mut s = key_secret(&p, &key(4));
        s.data
            .as_mut()
            .unwrap()
            .insert("token".into(), ByteString(b"tdsa_not-hex-at-all".to_vec()));
        assert_eq!(
            classify_key_secret(&p, Some(&s), None),
            KeySecretState::Invalid
        );
        s.data = None;
        assert_eq!(
            classify_key_secret(&p, Some(&s), None),
            KeySecretState::Invalid
        );
    }

    #[test]
    fn classify_never_adopts_a_foreign_secret() {
        let p = parent();
        let mut s = key_secret(&p, &key(4));
        s.metadata.owner_references.as_mut().unwrap()[0].uid = "old-server".into();
        assert_eq!(
            classify_key_secret(&p, Some(&s), None),
            KeySecretState::NotOwned
        );
        s.metadata.owner_references = None;
        assert_eq!(
            classify_key_secret(&p, Some(&s), None),
            KeySecretState::NotOwned
        );
        // An unlabelled one the cache cannot see, known by its metadata only.
        assert_eq!(
            classify_key_secret(&p, None, Some(&s.metadata)),
            KeySecretState::NotOwned
        );
    }
}
