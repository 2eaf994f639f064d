//! `spec.database.cnpgClusterRef` -> the DSN and password reference the pods get, for a
//! CloudNativePG `Cluster` in the server's namespace (docs/design.md §8).
//!
//! CloudNativePG names what it makes after the Cluster: the Service of the primary is
//! `<cluster>-rw`, and the bootstrap creates one database with an owner (both `app` by
//! default) whose password it keeps in the application Secret `<cluster>-app` (or the Secret
//! the bootstrap names). The DSN points at that Service under its absolute name, logs in as that
//! owner, and the password reaches the pods by `secretKeyRef`: the operator never reads it.
//!
//! What was observed is an input ([`CnpgObservation`]); `observe.rs` does the lookups (a missing
//! CRD is data, not an error, as for Zalando), this module only decides.

use terdut_crds::v1alpha1::SecretKeyRef;
use terdut_crds::v1alpha1::server::CnpgClusterRef;

use super::status::reasons;
use super::wiring::{DatabaseIssue, DatabaseOutcome, DatabaseWiring, pct_encode};

/// API group of CloudNativePG.
pub const GROUP: &str = "postgresql.cnpg.io";
/// The version its `Cluster` is served at.
pub const VERSION: &str = "v1";
pub const KIND: &str = "Cluster";
pub const PLURAL: &str = "clusters";
/// Data key of the password in the application Secret.
pub const PASSWORD_KEY: &str = "password";
/// The database (and, unless the bootstrap names another, its owner) CloudNativePG creates.
pub const DEFAULT_DATABASE: &str = "app";
/// `status.phase` of a Cluster that serves, when it reports no `Ready` condition (older
/// CloudNativePG versions).
pub const HEALTHY_PHASE: &str = "Cluster in healthy state";

/// What the actor found when it looked up `spec.database.cnpgClusterRef`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CnpgObservation {
    /// `clusters.postgresql.cnpg.io` is not served by this cluster.
    CrdAbsent,
    /// The CRD is there, the named Cluster is not.
    Missing,
    /// The Cluster exists.
    Found {
        app: AppDatabase,
        /// Whether it serves, and if not what its status says.
        readiness: Readiness,
        /// Its `-rw` Service, once CloudNativePG made it.
        rw: Option<RwService>,
    },
}

/// The database, owner and password Secret the Cluster's bootstrap made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppDatabase {
    pub database: String,
    pub owner: String,
    pub secret: String,
}

/// The Cluster's readiness as its status reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    /// Not (yet) ready; `phase` is `status.phase`, `None` before CloudNativePG first wrote it.
    NotReady {
        phase: Option<String>,
    },
}

/// The primary's Service as CloudNativePG made it: where the DSN points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RwService {
    pub name: String,
    pub port: i32,
}

/// The Service CloudNativePG makes for the primary of `cluster`.
pub fn rw_service_name(cluster: &str) -> String {
    format!("{cluster}-rw")
}

impl AppDatabase {
    /// Reads the bootstrap of Cluster `cluster` (JSON, e.g. a `DynamicObject`'s data): whichever
    /// of `initdb`, `recovery` and `pg_basebackup` is set names the database, its owner and the
    /// Secret of the owner's password, with CloudNativePG's defaults (`app`, the database's
    /// name, `<cluster>-app`).
    pub fn from_object(cluster: &str, object: &serde_json::Value) -> Self {
        let bootstrap = ["initdb", "recovery", "pg_basebackup"]
            .iter()
            .find_map(|method| object.pointer(&format!("/spec/bootstrap/{method}")));
        let field = |path: &str| {
            bootstrap
                .and_then(|b| b.pointer(path))
                .and_then(serde_json::Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let database = field("/database").unwrap_or_else(|| DEFAULT_DATABASE.to_owned());
        Self {
            owner: field("/owner").unwrap_or_else(|| database.clone()),
            secret: field("/secret/name").unwrap_or_else(|| format!("{cluster}-app")),
            database,
        }
    }
}

impl Readiness {
    /// `Ready=True` among `status.conditions`; without conditions, the healthy phase.
    pub fn from_object(object: &serde_json::Value) -> Self {
        let phase = object
            .pointer("/status/phase")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned);
        let ready_condition = object
            .pointer("/status/conditions")
            .and_then(serde_json::Value::as_array)
            .and_then(|cs| {
                cs.iter()
                    .find(|c| c.get("type").and_then(|t| t.as_str()) == Some("Ready"))
            })
            .and_then(|c| c.get("status").and_then(|s| s.as_str()));
        let ready = match ready_condition {
            Some(status) => status == "True",
            None => phase.as_deref() == Some(HEALTHY_PHASE),
        };
        if ready {
            Self::Ready
        } else {
            Self::NotReady { phase }
        }
    }
}

impl CnpgObservation {
    /// Reads a Cluster object and its `-rw` Service, if one was found, into an observation.
    pub fn from_object(cluster: &str, object: &serde_json::Value, rw: Option<RwService>) -> Self {
        Self::Found {
            app: AppDatabase::from_object(cluster, object),
            readiness: Readiness::from_object(object),
            rw,
        }
    }

