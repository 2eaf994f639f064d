//! `spec.database` -> the DSN and password reference the pods get (docs/design.md §8).
//!
//! Two paths, mirroring the chart's contract: a DSN the user brings with an optional password
//! Secret, or a Zalando `postgresql.acid.zalan.do` cluster in the same namespace, whose DSN and
//! credentials Secret follow from its name. The operator provisions no database either way and
//! checks no connectivity; the readiness probe (`/readyz`, ready when the database is) does that.
//!
//! What was observed about the Zalando cluster is an input ([`ClusterObservation`]): the actor
//! does the lookup (and treats a missing CRD as data, not an error, docs/design.md §8/§9), this
//! module only decides.

use terdut_crds::v1alpha1::SecretKeyRef;
use terdut_crds::v1alpha1::server::{DatabaseSpec, PostgresClusterRef};

use super::status::reasons;

/// Data key of the password in a Zalando credentials Secret.
pub const ZALANDO_PASSWORD_KEY: &str = "password";
/// `status.PostgresClusterStatus` of a Zalando cluster that serves.
pub const ZALANDO_RUNNING: &str = "Running";

/// What the actor found when it looked up `spec.database.postgresClusterRef`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClusterObservation {
    /// `postgresql.acid.zalan.do` is not served by this cluster.
    CrdAbsent,
    /// The CRD is there, the named cluster is not.
    Missing,
    /// The cluster exists; `phase` is its `status.PostgresClusterStatus` (`Running`,
    /// `Creating`, `SyncFailed`, ...), `None` before the postgres-operator first wrote it;
    /// `master` is the Service the postgres-operator made for its primary, once it exists.
    Found {
        phase: Option<String>,
        master: Option<MasterService>,
    },
}

/// The cluster's master Service as the postgres-operator made it: where the DSN points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MasterService {
    pub name: String,
    pub port: i32,
}

impl ClusterObservation {
    /// Reads a `postgresql` object (as JSON, e.g. a `DynamicObject`'s data) and its master
    /// Service, if one was found, into an observation.
    pub fn from_object(object: &serde_json::Value, master: Option<MasterService>) -> Self {
        let phase = object
            .pointer("/status/PostgresClusterStatus")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned);
        Self::Found { phase, master }
    }
}

/// What the Deployment gets: `TERDUT_DATABASE_DSN` and, when there is one, `PGPASSWORD` by
/// `secretKeyRef` (never inline, terdut-api.md "Process environment").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatabaseWiring {
    pub dsn: String,
    pub password: Option<SecretKeyRef>,
}

/// Why the database is not (yet) usable, as a Ready condition reason and a message that says
/// what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatabaseIssue {
    pub reason: &'static str,
    pub message: String,
}

/// The outcome of [`resolve`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DatabaseOutcome {
    /// The wiring is known, so the Deployment can be applied. `pending` is set when the Zalando
    /// cluster exists but is not `Running`: the pods will simply not be ready until it is (the
    /// readiness probe gates traffic), and the status says why while none are available.
    /// A cluster that failed an update often still serves, so this never holds the Deployment back.
    Wired {
        wiring: DatabaseWiring,
        pending: Option<DatabaseIssue>,
    },
    /// No usable wiring: the Deployment is not applied (an existing one is left as it is) and
    /// Ready is False with this reason.
    Blocked(DatabaseIssue),
}

/// The Zalando cluster the actor must look up, if any.
pub fn cluster_ref(spec: &DatabaseSpec) -> Option<&PostgresClusterRef> {
    spec.postgres_cluster_ref.as_ref()
}

/// Resolves `spec.database`. `cluster` is the lookup of [`cluster_ref`]; ignored for a DSN.
/// `cluster_domain` makes the Zalando host absolute (no DNS search path, as for the operator's
/// own URLs: `crate::url_template`).
pub fn resolve(
    namespace: &str,
    spec: &DatabaseSpec,
    cluster: Option<&ClusterObservation>,
    cluster_domain: &str,
) -> DatabaseOutcome {
    match (&spec.dsn, &spec.postgres_cluster_ref) {
        (Some(dsn), None) => DatabaseOutcome::Wired {
            wiring: DatabaseWiring {
                dsn: dsn.clone(),
                password: spec.password_secret_ref.clone(),
            },
            pending: None,
        },
        (None, Some(r)) => resolve_zalando(namespace, r, cluster, cluster_domain),
        // The CRD's CEL rule makes these unreachable through the API; kept total anyway.
        _ => DatabaseOutcome::Blocked(DatabaseIssue {
            reason: reasons::INVALID_SPEC,
            message: "set exactly one of spec.database.dsn or spec.database.postgresClusterRef"
                .into(),
        }),
    }
}

