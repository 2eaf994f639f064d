//! Key material of the stand-in: the formats of terdut-api.md (`tdsa_`/`tdik_` + 48 lowercase
//! hex), random generation, and hashing so that integration keys and webhook tokens are stored
//! (and persisted) only as SHA-256 digests, compared in constant time.

use rand::RngCore;
use sha2::{Digest, Sha256};

pub const OPERATOR_KEY_PREFIX: &str = "tdsa_";
pub const INTEGRATION_KEY_PREFIX: &str = "tdik_";

/// A fresh operator key in the format the operator generates (docs/design.md §6).
pub fn generate_operator_key() -> String {
    format!("{OPERATOR_KEY_PREFIX}{}", random_hex(24))
}

/// A fresh integration key, `tdik_` + 48 hex.
pub fn generate_integration_key() -> String {
    format!("{INTEGRATION_KEY_PREFIX}{}", random_hex(24))
}

/// The random path segment of a webhook URL (assumption: 32 lowercase hex characters).
pub fn generate_token() -> String {
    random_hex(16)
}

/// Whether `key` is `prefix` followed by 48 lowercase hex characters.
pub fn well_formed(key: &str, prefix: &str) -> bool {
    key.strip_prefix(prefix).is_some_and(|hex| {
        hex.len() == 48 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// SHA-256 of a secret, lowercase hex: what the stand-in keeps instead of the secret.
pub fn digest_hex(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Compares two secrets in time independent of where they differ (and of their lengths, by
/// comparing their digests).
pub fn constant_time_eq(a: &str, b: &str) -> bool {
    digests_eq(&Sha256::digest(a.as_bytes()), &Sha256::digest(b.as_bytes()))
}

/// Compares two digests (raw or hex) in constant time.
pub fn digests_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut buf);
    hex::encode(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_are_well_formed_and_distinct() {
        let a = generate_integration_key();
        assert!(well_formed(&a, INTEGRATION_KEY_PREFIX), "{a}");
        assert!(well_formed(&generate_operator_key(), OPERATOR_KEY_PREFIX));
        assert_ne!(a, generate_integration_key());
        assert_eq!(generate_token().len(), 32);
    }

    #[test]
    fn refuses_malformed_keys() {
        assert!(!well_formed("tdsa_ABC", OPERATOR_KEY_PREFIX));
        assert!(!well_formed(
            &format!("tdsa_{}", "G".repeat(48)),
            OPERATOR_KEY_PREFIX
        ));
        assert!(!well_formed(
            &format!("tdik_{}", "a".repeat(48)),
            OPERATOR_KEY_PREFIX
        ));
    }

    #[test]
    fn compares() {
        assert!(constant_time_eq("abc", "abc"));
        assert!(!constant_time_eq("abc", "abd"));
        assert!(!constant_time_eq("abc", "abcd"));
    }
}