    /// The application Secret the pods will read, once the Cluster is known.
    pub fn password_secret(&self) -> Option<SecretKeyRef> {
        match self {
            Self::Found { app, .. } => Some(SecretKeyRef {
                name: app.secret.clone(),
                key: PASSWORD_KEY.to_owned(),
            }),
            Self::CrdAbsent | Self::Missing => None,
        }
    }
}

/// Resolves a `cnpgClusterRef`. `cluster` is the lookup; `cluster_domain` makes the host
/// absolute (no DNS search path, as for the operator's own URLs: `crate::url_template`).
pub fn resolve(
    namespace: &str,
    r: &CnpgClusterRef,
    cluster: Option<&CnpgObservation>,
    cluster_domain: &str,
) -> DatabaseOutcome {
    let blocked = |reason, message| DatabaseOutcome::Blocked(DatabaseIssue { reason, message });
    match cluster {
        None | Some(CnpgObservation::Missing) => blocked(
            reasons::DATABASE_CLUSTER_NOT_FOUND,
            format!(
                "Cluster {:?} (postgresql.cnpg.io) does not exist in namespace {namespace:?}; \
                 create it or fix spec.database.cnpgClusterRef.name",
                r.name
            ),
        ),
        Some(CnpgObservation::CrdAbsent) => blocked(
            reasons::POSTGRES_OPERATOR_NOT_INSTALLED,
            format!(
                "spec.database.cnpgClusterRef names {:?}, but CloudNativePG's \
                 clusters.postgresql.cnpg.io CRD is not installed; install CloudNativePG or use \
                 spec.database.dsn",
                r.name
            ),
        ),
        Some(CnpgObservation::Found { rw: None, .. }) => blocked(
            reasons::DATABASE_CLUSTER_NOT_RUNNING,
            format!(
                "Cluster {:?} has no Service {:?} yet; CloudNativePG creates it with the \
                 Cluster, and the DSN points at it",
                r.name,
                rw_service_name(&r.name)
            ),
        ),
        Some(
            found @ CnpgObservation::Found {
                app,
                readiness,
                rw: Some(rw),
            },
        ) => {
            // Wired even while not ready, as for Zalando: the readiness probe gates traffic,
            // and a Cluster in a failover or an upgrade usually still serves.
            let pending = match readiness {
                Readiness::Ready => None,
                Readiness::NotReady { phase } => Some(DatabaseIssue {
                    reason: reasons::DATABASE_CLUSTER_NOT_RUNNING,
                    message: format!(
                        "Cluster {:?} is not Ready ({}); see its status and CloudNativePG's logs",
                        r.name,
                        phase
                            .as_deref()
                            .unwrap_or("no phase reported by CloudNativePG yet"),
                    ),
                }),
            };
            DatabaseOutcome::Wired {
                wiring: DatabaseWiring {
                    dsn: dsn(namespace, app, rw, cluster_domain),
                    password: found.password_secret(),
                },
                pending,
            }
        }
    }
}

/// `postgres://<owner>@<cluster>-rw.<namespace>.svc.<cluster domain>.:<its port>/<database>?sslmode=require`:
/// the host and port are the `-rw` Service CloudNativePG made (read, not assumed), as an
/// absolute name; CloudNativePG serves TLS by default.
pub fn dsn(namespace: &str, app: &AppDatabase, rw: &RwService, cluster_domain: &str) -> String {
    format!(
        "postgres://{}@{}.{namespace}.svc.{cluster_domain}.:{}/{}?sslmode=require",
        pct_encode(&app.owner),
        rw.name,
        rw.port,
        pct_encode(&app.database)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn r(name: &str) -> CnpgClusterRef {
        CnpgClusterRef { name: name.into() }
    }

    fn rw(name: &str) -> Option<RwService> {
        Some(RwService {
            name: name.into(),
            port: 5432,
        })
    }

    fn ready_cluster() -> serde_json::Value {
        json!({"spec": {"instances": 1},
               "status": {"phase": "Cluster in healthy state",
                          "conditions": [{"type": "Ready", "status": "True"}]}})
    }

    #[test]
    fn a_ready_cluster_is_wired_to_its_rw_service_and_app_secret() {
        let obs = CnpgObservation::from_object("pg", &ready_cluster(), rw("pg-rw"));
        assert_eq!(
            resolve("oncall", &r("pg"), Some(&obs), "cluster.local"),
            DatabaseOutcome::Wired {
                wiring: DatabaseWiring {
                    dsn: "postgres://app@pg-rw.oncall.svc.cluster.local.:5432/app?sslmode=require"
                        .into(),
                    password: Some(SecretKeyRef {
                        name: "pg-app".into(),
                        key: "password".into(),
                    }),
                },
                pending: None,
            }
        );
    }

    #[test]
    fn the_bootstrap_names_database_owner_and_secret() {
        let initdb = json!({"spec": {"bootstrap": {"initdb": {
            "database": "terdut", "owner": "terdut_app", "secret": {"name": "terdut-creds"}}}}});
        assert_eq!(
            AppDatabase::from_object("pg", &initdb),
            AppDatabase {
                database: "terdut".into(),
                owner: "terdut_app".into(),
                secret: "terdut-creds".into(),
            }
        );
        // The owner defaults to the database's name, the Secret to <cluster>-app.
        let recovery = json!({"spec": {"bootstrap": {"recovery": {"database": "db"}}}});
        assert_eq!(
            AppDatabase::from_object("pg", &recovery),
            AppDatabase {
                database: "db".into(),
                owner: "db".into(),
                secret: "pg-app".into(),
            }
        );
        let basebackup = json!({"spec": {"bootstrap": {"pg_basebackup": {"owner": "o"}}}});
        assert_eq!(AppDatabase::from_object("pg", &basebackup).owner, "o");
        assert_eq!(AppDatabase::from_object("pg", &basebackup).database, "app");
    }

    #[test]
    fn readiness_is_the_ready_condition_or_the_healthy_phase() {
        assert_eq!(Readiness::from_object(&ready_cluster()), Readiness::Ready);
        let failing = json!({"status": {"phase": "Failing over",
            "conditions": [{"type": "Ready", "status": "False"}]}});
        assert_eq!(
            Readiness::from_object(&failing),
            Readiness::NotReady {
                phase: Some("Failing over".into())
            }
        );
        let old = json!({"status": {"phase": "Cluster in healthy state"}});
        assert_eq!(Readiness::from_object(&old), Readiness::Ready);
        assert_eq!(
            Readiness::from_object(&json!({})),
            Readiness::NotReady { phase: None }
        );
    }

    #[test]
    fn a_cluster_not_ready_is_wired_but_pending() {
        let obj = json!({"status": {"phase": "Setting up primary"}});
        let obs = CnpgObservation::from_object("pg", &obj, rw("pg-rw"));
        let DatabaseOutcome::Wired {
            pending: Some(p),
            wiring,
        } = resolve("ns", &r("pg"), Some(&obs), "c.l")
        else {
            panic!("wired and pending")
        };
        assert_eq!(p.reason, "DatabaseClusterNotRunning");
        assert!(p.message.contains("Setting up primary"), "{}", p.message);
        assert_eq!(wiring.password.unwrap().name, "pg-app");
    }

    #[test]
    fn missing_crd_cluster_or_service_block_with_clear_reasons() {
        let cases = [
            (None, "DatabaseClusterNotFound", "does not exist"),
            (
                Some(CnpgObservation::Missing),
                "DatabaseClusterNotFound",
                "cnpgClusterRef.name",
            ),
            (
                Some(CnpgObservation::CrdAbsent),
                "PostgresOperatorNotInstalled",
                "CloudNativePG",
            ),
            (
                Some(CnpgObservation::from_object("pg", &ready_cluster(), None)),
                "DatabaseClusterNotRunning",
                "\"pg-rw\"",
            ),
        ];
        for (obs, reason, needle) in cases {
            let DatabaseOutcome::Blocked(i) = resolve("ns", &r("pg"), obs.as_ref(), "c.l") else {
                panic!("{obs:?} should block")
            };
            assert_eq!(i.reason, reason, "{obs:?}");
            assert!(i.message.contains(needle), "{}", i.message);
        }
        assert_eq!(CnpgObservation::Missing.password_secret(), None);
    }

    #[test]
    fn the_dsn_encodes_odd_names_and_uses_the_services_port() {
        let app = AppDatabase {
            database: "my db".into(),
            owner: "a@b".into(),
            secret: "s".into(),
        };
        let svc = RwService {
            name: "pg-rw".into(),
            port: 6543,
        };
        assert_eq!(
            dsn("ns", &app, &svc, "corp.example"),
            "postgres://a%40b@pg-rw.ns.svc.corp.example.:6543/my%20db?sslmode=require"
        );
    }
}
