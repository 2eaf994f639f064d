//! `spec.database` -> the DSN and password reference the pods get (docs/design.md §8).
//!
//! Three paths: a DSN the user brings with an optional password Secret (the chart's contract),
//! a Zalando `postgresql.acid.zalan.do` cluster in the same namespace (here), or a CloudNativePG
//! `Cluster` there (`cnpg.rs`); for both operators the DSN and the password Secret follow from
//! the cluster's name. The operator provisions no database either way and checks no
//! connectivity; the readiness probe (`/readyz`, ready when the database is) does that.
//!
//! What was observed about the cluster is an input ([`ClusterObservation`],
//! `cnpg::CnpgObservation`): the actor does the lookup (and treats a missing CRD as data, not an
//! error, docs/design.md §8/§9), this module only decides.

use terdut_crds::v1alpha1::SecretKeyRef;
use terdut_crds::v1alpha1::server::{DatabaseSpec, PostgresClusterRef};

use super::cnpg::{self, CnpgObservation};
use super::status::reasons;
use super::wiring::pct_encode;
pub use super::wiring::{DatabaseIssue, DatabaseOutcome, DatabaseWiring};

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

/// The Zalando cluster the actor must look up, if any.
pub fn cluster_ref(spec: &DatabaseSpec) -> Option<&PostgresClusterRef> {
    spec.postgres_cluster_ref.as_ref()
}

/// What the actor found of the cluster `spec.database` names, if it names one.
#[derive(Clone, Copy, Debug, Default)]
pub struct Lookups<'a> {
    /// The lookup of [`cluster_ref`].
    pub zalando: Option<&'a ClusterObservation>,
    /// The lookup of `spec.database.cnpgClusterRef`.
    pub cnpg: Option<&'a CnpgObservation>,
}

/// Resolves `spec.database`. `found` holds the lookups of the cluster it names; both are
/// ignored for a DSN. `cluster_domain` makes a cluster's host absolute (no DNS search path, as
/// for the operator's own URLs: `crate::url_template`).
pub fn resolve(
    namespace: &str,
    spec: &DatabaseSpec,
    found: Lookups<'_>,
    cluster_domain: &str,
) -> DatabaseOutcome {
    match (
        &spec.dsn,
        &spec.postgres_cluster_ref,
        &spec.cnpg_cluster_ref,
    ) {
        (Some(dsn), None, None) => DatabaseOutcome::Wired {
            wiring: DatabaseWiring {
                dsn: dsn.clone(),
                password: spec.password_secret_ref.clone(),
            },
            pending: None,
        },
        (None, Some(r), None) => resolve_zalando(namespace, r, found.zalando, cluster_domain),
        (None, None, Some(r)) => cnpg::resolve(namespace, r, found.cnpg, cluster_domain),
        // The CRD's CEL rule makes these unreachable through the API; kept total anyway.
        _ => DatabaseOutcome::Blocked(DatabaseIssue {
            reason: reasons::INVALID_SPEC,
            message: "set exactly one of spec.database.dsn, spec.database.postgresClusterRef or \
                      spec.database.cnpgClusterRef"
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

#[cfg(test)]
mod tests {
    use super::*;
    use terdut_crds::v1alpha1::server::CnpgClusterRef;

    fn z(found: &ClusterObservation) -> Lookups<'_> {
        Lookups {
            zalando: Some(found),
            cnpg: None,
        }
    }

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
            resolve("oncall", &spec, Lookups::default(), "cluster.local")
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
                z(&ClusterObservation::CrdAbsent),
                "cluster.local"
            ),
            DatabaseOutcome::Wired { .. }
        ));
    }

    #[test]
    fn zalando_running_cluster_is_wired() {
        let spec = zalando("terdut-postgres");
        let out = resolve("oncall", &spec, z(&found("Running")), "cluster.local");
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
            } = resolve("ns", &spec, z(&obs), "cluster.local")
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
        let DatabaseOutcome::Blocked(i) = resolve("ns", &spec, z(&obs), "c.l") else {
            panic!("a DSN needs the master Service")
        };
        assert_eq!(i.reason, "DatabaseClusterNotRunning");
        assert!(i.message.contains("no master Service"), "{}", i.message);
    }

    #[test]
    fn missing_cluster_and_missing_crd_block_with_clear_reasons() {
        let spec = zalando("pg");
        let DatabaseOutcome::Blocked(i) =
            resolve("ns", &spec, z(&ClusterObservation::Missing), "c.l")
        else {
            panic!()
        };
        assert_eq!(i.reason, "DatabaseClusterNotFound");
        assert!(i.message.contains("\"pg\"") && i.message.contains("\"ns\""));
        let DatabaseOutcome::Blocked(i) =
            resolve("ns", &spec, z(&ClusterObservation::CrdAbsent), "c.l")
        else {
            panic!()
        };
        assert_eq!(i.reason, "PostgresOperatorNotInstalled");
        assert!(matches!(
            resolve("ns", &spec, Lookups::default(), "c.l"),
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
            cnpg_cluster_ref: None,
        };
        let mut both = zalando("pg");
        both.dsn = Some("postgres://x".into());
        let mut zalando_and_cnpg = zalando("pg");
        zalando_and_cnpg.cnpg_cluster_ref = Some(CnpgClusterRef { name: "pg".into() });
        for spec in [none, both, zalando_and_cnpg] {
            assert!(matches!(
                resolve("ns", &spec, Lookups::default(), "c.l"),
                DatabaseOutcome::Blocked(DatabaseIssue {
                    reason: "InvalidSpec",
                    ..
                })
            ));
        }
    }

    #[test]
    fn a_cnpg_ref_is_resolved_from_its_own_lookup() {
        let spec: DatabaseSpec =
            serde_json::from_value(serde_json::json!({"cnpgClusterRef": {"name": "pg"}})).unwrap();
        assert_eq!(cluster_ref(&spec), None, "no Zalando lookup for it");
        // The Zalando lookup is not the CloudNativePG one.
        let DatabaseOutcome::Blocked(i) = resolve("ns", &spec, z(&found("Running")), "c.l") else {
            panic!("no CloudNativePG lookup: not wired")
        };
        assert!(i.message.contains("postgresql.cnpg.io"), "{}", i.message);
        let obs = CnpgObservation::CrdAbsent;
        let found = Lookups {
            zalando: None,
            cnpg: Some(&obs),
        };
        let DatabaseOutcome::Blocked(i) = resolve("ns", &spec, found, "c.l") else {
            panic!()
        };
        assert_eq!(i.reason, "PostgresOperatorNotInstalled");
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
