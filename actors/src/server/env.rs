//! The container environment of terdut-server (terdut-api.md "Process environment").
//!
//! Mirrors the chart's env block (docs/design.md §10). Every secret reaches the pod by
//! `secretKeyRef`, never inline, so no key or password is in the Deployment (docs/design.md §6 step
//! 2).
//!
//! Assumption: durations are passed exactly as the user wrote them (`6h`, `1h30m`), because the
//! server reads them with Go's `time.ParseDuration`, which accepts precisely the syntax the CRD
//! admits (`terdut_crds::duration`).
//!
//! `spec.pod.extraEnv` comes after the operator's variables (so it can refer to them with
//! `$(VAR)`), but it cannot replace one of them: the operator's value wins and the name is
//! returned as a [`SpecWarning`]. A user who could override `TERDUT_OPERATOR_KEY` or
//! `TERDUT_DATABASE_DSN` from `extraEnv` would silently break what the operator relies on, and
//! each of them has its own spec field anyway.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, SecretKeySelector};
use terdut_crds::v1alpha1::{SecretKeyRef, TerdutServerSpec};

use super::database::DatabaseWiring;
use super::names::{KEY_SECRET_DATA_KEY, key_secret_name};
use super::warning::SpecWarning;

pub const LISTEN_ADDR: &str = "TERDUT_LISTEN_ADDR";
pub const PUBLIC_URL: &str = "TERDUT_PUBLIC_URL";
pub const DATABASE_DSN: &str = "TERDUT_DATABASE_DSN";
pub const PGPASSWORD: &str = "PGPASSWORD";
pub const SWEEPER_STALE_AFTER: &str = "TERDUT_SWEEPER_STALE_AFTER";
pub const SWEEPER_ARCHIVE_AFTER: &str = "TERDUT_SWEEPER_ARCHIVE_AFTER";
pub const NTFY_URL: &str = "TERDUT_NTFY_URL";
pub const NTFY_FALLBACK_TOPIC: &str = "TERDUT_NTFY_FALLBACK_TOPIC";
pub const NTFY_REPEAT_EVERY: &str = "TERDUT_NTFY_REPEAT_EVERY";
pub const NTFY_TOKEN: &str = "TERDUT_NTFY_TOKEN";
pub const OIDC_ENABLED: &str = "TERDUT_OIDC_ENABLED";
pub const OIDC_ISSUER: &str = "TERDUT_OIDC_ISSUER";
pub const OIDC_CLIENT_ID: &str = "TERDUT_OIDC_CLIENT_ID";
pub const OIDC_CLIENT_SECRET: &str = "TERDUT_OIDC_CLIENT_SECRET";
pub const OIDC_NAME: &str = "TERDUT_OIDC_NAME";
pub const OIDC_SCOPES: &str = "TERDUT_OIDC_SCOPES";
pub const OIDC_ALLOWED_GROUPS: &str = "TERDUT_OIDC_ALLOWED_GROUPS";
pub const OIDC_ADMIN_GROUP: &str = "TERDUT_OIDC_ADMIN_GROUP";
pub const OIDC_USERNAME_CLAIM: &str = "TERDUT_OIDC_USERNAME_CLAIM";
pub const OIDC_EMAIL_CLAIM: &str = "TERDUT_OIDC_EMAIL_CLAIM";
pub const OIDC_GROUPS_CLAIM: &str = "TERDUT_OIDC_GROUPS_CLAIM";
pub const OIDC_TRUST_EMAIL: &str = "TERDUT_OIDC_TRUST_EMAIL";
pub const SESSION_MAX_AGE: &str = "TERDUT_SESSION_MAX_AGE";
pub const PASSWORD_LOGIN: &str = "TERDUT_PASSWORD_LOGIN";
pub const OPERATOR_KEY: &str = "TERDUT_OPERATOR_KEY";

/// Variables that carry a secret: only ever set by `secretKeyRef`.
pub const SECRET_NAMES: [&str; 4] = [PGPASSWORD, NTFY_TOKEN, OIDC_CLIENT_SECRET, OPERATOR_KEY];