fn resolve_zalando(
    namespace: &str,
    r: &PostgresClusterRef,
    cluster: Option<&ClusterObservation>,
    cluster_domain: &str,
) -> DatabaseOutcome {
    let blocked = |reason, message| DatabaseOutcome::Blocked(DatabaseIssue { reason, message });
    match cluster {
        None | Some(ClusterObservation::Missing) => blocked(
            reasons::DATABASE_CLUSTER_NOT_FOUND,
            format!(
                "postgresql {:?} (postgresql.acid.zalan.do) does not exist in namespace {namespace:?}; \
                 create it or fix spec.database.postgresClusterRef.name",
                r.name
            ),
        ),
        Some(ClusterObservation::CrdAbsent) => blocked(
            reasons::POSTGRES_OPERATOR_NOT_INSTALLED,
            format!(
                "spec.database.postgresClusterRef names {:?}, but the Zalando postgres-operator's \
                 postgresql.acid.zalan.do CRD is not installed; install it or use spec.database.dsn",
                r.name
            ),
        ),
        Some(ClusterObservation::Found { master: None, .. }) => blocked(
            reasons::DATABASE_CLUSTER_NOT_RUNNING,
            format!(
                "postgresql {:?} has no master Service {:?} yet; the postgres-operator creates it \
                 with the cluster, and the DSN points at it",
                r.name, r.name
            ),
        ),
        Some(ClusterObservation::Found {
            phase,
            master: Some(master),
        }) => {
            let pending = (phase.as_deref() != Some(ZALANDO_RUNNING)).then(|| DatabaseIssue {
                reason: reasons::DATABASE_CLUSTER_NOT_RUNNING,
                message: format!(
                    "postgresql {:?} is {}, not Running; see its status and the postgres-operator's logs",
                    r.name,
                    phase.as_deref().unwrap_or("not yet reported by the postgres-operator"),
                ),
            });
            DatabaseOutcome::Wired {
                wiring: DatabaseWiring {
                    dsn: zalando_dsn(namespace, r, master, cluster_domain),
                    password: Some(SecretKeyRef {
                        name: zalando_credentials_secret(r),
                        key: ZALANDO_PASSWORD_KEY.into(),
                    }),
                },
                pending,
            }
        }
    }
}

/// `postgres://<user>@<master Service>.<namespace>.svc.<cluster domain>.:<its
/// port>/<database>?sslmode=require`: the host and port are the master Service the
/// postgres-operator made (read from the cluster, not assumed), as an absolute name; Spilo serves
/// TLS by default.
pub fn zalando_dsn(
    namespace: &str,
    r: &PostgresClusterRef,
    master: &MasterService,
    cluster_domain: &str,
) -> String {
    format!(
        "postgres://{}@{}.{namespace}.svc.{cluster_domain}.:{}/{}?sslmode=require",
        pct_encode(&r.user),
        master.name,
        master.port,
        pct_encode(&r.database)
    )
}

/// `<user>.<cluster>.credentials.postgresql.acid.zalan.do`, with `_` in the user written as `-`
/// as the postgres-operator does (a Secret name cannot hold `_`).
pub fn zalando_credentials_secret(r: &PostgresClusterRef) -> String {
    format!(
        "{}.{}.credentials.postgresql.acid.zalan.do",
        r.user.replace('_', "-"),
        r.name
    )
}

