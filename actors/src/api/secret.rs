//! The one type for key material: the operator key, an integration's webhook key and its
//! webhook URL (terdut-api.md "both are secrets and never appear in a CR's spec or status, a log
//! line or an Event"; docs/design.md §4.5, §6). The operator key's own rules (its format, its
//! generation and hash) are methods of the same type (`server/key.rs`).
//!
//! The type has no `Serialize`, and its `Debug` and `Display` print `<redacted>`, so putting one
//! in a `tracing` field, an error or a status struct shows nothing. The value comes out only
//! through [`SecretString::expose`], which makes every use greppable. Its memory is overwritten
//! with zeros when it is dropped (`zeroize`), so a freed key does not linger in the heap for a
//! core dump or a later allocation to show.

use std::fmt;

use serde::{Deserialize, Deserializer};
use zeroize::Zeroize as _;

/// The text shown in place of a secret.
pub const REDACTED: &str = "<redacted>";

/// A secret string: redacted in `Debug` and `Display`, readable only through
/// [`expose`](Self::expose).
#[derive(Clone, PartialEq, Eq)]
pub struct SecretString(String);

impl SecretString {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself. Call it only where the value leaves the process on purpose: the
    /// `Authorization` header, or the data of the webhook Secret.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Drop for SecretString {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

/// Says so to the type system: [`SecretString`] wipes its value when it is dropped.
impl zeroize::ZeroizeOnDrop for SecretString {}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl From<String> for SecretString {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl From<&str> for SecretString {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

/// Deserializing is needed for the one response that carries secrets (integration create);
/// serializing is deliberately not offered.
impl<'de> Deserialize<'de> for SecretString {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self)
    }
}

/// The bearer key of the `terdut-operator` service account of one TerdutServer (docs/design.md §6).
pub type OperatorKey = SecretString;
/// The key of an integration's webhook (`tdik_` + 48 hex), shown by the server once.
pub type IntegrationKey = SecretString;
/// The webhook URL of an integration; it embeds the integration token, so it is a secret too.
pub type WebhookUrl = SecretString;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_prints_the_value() {
        let s = SecretString::from("tdsa_0123456789abcdef0123456789abcdef0123456789abcdef");
        assert_eq!(format!("{s:?}"), REDACTED);
        assert_eq!(format!("{s}"), REDACTED);
        assert_eq!(
            format!("{:#?}", Some(&s)),
            format!("Some(\n    {REDACTED},\n)")
        );
        assert!(s.expose().starts_with("tdsa_"));
    }

    /// Every kind of key material the operator holds is this one type, which wipes its value
    /// when dropped (the operator key had a type of its own, neither shared nor wiped).
    #[test]
    fn every_key_is_the_one_type_that_is_wiped_when_dropped() {
        use std::any::TypeId;
        fn wiped_on_drop<T: zeroize::ZeroizeOnDrop>() {}
        wiped_on_drop::<SecretString>();
        for (name, id) in [
            ("OperatorKey", TypeId::of::<OperatorKey>()),
            ("IntegrationKey", TypeId::of::<IntegrationKey>()),
            ("WebhookUrl", TypeId::of::<WebhookUrl>()),
            (
                "server::key::OperatorKeyValue",
                TypeId::of::<crate::server::key::OperatorKeyValue>(),
            ),
        ] {
            assert_eq!(id, TypeId::of::<SecretString>(), "{name}");
        }
    }

    #[test]
    fn deserializes_from_a_json_string() {
        let s: SecretString = serde_json::from_str("\"tdik_abc\"").unwrap();
        assert_eq!(s.expose(), "tdik_abc");
    }
}