/// Every name the operator may set, whether or not it does for a given spec. `extraEnv` may set
/// none of them: e.g. `PGPASSWORD` belongs in `spec.database.passwordSecretRef` even when unset.
pub const RESERVED_NAMES: [&str; 25] = [
    LISTEN_ADDR,
    PUBLIC_URL,
    DATABASE_DSN,
    PGPASSWORD,
    SWEEPER_STALE_AFTER,
    SWEEPER_ARCHIVE_AFTER,
    NTFY_URL,
    NTFY_FALLBACK_TOPIC,
    NTFY_REPEAT_EVERY,
    NTFY_TOKEN,
    OIDC_ENABLED,
    OIDC_ISSUER,
    OIDC_CLIENT_ID,
    OIDC_CLIENT_SECRET,
    OIDC_NAME,
    OIDC_SCOPES,
    OIDC_ALLOWED_GROUPS,
    OIDC_ADMIN_GROUP,
    OIDC_USERNAME_CLAIM,
    OIDC_EMAIL_CLAIM,
    OIDC_GROUPS_CLAIM,
    OIDC_TRUST_EMAIL,
    SESSION_MAX_AGE,
    PASSWORD_LOGIN,
    OPERATOR_KEY,
];

/// The env list and what was dropped from `extraEnv`.
#[derive(Clone, Debug, PartialEq)]
pub struct ContainerEnv {
    pub env: Vec<EnvVar>,
    pub warnings: Vec<SpecWarning>,
}

/// The container's full env: the operator's variables, then `spec.pod.extraEnv` without
/// reserved or repeated names.
pub fn container_env(server: &str, spec: &TerdutServerSpec, db: &DatabaseWiring) -> ContainerEnv {
    let mut env = operator_env(server, spec, db);
    let mut warnings = vec![];
    // Position in `env` of each extraEnv name already taken, to replace in place.
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for var in &spec.pod.extra_env {
        if RESERVED_NAMES.contains(&var.name.as_str()) {
            warnings.push(SpecWarning::EnvReserved {
                name: var.name.clone(),
            });
        } else if let Some(&at) = seen.get(&var.name) {
            env[at] = var.clone();
            let w = SpecWarning::EnvDuplicate {
                name: var.name.clone(),
            };
            if !warnings.contains(&w) {
                warnings.push(w);
            }
        } else {
            seen.insert(var.name.clone(), env.len());
            env.push(var.clone());
        }
    }
    ContainerEnv { env, warnings }
}

/// The variables the operator sets itself, in the order of terdut-api.md's table.
fn operator_env(server: &str, spec: &TerdutServerSpec, db: &DatabaseWiring) -> Vec<EnvVar> {
    let oidc = &spec.oidc;
    let notify = &spec.notify;
    let mut env = vec![
        plain(LISTEN_ADDR, format!(":{}", spec.networking.service_port)),
        plain(PUBLIC_URL, format!("https://{}", spec.networking.hostname)),
        plain(DATABASE_DSN, &db.dsn),
    ];
    env.extend(db.password.as_ref().map(|r| secret(PGPASSWORD, r)));
    env.extend([
        plain(SWEEPER_STALE_AFTER, spec.sweeper.stale_after.as_str()),
        plain(SWEEPER_ARCHIVE_AFTER, spec.sweeper.archive_after.as_str()),
        plain(NTFY_URL, &notify.ntfy_url),
        plain(NTFY_FALLBACK_TOPIC, &notify.fallback_topic),
        plain(NTFY_REPEAT_EVERY, notify.repeat_every.as_str()),
    ]);
    env.extend(
        notify
            .token_secret_ref
            .as_ref()
            .map(|r| secret(NTFY_TOKEN, r)),
    );
    env.extend([
        plain(OIDC_ENABLED, bool_str(oidc.enabled)),
        plain(OIDC_ISSUER, &oidc.issuer),
        plain(OIDC_CLIENT_ID, &oidc.client_id),
    ]);
    env.extend(
        oidc.client_secret_ref
            .as_ref()
            .map(|r| secret(OIDC_CLIENT_SECRET, r)),
    );
    env.extend([
        plain(OIDC_NAME, &oidc.name),
        plain(OIDC_SCOPES, &oidc.scopes),
        plain(OIDC_ALLOWED_GROUPS, oidc.allowed_groups.join(",")),
        plain(OIDC_ADMIN_GROUP, &oidc.admin_group),
        plain(OIDC_USERNAME_CLAIM, &oidc.username_claim),
        plain(OIDC_EMAIL_CLAIM, &oidc.email_claim),
        plain(OIDC_GROUPS_CLAIM, &oidc.groups_claim),
        plain(OIDC_TRUST_EMAIL, bool_str(oidc.trust_email)),
        plain(SESSION_MAX_AGE, oidc.session_max_age.as_str()),
        plain(PASSWORD_LOGIN, bool_str(spec.password_login)),
        secret(
            OPERATOR_KEY,
            &SecretKeyRef {
                name: key_secret_name(server),
                key: KEY_SECRET_DATA_KEY.into(),
            },
        ),
    ]);
    env
}