/// Percent-encodes everything but RFC 3986 unreserved characters, so an odd role or database
/// name cannot change the DSN's structure.
fn pct_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zalando(name: &str) -> DatabaseSpec {
        serde_json::from_value(serde_json::json!({"postgresClusterRef": {"name": name}})).unwrap()
    }

    fn master(name: &str) -> Option<MasterService> {
        Some(MasterService {
            name: name.into(),
            port: 5432,
        })
    }

    fn found(phase: &str) -> ClusterObservation {
        ClusterObservation::Found {
            phase: Some(phase.into()),
            master: master("terdut-postgres"),
        }
    }

    #[test]
    fn byo_dsn_passes_through_with_its_password_ref() {
        let spec: DatabaseSpec = serde_json::from_value(serde_json::json!({
            "dsn": "postgres://terdut@db:5432/terdut?sslmode=require",
            "passwordSecretRef": {"name": "db", "key": "password"},
        }))
        .unwrap();
        let DatabaseOutcome::Wired { wiring, pending } =
            resolve("oncall", &spec, None, "cluster.local")
        else {
            panic!("not wired")
        };
        assert_eq!(
            wiring.dsn,
            "postgres://terdut@db:5432/terdut?sslmode=require"
        );
        assert_eq!(
            wiring.password,
            Some(SecretKeyRef {
                name: "db".into(),
                key: "password".into()
            })
        );
        assert_eq!(pending, None);
        // A DSN user never needs the Zalando CRD (docs/design.md §8).
        assert_eq!(cluster_ref(&spec), None);
        assert!(matches!(
            resolve(
                "oncall",
                &spec,
                Some(&ClusterObservation::CrdAbsent),
                "cluster.local"
            ),
            DatabaseOutcome::Wired { .. }
        ));
    }

    #[test]
    fn zalando_running_cluster_is_wired() {
        let spec = zalando("terdut-postgres");
        let out = resolve("oncall", &spec, Some(&found("Running")), "cluster.local");
        assert_eq!(
            out,
            DatabaseOutcome::Wired {
                wiring: DatabaseWiring {
                    dsn: "postgres://terdut@terdut-postgres.oncall.svc.cluster.local.:5432/terdut?sslmode=require"
                        .into(),
                    password: Some(SecretKeyRef {
                        name: "terdut.terdut-postgres.credentials.postgresql.acid.zalan.do".into(),
                        key: "password".into(),
                    }),
                },
                pending: None,
            }
        );
    }

    #[test]
    fn zalando_cluster_not_running_is_wired_but_pending() {
        let spec = zalando("pg");
        for obs in [
            found("Creating"),
            found("SyncFailed"),
            ClusterObservation::Found {
                phase: None,
                master: master("pg"),
            },
        ] {
            let DatabaseOutcome::Wired {
                pending: Some(p), ..
            } = resolve("ns", &spec, Some(&obs), "cluster.local")
            else {
                panic!("{obs:?} should be wired and pending")
            };
            assert_eq!(p.reason, "DatabaseClusterNotRunning");
            assert!(p.message.contains("\"pg\""));
        }
    }

    #[test]
    fn a_cluster_without_its_master_service_yet_is_not_wired() {
        let spec = zalando("pg");
        let obs = ClusterObservation::Found {
            phase: Some("Creating".into()),
            master: None,
        };
        let DatabaseOutcome::Blocked(i) = resolve("ns", &spec, Some(&obs), "c.l") else {
            panic!("a DSN needs the master Service")
        };
        assert_eq!(i.reason, "DatabaseClusterNotRunning");
        assert!(i.message.contains("no master Service"), "{}", i.message);
    }

    #[test]
    fn missing_cluster_and_missing_crd_block_with_clear_reasons() {
        let spec = zalando("pg");
        let DatabaseOutcome::Blocked(i) =
            resolve("ns", &spec, Some(&ClusterObservation::Missing), "c.l")
        else {
            panic!()
        };
        assert_eq!(i.reason, "DatabaseClusterNotFound");
        assert!(i.message.contains("\"pg\"") && i.message.contains("\"ns\""));
        let DatabaseOutcome::Blocked(i) =
            resolve("ns", &spec, Some(&ClusterObservation::CrdAbsent), "c.l")
        else {
            panic!()
        };
        assert_eq!(i.reason, "PostgresOperatorNotInstalled");
        assert!(matches!(
            resolve("ns", &spec, None, "c.l"),
            DatabaseOutcome::Blocked(DatabaseIssue {
                reason: "DatabaseClusterNotFound",
                ..
            })
        ));
    }

    #[test]
    fn neither_or_both_is_invalid() {
        let none = DatabaseSpec {
            dsn: None,
            password_secret_ref: None,
            postgres_cluster_ref: None,
        };
        let mut both = zalando("pg");
        both.dsn = Some("postgres://x".into());
        for spec in [none, both] {
            assert!(matches!(
                resolve("ns", &spec, None, "c.l"),
                DatabaseOutcome::Blocked(DatabaseIssue {
                    reason: "InvalidSpec",
                    ..
                })
            ));
        }
    }

    #[test]
    fn zalando_names_follow_the_postgres_operator() {
        let r = PostgresClusterRef {
            name: "pg".into(),
            user: "app_user".into(),
            database: "my db".into(),
        };
        assert_eq!(
            zalando_credentials_secret(&r),
            "app-user.pg.credentials.postgresql.acid.zalan.do"
        );
        let svc = MasterService {
            name: "pg".into(),
            port: 6543,
        };
        assert_eq!(
            zalando_dsn("ns", &r, &svc, "corp.example"),
            "postgres://app_user@pg.ns.svc.corp.example.:6543/my%20db?sslmode=require"
        );
    }

    #[test]
    fn phase_is_read_from_the_object() {
        let obj = serde_json::json!({"status": {"PostgresClusterStatus": "Running"}});
        assert_eq!(
            ClusterObservation::from_object(&obj, master("terdut-postgres")),
            found("Running")
        );
        assert_eq!(
            ClusterObservation::from_object(&serde_json::json!({}), None),
            ClusterObservation::Found {
                phase: None,
                master: None
            }
        );
    }
}
