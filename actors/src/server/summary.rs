//! What a TerdutServer's status says beside its conditions, for a user reading it
//! (docs/design.md §7): the URL the operator calls, the available pods, the key's fingerprint.
//!
//! Not the server's version: the API contract (docs/terdut-api.md) has no call that reports
//! one (`whoami` answers the account and its scope), so there is nothing true to show.

use super::key::KeySecretState;

/// `status.url`, `status.availableReplicas`, `status.keyFingerprint`; `None` leaves a field out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub url: Option<String>,
    pub available_replicas: Option<i32>,
    pub key_fingerprint: Option<String>,
}

/// The summary of one pass. `url` is where the operator sends the key (`None` while the name
/// is invalid: no client is built then); `available` is the Deployment's `availableReplicas`
/// when the server controls a Deployment; the fingerprint is there while the key is usable,
/// like `credentialsSecretRef`.
pub fn summary(url: Option<&str>, key: &KeySecretState, available: Option<i32>) -> Summary {
    Summary {
        url: url.map(str::to_owned),
        available_replicas: available,
        key_fingerprint: match key {
            KeySecretState::Present(k) => Some(k.fingerprint()),
            KeySecretState::Missing | KeySecretState::Invalid | KeySecretState::NotOwned => None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::key::OperatorKeyValue;

    #[test]
    fn a_usable_key_shows_its_fingerprint_never_itself() {
        let k = OperatorKeyValue::from_entropy([3; 24]);
        let s = summary(
            Some("http://t.ns.svc.cluster.local.:8080"),
            &KeySecretState::Present(k.clone()),
            Some(1),
        );
        assert_eq!(
            s.url.as_deref(),
            Some("http://t.ns.svc.cluster.local.:8080")
        );
        assert_eq!(s.available_replicas, Some(1));
        assert_eq!(s.key_fingerprint, Some(k.fingerprint()));
        assert!(!format!("{s:?}").contains(&k.expose()[5..]));
        for key in [
            KeySecretState::Missing,
            KeySecretState::Invalid,
            KeySecretState::NotOwned,
        ] {
            assert_eq!(summary(None, &key, None), Summary::default());
        }
    }
}
