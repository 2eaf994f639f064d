//! The Secrets a TerdutServer's spec names (its database password, the ntfy token, the OIDC
//! client secret, the Zalando credentials), and what was found for each. Pure: `observe.rs`
//! reads them, this decides what a missing one means (docs/runbook-server.md,
//! `SecretNotFound` / `SecretKeyNotFound`).
//!
//! The pods take each value by `secretKeyRef`, so a missing Secret or key would leave them in
//! `CreateContainerConfigError` with nothing on the TerdutServer saying why; the operator looks
//! first and says which Secret and key, and holds the Deployment back until they exist.

use terdut_crds::v1alpha1::{SecretKeyRef, TerdutServerSpec};

use super::database::{ZALANDO_PASSWORD_KEY, cluster_ref, zalando_credentials_secret};

/// One Secret reference of the spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    /// Where the spec names it, for the message.
    pub field: &'static str,
    pub name: String,
    pub key: String,
}

/// What a read of a referenced Secret found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// The Secret exists and holds the key.
    Present,
    /// No Secret of that name in the namespace.
    NoSecret,
    /// The Secret exists without that key.
    NoKey,
}

/// A reference and what its read found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    pub reference: Reference,
    pub found: Found,
}

/// Every Secret the pods of `spec` will read, in the order of the env table.
pub fn references(spec: &TerdutServerSpec) -> Vec<Reference> {
    let of = |field, r: &SecretKeyRef| Reference {
        field,
        name: r.name.clone(),
        key: r.key.clone(),
    };
    let mut refs = vec![];
    refs.extend(
        spec.database
            .password_secret_ref
            .as_ref()
            .map(|r| of("spec.database.passwordSecretRef", r)),
    );
    if let Some(cluster) = cluster_ref(&spec.database) {
        refs.push(Reference {
            field: "spec.database.postgresClusterRef (the cluster's credentials Secret)",
            name: zalando_credentials_secret(cluster),
            key: ZALANDO_PASSWORD_KEY.to_owned(),
        });
    }
    refs.extend(
        spec.notify
            .token_secret_ref
            .as_ref()
            .filter(|r| !r.name.is_empty())
            .map(|r| of("spec.notify.tokenSecretRef", r)),
    );
    if spec.oidc.enabled {
        refs.extend(
            spec.oidc
                .client_secret_ref
                .as_ref()
                .filter(|r| !r.name.is_empty())
                .map(|r| of("spec.oidc.clientSecretRef", r)),
        );
    }
    refs
}

/// The first reference that is not satisfied, as (reason, message).
pub fn first_missing(checked: &[Checked], namespace: &str) -> Option<(&'static str, String)> {
    checked.iter().find_map(|c| {
        let Reference { field, name, key } = &c.reference;
        match c.found {
            Found::Present => None,
            Found::NoSecret => Some((
                super::status::reasons::SECRET_NOT_FOUND,
                format!(
                    "Secret {name} ({field}) does not exist in namespace {namespace}; create it \
                     with the key {key}. The Deployment is applied once it exists"
                ),
            )),
            Found::NoKey => Some((
                super::status::reasons::SECRET_KEY_NOT_FOUND,
                format!(
                    "Secret {name} ({field}) has no key {key}; add it. The Deployment is applied \
                     once it is there"
                ),
            )),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::names::tests::server;
    use serde_json::json;

    #[test]
    fn every_secret_the_pods_read_is_listed_with_its_field() {
        let s = server(json!({
            "database": {"dsn": "postgres://t@db/t", "passwordSecretRef": {"name": "db", "key": "pw"}},
            "notify": {"tokenSecretRef": {"name": "ntfy", "key": "token"}},
            "oidc": {"enabled": true, "issuer": "https://i", "clientID": "c",
                     "clientSecretRef": {"name": "oidc", "key": "client-secret"}},
        }));
        let refs = references(&s.spec);
        let names: Vec<_> = refs.iter().map(|r| (r.field, r.name.as_str())).collect();
        assert_eq!(
            names,
            [
                ("spec.database.passwordSecretRef", "db"),
                ("spec.notify.tokenSecretRef", "ntfy"),
                ("spec.oidc.clientSecretRef", "oidc"),
            ]
        );
    }

    #[test]
    fn disabled_oidc_empty_names_and_zalando() {
        let s = server(json!({
            "database": {"postgresClusterRef": {"name": "pg"}},
            "notify": {"tokenSecretRef": {"name": "", "key": "token"}},
            "oidc": {"enabled": false, "clientSecretRef": {"name": "oidc", "key": "k"}},
        }));
        let refs = references(&s.spec);
        assert_eq!(refs.len(), 1);
        assert_eq!(
            refs[0].name,
            "terdut.pg.credentials.postgresql.acid.zalan.do"
        );
        assert_eq!(refs[0].key, "password");
    }

    #[test]
    fn the_first_missing_one_names_secret_key_and_field() {
        let r = |name: &str| Reference {
            field: "spec.notify.tokenSecretRef",
            name: name.into(),
            key: "token".into(),
        };
        let checked = [
            Checked {
                reference: r("a"),
                found: Found::Present,
            },
            Checked {
                reference: r("b"),
                found: Found::NoKey,
            },
            Checked {
                reference: r("c"),
                found: Found::NoSecret,
            },
        ];
        let (reason, message) = first_missing(&checked, "ns").unwrap();
        assert_eq!(reason, "SecretKeyNotFound");
        assert!(message.contains("Secret b (spec.notify.tokenSecretRef) has no key token"));
        let (reason, message) = first_missing(&checked[2..], "ns").unwrap();
        assert_eq!(reason, "SecretNotFound");
        assert!(message.contains("Secret c") && message.contains("namespace ns"));
        assert_eq!(first_missing(&checked[..1], "ns"), None);
    }
}
