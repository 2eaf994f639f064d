//! One reconcile pass of a TerdutServer, decided without IO: (server, observed) -> steps + status.
//!
//! The actor observes (informer caches, the Zalando lookup), calls [`plan`], performs the steps
//! in order with the one field manager, and writes [`super::status::status_patch`] of the
//! resulting status. The order matters: the key Secret exists before the Deployment that
//! references it, and nothing owned by someone else is ever taken over (docs/design.md §1: the
//! operator never adopts an independently deployed terdut-server).
//!
//! Steady state makes no writes: an object is applied only when [`super::drift::needs_apply`]
//! says so.

use std::fmt;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use terdut_crds::v1alpha1::TerdutServer;
use terdut_crds::v1alpha1::conditions::DesiredCondition;
use terdut_crds::v1alpha1::server::TeamCounts;

use super::cnpg::CnpgObservation;
use super::database::{self, ClusterObservation, DatabaseOutcome, Lookups};
use super::deployment::deployment;
use super::drift::{needs_apply, stamp};
use super::env::container_env;
use super::key::{KeyGenError, KeySecretState, OperatorKeyValue, classify_key_secret, key_secret};
use super::names::{MissingMetadata, Parent, validate_server_name};
use super::pdb::pdb;
use super::pod_security::violations;
use super::references::{Checked, first_missing};
use super::rotation::{RollTriggers, database_secret_hash};
use super::service::service;
use super::status::{DeploymentObservation, DesiredStatus, StatusInputs, desired_status};
use super::summary::summary;
use super::warning::SpecWarning;

/// What the actor saw before planning. Objects come from the informer caches (label-filtered,
/// managedFields stripped); `None` means not there.
#[derive(Clone, Debug, Default)]
pub struct Observed<'a> {
    pub key_secret: Option<&'a Secret>,
    /// The lookup of `spec.database.postgresClusterRef`; `None` otherwise.
    pub database_cluster: Option<&'a ClusterObservation>,
    /// The lookup of `spec.database.cnpgClusterRef`; `None` otherwise.
    pub cnpg_cluster: Option<&'a CnpgObservation>,
    pub deployment: Option<&'a Deployment>,
    pub service: Option<&'a Service>,
    pub pdb: Option<&'a PodDisruptionBudget>,
    /// Objects with the names the operator needs that the label-selected caches cannot show
    /// (a live metadata read): someone else's, e.g. installed by the terdut-server chart, or
    /// the operator's own with its labels removed (docs/design.md §1: never adopted).
    pub unlisted: Unlisted<'a>,
    /// Every Secret the spec names, and whether it and its key exist.
    pub references: &'a [Checked],
    /// The cluster's DNS domain, for absolute names in the pods' configuration.
    pub cluster_domain: &'a str,
    /// The base URL the operator calls the server's API at (`--server-url-template`).
    pub url: &'a str,
    /// TerdutTeams attached to this server, by consent outcome (docs/design.md §4.6).
    pub teams: TeamCounts,
}

/// See [`Observed::unlisted`]. A key Secret of the operator's own (its ownerReference) is read
/// in full and observed as `key_secret`; only other ones appear here.
#[derive(Clone, Copy, Debug, Default)]
pub struct Unlisted<'a> {
    pub deployment: Option<&'a ObjectMeta>,
    pub service: Option<&'a ObjectMeta>,
    pub pdb: Option<&'a ObjectMeta>,
    pub key_secret: Option<&'a ObjectMeta>,
}

/// One write, in the order given. `Debug` names the objects only: a Secret's derived `Debug`
/// would print the key's bytes into any log line that prints a plan.
#[derive(Clone, PartialEq)]
pub enum Step {
    /// Create (never apply, never update) the key Secret. `AlreadyExists` means the cache was
    /// stale: re-observe, do not overwrite (docs/design.md §6).
    CreateKeySecret(Box<Secret>),
    /// Server-side apply with `names::FIELD_MANAGER`.
    ApplyService(Box<Service>),
    ApplyDeployment(Box<Deployment>),
    ApplyPdb(Box<PodDisruptionBudget>),
    /// `spec.pod.disruptionBudget` was cleared (docs/design.md §7).
    DeletePdb {
        name: String,
    },
}