/// A literal variable. An empty value is written as no `value` at all, which Kubernetes treats
/// the same (the variable is set, to ""), because the API server drops `value: ""` and the
/// object read back would otherwise never match what was applied (drift.rs).
fn plain(name: &str, value: impl AsRef<str>) -> EnvVar {
    let value = value.as_ref();
    EnvVar {
        name: name.into(),
        value: (!value.is_empty()).then(|| value.to_owned()),
        value_from: None,
    }
}

fn secret(name: &str, r: &SecretKeyRef) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: r.name.clone(),
                key: r.key.clone(),
                optional: None,
            }),
            ..Default::default()
        }),
    }
}

fn bool_str(b: bool) -> &'static str {
    if b { "true" } else { "false" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::names::tests::server;
    use serde_json::json;

    fn db() -> DatabaseWiring {
        DatabaseWiring {
            dsn: "postgres://terdut@db:5432/terdut".into(),
            password: Some(SecretKeyRef {
                name: "db".into(),
                key: "password".into(),
            }),
        }
    }

    fn full_spec() -> TerdutServerSpec {
        server(json!({
            "database": {"dsn": "postgres://terdut@db:5432/terdut"},
            "networking": {"hostname": "terdut.example.com", "servicePort": 9090},
            "sweeper": {"staleAfter": "1h30m", "archiveAfter": "720h"},
            "notify": {"ntfyURL": "http://ntfy", "fallbackTopic": "ops", "repeatEvery": "5m",
                       "tokenSecretRef": {"name": "ntfy", "key": "token"}},
            "oidc": {"enabled": true, "issuer": "https://idp", "clientID": "terdut",
                     "clientSecretRef": {"name": "oidc", "key": "client-secret"},
                     "allowedGroups": ["a", "b"], "adminGroup": "admins", "trustEmail": true},
            "passwordLogin": false,
        }))
        .spec
    }

    fn get<'a>(env: &'a [EnvVar], name: &str) -> Option<&'a EnvVar> {
        env.iter().find(|e| e.name == name)
    }

    fn value<'a>(env: &'a [EnvVar], name: &str) -> Option<&'a str> {
        get(env, name).map(|e| e.value.as_deref().unwrap_or(""))
    }

    fn secret_ref(env: &[EnvVar], name: &str) -> Option<(String, String)> {
        let s = get(env, name)?
            .value_from
            .as_ref()?
            .secret_key_ref
            .as_ref()?;
        Some((s.name.clone(), s.key.clone()))
    }

    #[test]
    fn full_spec_maps_every_variable() {
        let env = container_env("terdut", &full_spec(), &db()).env;
        let expect = [
            (LISTEN_ADDR, ":9090"),
            (PUBLIC_URL, "https://terdut.example.com"),
            (DATABASE_DSN, "postgres://terdut@db:5432/terdut"),
            (SWEEPER_STALE_AFTER, "1h30m"),
            (SWEEPER_ARCHIVE_AFTER, "720h"),
            (NTFY_URL, "http://ntfy"),
            (NTFY_FALLBACK_TOPIC, "ops"),
            (NTFY_REPEAT_EVERY, "5m"),
            (OIDC_ENABLED, "true"),
            (OIDC_ISSUER, "https://idp"),
            (OIDC_CLIENT_ID, "terdut"),
            (OIDC_NAME, "SSO"),
            (OIDC_SCOPES, "openid profile email"),
            (OIDC_ALLOWED_GROUPS, "a,b"),
            (OIDC_ADMIN_GROUP, "admins"),
            (OIDC_USERNAME_CLAIM, "preferred_username"),
            (OIDC_EMAIL_CLAIM, "email"),
            (OIDC_GROUPS_CLAIM, "groups"),
            (OIDC_TRUST_EMAIL, "true"),
            (SESSION_MAX_AGE, "12h"),
            (PASSWORD_LOGIN, "false"),
        ];
        for (name, want) in expect {
            assert_eq!(value(&env, name), Some(want), "{name}");
        }
        let r = |a: &str, b: &str| Some((a.to_owned(), b.to_owned()));
        assert_eq!(secret_ref(&env, PGPASSWORD), r("db", "password"));
        assert_eq!(secret_ref(&env, NTFY_TOKEN), r("ntfy", "token"));
        assert_eq!(
            secret_ref(&env, OIDC_CLIENT_SECRET),
            r("oidc", "client-secret")
        );
        assert_eq!(
            secret_ref(&env, OPERATOR_KEY),
            r("terdut-operator-key", "token")
        );
        assert_eq!(env.len(), expect.len() + SECRET_NAMES.len());
    }

    #[test]
    fn defaults_and_optional_secrets() {
        let spec = server(json!({"database": {"dsn": "postgres://x"}})).spec;
        let wiring = DatabaseWiring {
            dsn: "postgres://x".into(),
            password: None,
        };
        let env = container_env("terdut", &spec, &wiring).env;
        assert_eq!(value(&env, LISTEN_ADDR), Some(":8080"));
        assert_eq!(value(&env, SWEEPER_STALE_AFTER), Some("6h"));
        assert_eq!(value(&env, SWEEPER_ARCHIVE_AFTER), Some("168h"));
        assert_eq!(value(&env, NTFY_REPEAT_EVERY), Some("15m"));
        assert_eq!(value(&env, OIDC_ENABLED), Some("false"));
        assert_eq!(value(&env, PASSWORD_LOGIN), Some("true"));
        // Empty strings are set, as "" (no `value`), so the server never falls back to a default
        // of its own for something the spec says is empty.
        assert_eq!(get(&env, NTFY_URL).unwrap().value, None);
        assert_eq!(value(&env, OIDC_ALLOWED_GROUPS), Some(""));
        for absent in [PGPASSWORD, NTFY_TOKEN, OIDC_CLIENT_SECRET] {
            assert!(get(&env, absent).is_none(), "{absent}");
        }
        assert!(secret_ref(&env, OPERATOR_KEY).is_some());
    }

    #[test]
    fn no_secret_is_ever_inline() {
        let mut spec = full_spec();
        // Even a user trying to inline one through extraEnv does not get it into the pod.
        for name in SECRET_NAMES {
            spec.pod.extra_env.push(EnvVar {
                name: name.into(),
                value: Some("hunter2".into()),
                value_from: None,
            });
        }
        let out = container_env("terdut", &spec, &db());
        for name in SECRET_NAMES {
            let vars: Vec<_> = out.env.iter().filter(|e| e.name == name).collect();
            assert_eq!(vars.len(), 1, "{name}");
            assert_eq!(vars[0].value, None, "{name} is inline");
            assert!(secret_ref(&out.env, name).is_some(), "{name}");
        }
        assert!(!format!("{:?}", out.env).contains("hunter2"));
    }

    #[test]
    fn extra_env_is_appended_but_cannot_override() {
        let mut spec = full_spec();
        spec.pod.extra_env = vec![
            EnvVar {
                name: "TZ".into(),
                value: Some("UTC".into()),
                value_from: None,
            },
            EnvVar {
                name: DATABASE_DSN.into(),
                value: Some("postgres://evil".into()),
                value_from: None,
            },
            EnvVar {
                name: "TZ".into(),
                value: Some("Europe/Berlin".into()),
                value_from: None,
            },
        ];
        let out = container_env("terdut", &spec, &db());
        assert_eq!(
            value(&out.env, DATABASE_DSN),
            Some("postgres://terdut@db:5432/terdut")
        );
        assert_eq!(out.env.iter().filter(|e| e.name == "TZ").count(), 1);
        assert_eq!(value(&out.env, "TZ"), Some("Europe/Berlin"));
        assert_eq!(out.env.last().unwrap().name, "TZ");
        assert_eq!(
            out.warnings,
            vec![
                SpecWarning::EnvReserved {
                    name: DATABASE_DSN.into()
                },
                SpecWarning::EnvDuplicate { name: "TZ".into() },
            ]
        );
    }

    #[test]
    fn names_are_unique_and_reserved() {
        let env = container_env("terdut", &full_spec(), &db()).env;
        let mut names: Vec<_> = env.iter().map(|e| e.name.as_str()).collect();
        for n in &names {
            assert!(RESERVED_NAMES.contains(n), "{n} not reserved");
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), env.len());
    }
}
