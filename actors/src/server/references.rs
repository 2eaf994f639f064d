//! The Secrets a TerdutServer's spec names (its database password, the ntfy token, the OIDC
//! client secret, the Zalando or CloudNativePG credentials), and what was found for each. Pure:
//! `observe.rs` reads them, this decides what a missing one means (docs/runbook-server.md,
//! `SecretNotFound` / `SecretKeyNotFound`).
//!
//! The pods take each value by `secretKeyRef`, so a missing Secret or key would leave them in
//! `CreateContainerConfigError` with nothing on the TerdutServer saying why; the operator looks
//! first and says which Secret and key, and holds the Deployment back until they exist. What a
//! read keeps is the key names and the Secret's identity ([`SecretVersion`]), never a value:
//! the version of the database password's Secret is what rolls the pods when it is rotated
//! (`rotation.rs`, docs/design.md §8).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use terdut_crds::v1alpha1::{SecretKeyRef, TerdutServerSpec};

use super::cnpg::CnpgObservation;
use super::database::{ZALANDO_PASSWORD_KEY, cluster_ref, zalando_credentials_secret};

/// One Secret reference of the spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    /// Where the spec names it, for the message.
    pub field: &'static str,
    pub name: String,
    pub key: String,
    /// Whether the pods log in to the database with it (`PGPASSWORD`): its rotation rolls them.
    pub database: bool,
}

/// Which incarnation and write of a Secret was read: its `uid` and `resourceVersion`, which
/// change with every write of it (and a delete and create), and say nothing about its data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretVersion {
    pub uid: String,
    pub resource_version: String,
}

impl SecretVersion {
    pub fn of(meta: &ObjectMeta) -> Self {
        Self {
            uid: meta.uid.clone().unwrap_or_default(),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
        }
    }
}

/// What a read of a referenced Secret found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// The Secret exists and holds the key.
    Present(SecretVersion),
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

/// Every Secret the pods of `spec` will read, in the order of the env table. `cnpg` is the
/// lookup of `spec.database.cnpgClusterRef`: the Cluster's bootstrap names its Secret.
pub fn references(spec: &TerdutServerSpec, cnpg: Option<&CnpgObservation>) -> Vec<Reference> {
    let of = |field, r: &SecretKeyRef| Reference {
        field,
        name: r.name.clone(),
        key: r.key.clone(),
        database: false,
    };
    let database = |field, r: &SecretKeyRef| Reference {
        database: true,
        ..of(field, r)
    };
    let mut refs = vec![];
    refs.extend(
        spec.database
            .password_secret_ref
            .as_ref()
            .map(|r| database("spec.database.passwordSecretRef", r)),
    );
    if let Some(cluster) = cluster_ref(&spec.database) {
        refs.push(database(
            "spec.database.postgresClusterRef (the cluster's credentials Secret)",
            &SecretKeyRef {
                name: zalando_credentials_secret(cluster),
                key: ZALANDO_PASSWORD_KEY.to_owned(),
            },
        ));
    }
    if spec.database.cnpg_cluster_ref.is_some()
        && let Some(secret) = cnpg.and_then(CnpgObservation::password_secret)
    {
        refs.push(database(
            "spec.database.cnpgClusterRef (the Cluster's application Secret)",
            &secret,
        ));
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
        let Reference {
            field, name, key, ..
        } = &c.reference;
        match c.found {
            Found::Present(_) => None,
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
        let refs = references(&s.spec, None);
        let names: Vec<_> = refs
            .iter()
            .map(|r| (r.field, r.name.as_str(), r.database))
            .collect();
        assert_eq!(
            names,
            [
                ("spec.database.passwordSecretRef", "db", true),
                ("spec.notify.tokenSecretRef", "ntfy", false),
                ("spec.oidc.clientSecretRef", "oidc", false),
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
        let refs = references(&s.spec, None);
        assert_eq!(refs.len(), 1);
        assert_eq!(
            refs[0].name,
            "terdut.pg.credentials.postgresql.acid.zalan.do"
        );
        assert_eq!(refs[0].key, "password");
        assert!(refs[0].database);
    }

    #[test]
    fn the_cnpg_app_secret_is_named_by_the_cluster_once_it_is_found() {
        let s = server(json!({"database": {"cnpgClusterRef": {"name": "pg"}}}));
        // Not found yet: the database is what is missing, not a Secret.
        assert!(references(&s.spec, Some(&CnpgObservation::Missing)).is_empty());
        assert!(references(&s.spec, None).is_empty());
        let cluster = json!({"spec": {"bootstrap": {"initdb": {"secret": {"name": "pg-owner"}}}}});
        let found = CnpgObservation::from_object("pg", &cluster, None);
        let refs = references(&s.spec, Some(&found));
        assert_eq!(refs.len(), 1);
        assert_eq!(
            (
                refs[0].name.as_str(),
                refs[0].key.as_str(),
                refs[0].database
            ),
            ("pg-owner", "password", true)
        );
        assert!(
            refs[0].field.contains("cnpgClusterRef"),
            "{}",
            refs[0].field
        );
        // A lookup left over from another spec names nothing.
        let byo = server(json!({"database": {"dsn": "postgres://t@db/t"}}));
        assert!(references(&byo.spec, Some(&found)).is_empty());
    }

    #[test]
    fn the_first_missing_one_names_secret_key_and_field() {
        let r = |name: &str| Reference {
            field: "spec.notify.tokenSecretRef",
            name: name.into(),
            key: "token".into(),
            database: false,
        };
        let checked = [
            Checked {
                reference: r("a"),
                found: Found::Present(SecretVersion {
                    uid: "u".into(),
                    resource_version: "1".into(),
                }),
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