impl fmt::Debug for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = |m: &ObjectMeta| m.name.clone().unwrap_or_default();
        match self {
            Self::CreateKeySecret(s) => write!(f, "CreateKeySecret({})", name(&s.metadata)),
            Self::ApplyService(s) => write!(f, "ApplyService({})", name(&s.metadata)),
            Self::ApplyDeployment(d) => write!(f, "ApplyDeployment({})", name(&d.metadata)),
            Self::ApplyPdb(p) => write!(f, "ApplyPdb({})", name(&p.metadata)),
            Self::DeletePdb { name } => write!(f, "DeletePdb({name})"),
        }
    }
}

/// The outcome of one pass.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub steps: Vec<Step>,
    /// For Warning Events (docs/design.md §12).
    pub warnings: Vec<SpecWarning>,
    /// The status if every step succeeds; on a failed step the actor reports
    /// `reasons::APPLY_FAILED` instead.
    pub status: DesiredStatus,
}

/// The step in words, for the plan in status and the last applied changes (object names
/// only: the key Secret's content never).
pub fn describe(step: &Step) -> String {
    let name = |m: &ObjectMeta| m.name.clone().unwrap_or_default();
    match step {
        Step::CreateKeySecret(s) => {
            format!(
                "create the operator key Secret {} (a new key)",
                name(&s.metadata)
            )
        }
        Step::ApplyService(s) => format!("apply Service {}", name(&s.metadata)),
        Step::ApplyDeployment(d) => format!("apply Deployment {}", name(&d.metadata)),
        Step::ApplyPdb(p) => format!("apply PodDisruptionBudget {}", name(&p.metadata)),
        Step::DeletePdb { name } => format!("delete PodDisruptionBudget {name}"),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Metadata(#[from] MissingMetadata),
    #[error(transparent)]
    KeyGen(#[from] KeyGenError),
}

/// Plans one pass. `new_key` is called only when the key Secret is missing (tests pass a
/// deterministic one; the actor passes `OperatorKeyValue::generate`).
pub fn plan<F>(
    server: &TerdutServer,
    observed: &Observed<'_>,
    new_key: F,
) -> Result<Plan, PlanError>
where
    F: FnOnce() -> Result<OperatorKeyValue, KeyGenError>,
{
    let parent = Parent::of(server)?;
    let spec = &server.spec;
    let mut steps = vec![];
    let mut warnings = vec![];
    let name_error = validate_server_name(&parent.name).err();

    let mut key = classify_key_secret(&parent, observed.key_secret, observed.unlisted.key_secret);
    let db = database::resolve(
        &parent.namespace,
        &spec.database,
        Lookups {
            zalando: observed.database_cluster,
            cnpg: observed.cnpg_cluster,
        },
        observed.cluster_domain,
    );
    let missing_reference = first_missing(observed.references, &parent.namespace);
    let controlled = |meta: &ObjectMeta| {
        meta.owner_references
            .iter()
            .flatten()
            .any(|o| o.uid == parent.owner.uid && o.controller == Some(true))
    };
    // An object of ours by name but not by owner: never taken over (docs/design.md §1). The caches
    // show only labelled objects, so the live read of the name (`unlisted`) decides too.
    let foreign_of = |kind: &str, cached: Option<&ObjectMeta>, unlisted: Option<&ObjectMeta>| {
        cached
            .or(unlisted)
            .filter(|m| !controlled(m))
            .map(|m| format!("{kind} {}", m.name.as_deref().unwrap_or_default()))
    };
    let u = observed.unlisted;
    let foreign_workload = foreign_of(
        "Deployment",
        observed.deployment.map(|d| &d.metadata),
        u.deployment,
    )
    .or_else(|| foreign_of("Service", observed.service.map(|s| &s.metadata), u.service));
    let foreign_pdb = foreign_of(
        "PodDisruptionBudget",
        observed.pdb.map(|p| &p.metadata),
        u.pdb,
    )
    .filter(|_| spec.pod.disruption_budget.is_some());

    let mut pod_security = None;
    if name_error.is_none() {
        if key == KeySecretState::Missing {
            let fresh = new_key()?;
            steps.push(Step::CreateKeySecret(Box::new(key_secret(&parent, &fresh))));
            key = KeySecretState::Present(fresh);
        }
        if foreign_workload.is_none() {
            let svc = stamp(service(&parent, spec));
            if needs_apply(&svc, observed.service) {
                steps.push(Step::ApplyService(Box::new(svc)));
            }
            if let (KeySecretState::Present(k), DatabaseOutcome::Wired { wiring, .. }, None) =
                (&key, &db, &missing_reference)
            {
                let env = container_env(&parent.name, spec, wiring);
                let triggers = RollTriggers {
                    key_hash: k.hash(),
                    database_secret: database_secret_hash(observed.references),
                };
                let built = deployment(&parent, spec, env.env, &triggers);
                warnings.extend(env.warnings);
                warnings.extend(built.warnings);
                let breaches = built
                    .deployment
                    .spec
                    .template
                    .spec
                    .as_ref()
                    .map(violations)
                    .unwrap_or_default();
                pod_security = Some(pod_security_condition(&breaches));
                if !breaches.is_empty() {
                    warnings.push(SpecWarning::BreaksRestricted { fields: breaches });
                }
                let d = stamp(built.deployment);
                if needs_apply(&d, observed.deployment) {
                    steps.push(Step::ApplyDeployment(Box::new(d)));
                }
            }
        }
        match (pdb(&parent, spec), observed.pdb) {
            (Some(want), have) if foreign_pdb.is_none() => {
                let want = stamp(want);
                if needs_apply(&want, have) {
                    steps.push(Step::ApplyPdb(Box::new(want)));
                }
            }
            (None, Some(have)) if controlled(&have.metadata) => steps.push(Step::DeletePdb {
                name: have.metadata.name.clone().unwrap_or_default(),
            }),
            _ => {}
        }
    }

    let deployment_obs = observed
        .deployment
        .filter(|d| controlled(&d.metadata))
        .map(DeploymentObservation::from_deployment);
    let mut status = desired_status(&StatusInputs {
        server_name: &parent.name,
        generation: server.metadata.generation,
        replicas: spec.replicas,
        name_error: name_error.as_deref(),
        foreign_object: foreign_workload.as_deref().or(foreign_pdb.as_deref()),
        key: &key,
        database: &db,
        missing_reference: missing_reference.as_ref().map(|(r, m)| (*r, m.as_str())),
        deployment: deployment_obs.as_ref(),
        teams: observed.teams.clone(),
    });
    status.pod_security = pod_security.map(|c| c.at_generation(server.metadata.generation));
    status.summary = summary(
        name_error.is_none().then_some(observed.url),
        &key,
        deployment_obs.as_ref().map(|d| d.available_replicas),
    );
    Ok(Plan {
        steps,
        warnings,
        status,
    })
}

/// The `PodSecurity` condition for the breaches [`violations`] found.
fn pod_security_condition(breaches: &[String]) -> DesiredCondition {
    use super::status::pod_security::{BREAKS_RESTRICTED, RESTRICTED, TYPE};
    let (status, reason, message) = if breaches.is_empty() {
        (
            true,
            RESTRICTED,
            "the terdut-server pods meet the restricted Pod Security level".to_owned(),
        )
    } else {
        (
            false,
            BREAKS_RESTRICTED,
            format!(
                "the spec makes the pods break the restricted Pod Security level: {}",
                breaches.join("; ")
            ),
        )
    };
    DesiredCondition {
        type_: TYPE.into(),
        status,
        reason: reason.into(),
        message,
        observed_generation: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::key::KEY_HASH_ANNOTATION;
    use crate::server::names::tests::{byo_server, server};
    use serde_json::json;

    fn key(n: u8) -> Result<OperatorKeyValue, KeyGenError> {
        Ok(OperatorKeyValue::from_entropy([n; 24]))
    }

    fn never() -> Result<OperatorKeyValue, KeyGenError> {
        panic!("no key should be minted")
    }

    fn kinds(p: &Plan) -> Vec<&'static str> {
        p.steps
            .iter()
            .map(|s| match s {
                Step::CreateKeySecret(_) => "CreateKeySecret",
                Step::ApplyService(_) => "ApplyService",
                Step::ApplyDeployment(_) => "ApplyDeployment",
                Step::ApplyPdb(_) => "ApplyPdb",
                Step::DeletePdb { .. } => "DeletePdb",
            })
            .collect()
    }

    /// The objects a first pass creates, as the caches would then hold them.
    struct World {
        secret: Secret,
        deployment: Deployment,
        service: Service,
        pdb: Option<PodDisruptionBudget>,
    }

    impl World {
        fn after(p: &Plan) -> Self {
            let (mut secret, mut deployment, mut service, mut pdb) = (None, None, None, None);
            for s in &p.steps {
                match s {
                    Step::CreateKeySecret(x) => secret = Some((**x).clone()),
                    Step::ApplyDeployment(x) => deployment = Some((**x).clone()),
                    Step::ApplyService(x) => service = Some((**x).clone()),
                    Step::ApplyPdb(x) => pdb = Some((**x).clone()),
                    Step::DeletePdb { .. } => {}
                }
            }
            Self {
                secret: secret.unwrap(),
                deployment: deployment.unwrap(),
                service: service.unwrap(),
                pdb,
            }
        }

        fn observed(&self) -> Observed<'_> {
            Observed {
                key_secret: Some(&self.secret),
                deployment: Some(&self.deployment),
                service: Some(&self.service),
                pdb: self.pdb.as_ref(),
                ..Default::default()
            }
        }
    }

    fn hash_annotation(d: &Deployment) -> String {
        let t = &d.spec.template;
        t.metadata.as_ref().unwrap().annotations.as_ref().unwrap()[KEY_HASH_ANNOTATION].clone()
    }

    #[test]
    fn first_pass_creates_key_then_service_and_deployment() {
        let p = plan(&byo_server(), &Observed::default(), || key(1)).unwrap();
        assert_eq!(
            kinds(&p),
            ["CreateKeySecret", "ApplyService", "ApplyDeployment"]
        );
        let w = World::after(&p);
        assert_eq!(hash_annotation(&w.deployment), key(1).unwrap().hash());
        assert_eq!(p.status.ready.reason, "Progressing");
        assert!(p.status.credentials_secret_ref.is_some());
        assert!(p.warnings.is_empty());
    }

    #[test]
    fn debug_of_a_plan_never_prints_the_key() {
        let p = plan(&byo_server(), &Observed::default(), || key(9)).unwrap();
        let printed = format!("{p:?}");
        assert!(printed.contains("CreateKeySecret(terdut-operator-key)"));
        let k = key(9).unwrap();
        let bytes = format!("{:?}", k.expose().as_bytes());
        assert!(!printed.contains(&k.expose()[5..]) && !printed.contains(&bytes[1..20]));
    }

    #[test]
    fn converged_pass_makes_no_writes() {
        let s = byo_server();
        let w = World::after(&plan(&s, &Observed::default(), || key(1)).unwrap());
        let p = plan(&s, &w.observed(), never).unwrap();
        assert_eq!(kinds(&p), Vec::<&str>::new());
    }

    #[test]
    fn deleted_key_makes_a_new_one_and_rolls_the_pods() {
        let s = byo_server();
        let w = World::after(&plan(&s, &Observed::default(), || key(1)).unwrap());
        let observed = Observed {
            key_secret: None,
            ..w.observed()
        };
        let p = plan(&s, &observed, || key(2)).unwrap();
        assert_eq!(kinds(&p), ["CreateKeySecret", "ApplyDeployment"]);
        let Step::ApplyDeployment(d) = &p.steps[1] else {
            panic!()
        };
        assert_eq!(hash_annotation(d), key(2).unwrap().hash());
    }

    #[test]
    fn invalid_key_is_not_overwritten_and_holds_the_deployment() {
        let s = byo_server();
        let mut w = World::after(&plan(&s, &Observed::default(), || key(1)).unwrap());
        w.secret.data = None;
        let p = plan(&s, &w.observed(), never).unwrap();
        assert_eq!(kinds(&p), Vec::<&str>::new());
        assert_eq!(p.status.ready.reason, "KeySecretInvalid");
    }

    #[test]
    fn pdb_follows_the_spec_field() {
        let mut with = byo_server();
        with.spec.pod.disruption_budget =
            serde_json::from_value(json!({"minAvailable": 1})).unwrap();
        let p = plan(&with, &Observed::default(), || key(1)).unwrap();
        assert_eq!(
            kinds(&p),
            [
                "CreateKeySecret",
                "ApplyService",
                "ApplyDeployment",
                "ApplyPdb"
            ]
        );
        let w = World::after(&p);
        assert_eq!(kinds(&plan(&with, &w.observed(), never).unwrap()).len(), 0);
        // Cleared: the PDB we made is deleted.
        let p = plan(&byo_server(), &w.observed(), never).unwrap();
        assert_eq!(
            p.steps,
            vec![Step::DeletePdb {
                name: "terdut".into()
            }]
        );
        // Someone else's PDB of that name is neither deleted nor taken over.
        let mut theirs = w.pdb.clone().unwrap();
        theirs.metadata.owner_references = None;
        let observed = Observed {
            pdb: Some(&theirs),
            ..w.observed()
        };
        assert!(
            plan(&byo_server(), &observed, never)
                .unwrap()
                .steps
                .is_empty()
        );
        let p = plan(&with, &observed, never).unwrap();
        assert!(p.steps.is_empty());
        assert_eq!(p.status.ready.reason, "ResourceNotOwned");
    }

    #[test]
    fn a_foreign_deployment_is_never_adopted() {
        let s = byo_server();
        let mut w = World::after(&plan(&s, &Observed::default(), || key(1)).unwrap());
        w.deployment.metadata.owner_references = None;
        let p = plan(&s, &w.observed(), never).unwrap();
        assert!(p.steps.is_empty());
        assert_eq!(p.status.ready.reason, "ResourceNotOwned");
        assert!(p.status.ready.message.contains("Deployment terdut"));
    }

    /// What the terdut-server chart installs: a Deployment and a Service of the server's name,
    /// without the operator's labels (so no cache shows them) and without its ownerReference.
    fn chart_install() -> ObjectMeta {
        ObjectMeta {
            name: Some("terdut".into()),
            namespace: Some("oncall".into()),
            labels: Some([("app.kubernetes.io/managed-by".to_owned(), "Helm".to_owned())].into()),
            ..Default::default()
        }
    }

    #[test]
    fn objects_the_caches_cannot_see_are_never_applied_over() {
        let s = byo_server();
        let theirs = chart_install();
        for unlisted in [
            Unlisted {
                deployment: Some(&theirs),
                ..Default::default()
            },
            Unlisted {
                service: Some(&theirs),
                ..Default::default()
            },
        ] {
            let observed = Observed {
                unlisted,
                ..Default::default()
            };
            let p = plan(&s, &observed, || key(1)).unwrap();
            assert_eq!(
                kinds(&p),
                ["CreateKeySecret"],
                "no apply over the chart's objects"
            );
            assert_eq!(p.status.ready.reason, "ResourceNotOwned");
        }
        // A foreign Secret under the key's name: nothing created, nothing read.
        let observed = Observed {
            unlisted: Unlisted {
                key_secret: Some(&theirs),
                ..Default::default()
            },
            ..Default::default()
        };
        let p = plan(&s, &observed, never).unwrap();
        assert_eq!(
            kinds(&p),
            ["ApplyService"],
            "no key Secret, so no Deployment"
        );
        assert_eq!(p.status.ready.reason, "KeySecretNotOwned");
        assert_eq!(p.status.credentials_secret_ref, None);
        // One of ours whose labels were removed is applied again (and relabelled).
        let mut ours = chart_install();
        ours.owner_references = Some(vec![parent_owner()]);
        let observed = Observed {
            unlisted: Unlisted {
                service: Some(&ours),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(
            kinds(&plan(&s, &observed, || key(1)).unwrap()),
            ["CreateKeySecret", "ApplyService", "ApplyDeployment"]
        );
    }

    fn parent_owner() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        crate::server::names::tests::parent().owner
    }

    #[test]
    fn a_missing_referenced_secret_holds_the_deployment() {
        use crate::server::references::{Checked, Found, Reference};
        let s = byo_server();
        let checked = [Checked {
            reference: Reference {
                field: "spec.database.passwordSecretRef",
                name: "db".into(),
                key: "password".into(),
                database: true,
            },
            found: Found::NoSecret,
        }];
        let observed = Observed {
            references: &checked,
            ..Default::default()
        };
        let p = plan(&s, &observed, || key(1)).unwrap();
        assert_eq!(kinds(&p), ["CreateKeySecret", "ApplyService"]);
        assert_eq!(p.status.ready.reason, "SecretNotFound");
        assert!(p.status.ready.message.contains("Secret db"));
    }

    #[test]
    fn the_pod_security_condition_names_what_breaks_restricted() {
        let s = server(json!({"database": {"dsn": "postgres://x"},
            "pod": {"securityContext": {"runAsUser": 1000}}}));
        let p = plan(&s, &Observed::default(), || key(1)).unwrap();
        let c = p.status.pod_security.clone().unwrap();
        assert_eq!((c.status, c.reason.as_str()), (true, "Restricted"));
        let s = server(json!({"database": {"dsn": "postgres://x"},
            "pod": {"containerSecurityContext": {"privileged": true}}}));
        let p = plan(&s, &Observed::default(), || key(1)).unwrap();
        let c = p.status.pod_security.clone().unwrap();
        assert_eq!((c.status, c.reason.as_str()), (false, "BreaksRestricted"));
        assert!(c.message.contains("privileged is true"), "{}", c.message);
        assert!(
            p.warnings
                .iter()
                .any(|w| w.reason() == "PodSecurityBreaksRestricted")
        );
    }

    #[test]
    fn missing_database_cluster_holds_the_deployment_only() {
        let s = server(json!({"database": {"postgresClusterRef": {"name": "pg"}}}));
        let missing = ClusterObservation::Missing;
        let observed = Observed {
            database_cluster: Some(&missing),
            ..Default::default()
        };
        let p = plan(&s, &observed, || key(1)).unwrap();
        assert_eq!(kinds(&p), ["CreateKeySecret", "ApplyService"]);
        assert_eq!(p.status.ready.reason, "DatabaseClusterNotFound");
        let running = ClusterObservation::Found {
            phase: Some("Running".into()),
            master: Some(crate::server::database::MasterService {
                name: "pg".into(),
                port: 5432,
            }),
        };
        let observed = Observed {
            database_cluster: Some(&running),
            ..Default::default()
        };
        let p = plan(&s, &observed, || key(1)).unwrap();
        assert_eq!(
            kinds(&p),
            ["CreateKeySecret", "ApplyService", "ApplyDeployment"]
        );
    }

    fn db_secret(rv: &str) -> [Checked; 1] {
        use crate::server::references::{Found, Reference, SecretVersion};
        [Checked {
            reference: Reference {
                field: "spec.database.passwordSecretRef",
                name: "db".into(),
                key: "password".into(),
                database: true,
            },
            found: Found::Present(SecretVersion {
                uid: "uid-1".into(),
                resource_version: rv.into(),
            }),
        }]
    }

    fn db_annotation(d: &Deployment) -> Option<String> {
        let t = &d.spec.template;
        t.metadata
            .as_ref()?
            .annotations
            .as_ref()?
            .get(crate::server::rotation::DATABASE_SECRET_ANNOTATION)
            .cloned()
    }

    #[test]
    fn a_new_version_of_the_database_secret_rolls_the_pods_once() {
        let s = server(json!({"database": {"dsn": "postgres://x",
            "passwordSecretRef": {"name": "db", "key": "password"}}}));
        let v1 = db_secret("10");
        let first = Observed {
            references: &v1,
            ..Default::default()
        };
        let w = World::after(&plan(&s, &first, || key(1)).unwrap());
        let was = db_annotation(&w.deployment).expect("annotated");
        // Same version: nothing to do.
        let same = Observed {
            references: &v1,
            ..w.observed()
        };
        assert!(plan(&s, &same, never).unwrap().steps.is_empty());
        // The Secret was written: the Deployment is applied with a new annotation, and only
        // that changed.
        let v2 = db_secret("11");
        let rotated = Observed {
            references: &v2,
            ..w.observed()
        };
        let p = plan(&s, &rotated, never).unwrap();
        let [Step::ApplyDeployment(d)] = p.steps.as_slice() else {
            panic!("{:?}", p.steps)
        };
        assert_ne!(db_annotation(d), Some(was));
        assert_eq!(hash_annotation(d), key(1).unwrap().hash());
    }

    #[test]
    fn a_cnpg_cluster_is_wired_from_its_service_and_app_secret() {
        use crate::server::cnpg::{CnpgObservation, RwService};
        let s = server(json!({"database": {"cnpgClusterRef": {"name": "pg"}}}));
        let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let found = CnpgObservation::from_object(
            "pg",
            &ready,
            Some(RwService {
                name: "pg-rw".into(),
                port: 5432,
            }),
        );
        let observed = Observed {
            cnpg_cluster: Some(&found),
            cluster_domain: "cluster.local",
            ..Default::default()
        };
        let p = plan(&s, &observed, || key(1)).unwrap();
        let w = World::after(&p);
        let env = &w.deployment.spec.template.spec.as_ref().unwrap().containers[0]
            .env
            .clone()
            .unwrap();
        let dsn = env
            .iter()
            .find(|e| e.name == "TERDUT_DATABASE_DSN")
            .unwrap();
        assert_eq!(
            dsn.value.as_deref(),
            Some("postgres://app@pg-rw.oncall.svc.cluster.local.:5432/app?sslmode=require")
        );
        let pw = env.iter().find(|e| e.name == "PGPASSWORD").unwrap();
        let r = pw
            .value_from
            .as_ref()
            .unwrap()
            .secret_key_ref
            .as_ref()
            .unwrap();
        assert_eq!((r.name.as_str(), r.key.as_str()), ("pg-app", "password"));
    }

    #[test]
    fn the_status_summary_names_url_pods_and_fingerprint() {
        let s = byo_server();
        let observed = Observed {
            url: "http://terdut.oncall.svc.cluster.local.:8080",
            ..Default::default()
        };
        let p = plan(&s, &observed, || key(1)).unwrap();
        let sum = &p.status.summary;
        assert_eq!(
            sum.url.as_deref(),
            Some("http://terdut.oncall.svc.cluster.local.:8080")
        );
        assert_eq!(sum.key_fingerprint, Some(key(1).unwrap().fingerprint()));
        assert_eq!(sum.available_replicas, None, "no Deployment yet");
        let w = World::after(&p);
        let p = plan(&s, &w.observed(), never).unwrap();
        assert_eq!(p.status.summary.available_replicas, Some(0));
        let mut bad = byo_server();
        bad.metadata.name = Some("x".repeat(64));
        assert_eq!(
            plan(&bad, &observed, never).unwrap().status.summary.url,
            None
        );
    }

    #[test]
    fn bad_name_plans_nothing() {
        let mut s = byo_server();
        s.metadata.name = Some("x".repeat(64));
        let p = plan(&s, &Observed::default(), never).unwrap();
        assert!(p.steps.is_empty());
        assert_eq!(p.status.ready.reason, "InvalidSpec");
    }

    #[test]
    fn warnings_are_collected() {
        let s = server(json!({"database": {"dsn": "postgres://x"},
            "pod": {"extraEnv": [{"name": "TERDUT_OPERATOR_KEY", "value": "x"}],
                    "annotations": {"terdut.ryuvia.com/operator-key-hash": "x"}}}));
        let p = plan(&s, &Observed::default(), || key(1)).unwrap();
        assert_eq!(p.warnings.len(), 2);
    }

    #[test]
    fn key_generation_failure_is_an_error() {
        let r = plan(&byo_server(), &Observed::default(), || {
            Err(KeyGenError::for_test())
        });
        assert!(matches!(r, Err(PlanError::KeyGen(_))));
    }
}
