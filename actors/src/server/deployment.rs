//! The terdut-server Deployment (docs/design.md §4.1, §6, §7).
//!
//! Built whole every pass and server-side applied with the one field manager, so a field the
//! operator stops setting is removed. kube's `Patch::Apply` of this typed object serializes
//! `apiVersion`/`kind` itself (k8s-openapi's `Resource` impl), so no `serde_json::Value` detour
//! is needed.
//!
//! `spec.pod` is passed through (docs/design.md §4.1: corev1 types throughout); the operator adds
//! only what it needs, and the security contexts are laid over the `restricted` defaults field by
//! field (`pod_security.rs`), so the pod passes that level unless the spec itself breaks it.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EnvVar, HTTPGetAction, PodSecurityContext,
    PodSpec as CorePodSpec, PodTemplateSpec, Probe, SeccompProfile, SecurityContext,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use terdut_crds::v1alpha1::TerdutServerSpec;

use super::names::{CONTAINER_NAME, PORT_NAME, Parent, deployment_name, labels, selector_labels};
use super::pod_security::merge;
use super::rotation::{RESERVED, RollTriggers};
use super::warning::SpecWarning;

/// Liveness endpoint (terdut-api.md "Transport").
pub const LIVENESS_PATH: &str = "/healthz";
/// Readiness endpoint: ready when the database is (terdut-api.md "Transport").
pub const READINESS_PATH: &str = "/readyz";

/// The Deployment and the user settings it overrode.
#[derive(Clone, Debug, PartialEq)]
pub struct BuiltDeployment {
    pub deployment: Deployment,
    pub warnings: Vec<SpecWarning>,
}

/// Builds the Deployment. `env` is [`super::env::container_env`]'s list; `triggers` are the
/// pod-template annotations whose change rolls the pods (the operator key's hash, the database
/// password Secret's version: `rotation.rs`).
pub fn deployment(
    parent: &Parent,
    spec: &TerdutServerSpec,
    env: Vec<EnvVar>,
    triggers: &RollTriggers,
) -> BuiltDeployment {
    let pod = &spec.pod;
    let mut warnings = vec![];
    let mut annotations = pod.annotations.clone();
    // The operator's own win, and are reserved even when it sets none (a DSN without a
    // password Secret): a user's value would otherwise look like a version the pods run.
    for key in RESERVED {
        if annotations.remove(key).is_some() {
            warnings.push(SpecWarning::AnnotationReserved { key: key.into() });
        }
    }
    annotations.extend(triggers.annotations());

    let container = Container {
        name: CONTAINER_NAME.into(),
        image: Some(format!("{}:{}", spec.image.repository, spec.image.tag)),
        image_pull_policy: Some(spec.image.pull_policy.as_str().into()),
        ports: Some(vec![ContainerPort {
            name: Some(PORT_NAME.into()),
            container_port: spec.networking.service_port,
            // Explicit: SSA keys container ports by (containerPort, protocol).
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        env: non_empty(env),
        env_from: non_empty(pod.extra_env_from.clone()),
        liveness_probe: Some(http_probe(LIVENESS_PATH)),
        readiness_probe: Some(http_probe(READINESS_PATH)),
        resources: pod.resources.clone(),
        // Field by field over the restricted defaults: setting one field keeps the others.
        security_context: Some(merge(
            restricted_container_context(),
            pod.container_security_context.as_ref(),
        )),
        volume_mounts: non_empty(pod.extra_volume_mounts.clone()),
        ..Default::default()
    };

    let pod_spec = CorePodSpec {
        containers: vec![container],
        // The Service carries the server's name (e.g. `terdut`), so the kubelet's service links
        // would inject `TERDUT_PORT`, `TERDUT_SERVICE_HOST`, ... right into the server's own
        // `TERDUT_` configuration namespace. The server finds nothing through them anyway.
        enable_service_links: Some(false),
        // terdut-server never calls the Kubernetes API (docs/design.md §9: only the operator does).
        automount_service_account_token: Some(false),
        security_context: Some(merge(
            restricted_pod_context(),
            pod.security_context.as_ref(),
        )),
        volumes: non_empty(pod.extra_volumes.clone()),
        image_pull_secrets: non_empty(pod.image_pull_secrets.clone()),
        tolerations: non_empty(pod.tolerations.clone()),
        affinity: pod.affinity.clone(),
        topology_spread_constraints: non_empty(pod.topology_spread_constraints.clone()),
        node_selector: (!pod.node_selector.is_empty()).then(|| pod.node_selector.clone()),
        ..Default::default()
    };

    let deployment = Deployment {
        metadata: ObjectMeta {
            name: Some(deployment_name(&parent.name)),
            namespace: Some(parent.namespace.clone()),
            labels: Some(labels(&parent.name)),
            owner_references: Some(vec![parent.owner.clone()]),
            ..Default::default()
        },
        spec: DeploymentSpec {
            replicas: Some(spec.replicas),
            // Immutable once created: only the stable selector labels (names.rs).
            selector: LabelSelector {
                match_labels: Some(selector_labels(&parent.name)),
                match_expressions: None,
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(&parent.name)),
                    annotations: Some(annotations),
                    ..Default::default()
                }),
                spec: Some(pod_spec),
            },
            ..Default::default()
        },
        status: None,
    };
    BuiltDeployment {
        deployment,
        warnings,
    }
}

fn http_probe(path: &str) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::String(PORT_NAME.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The pod-level half of the `restricted` Pod Security level, used when the user sets no
/// `spec.pod.securityContext`. Assumption: the terdut-server image runs as a numeric non-root
/// USER (the kubelet cannot check `runAsNonRoot` against a user name); no UID is forced here so
/// platforms that assign UIDs (OpenShift's restricted SCC) keep working.
pub fn restricted_pod_context() -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        seccomp_profile: Some(runtime_default()),
        ..Default::default()
    }
}

/// The container-level half, used when the user sets no `spec.pod.containerSecurityContext`.
/// Assumption: the server writes nothing to its root filesystem; a user who needs scratch space
/// adds an `emptyDir` through `extraVolumes`/`extraVolumeMounts`.
pub fn restricted_container_context() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            add: None,
        }),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        seccomp_profile: Some(runtime_default()),
        ..Default::default()
    }
}

fn runtime_default() -> SeccompProfile {
    SeccompProfile {
        type_: "RuntimeDefault".into(),
        localhost_profile: None,
    }
}

/// `None` for an empty list, so an unset knob is absent from the apply rather than an empty list
/// the field manager would then own.
fn non_empty<T>(v: Vec<T>) -> Option<Vec<T>> {
    (!v.is_empty()).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::names::tests::{parent, server};
    use crate::server::rotation::{DATABASE_SECRET_ANNOTATION, KEY_HASH_ANNOTATION};
    use k8s_openapi::api::core::v1::{
        LocalObjectReference, ResourceRequirements, Toleration, Volume, VolumeMount,
    };
    use serde_json::json;

    fn build(spec: serde_json::Value) -> BuiltDeployment {
        let env = vec![EnvVar {
            name: "A".into(),
            value: Some("1".into()),
            value_from: None,
        }];
        deployment(
            &parent(),
            &server(spec).spec,
            env,
            &RollTriggers::key("abcd"),
        )
    }

    fn pod_of(d: &Deployment) -> &CorePodSpec {
        d.spec.template.spec.as_ref().unwrap()
    }

    #[test]
    fn minimal_spec_builds_the_expected_deployment() {
        let d = build(json!({"database": {"dsn": "postgres://x"}})).deployment;
        assert_eq!(d.metadata.name.as_deref(), Some("terdut"));
        assert_eq!(d.metadata.namespace.as_deref(), Some("oncall"));
        assert_eq!(d.metadata.owner_references, Some(vec![parent().owner]));
        let spec = &d.spec;
        assert_eq!(spec.replicas, Some(2));
        assert_eq!(spec.selector.match_labels, Some(selector_labels("terdut")));
        let tmeta = spec.template.metadata.as_ref().unwrap();
        assert_eq!(tmeta.labels, Some(labels("terdut")));
        assert_eq!(
            tmeta.annotations.as_ref().unwrap()[KEY_HASH_ANNOTATION],
            "abcd"
        );

        let pod = pod_of(&d);
        assert_eq!(pod.containers.len(), 1);
        let c = &pod.containers[0];
        assert_eq!(c.name, "terdut-server");
        assert_eq!(
            c.image.as_deref(),
            Some("git.ryuvia.com/niklas/terdut-server:v0.9.3")
        );
        assert_eq!(c.image_pull_policy.as_deref(), Some("IfNotPresent"));
        let port = &c.ports.as_ref().unwrap()[0];
        assert_eq!(
            (port.name.as_deref(), port.container_port),
            (Some("http"), 8080)
        );
        let path = |p: &Option<Probe>| {
            let g = p.as_ref().unwrap().http_get.as_ref().unwrap();
            (g.path.clone().unwrap(), g.port.clone())
        };
        let http = IntOrString::String("http".into());
        assert_eq!(path(&c.liveness_probe), ("/healthz".into(), http.clone()));
        assert_eq!(path(&c.readiness_probe), ("/readyz".into(), http));
        assert_eq!(c.env.as_ref().unwrap()[0].name, "A");
        assert_eq!(pod.enable_service_links, Some(false));
        assert_eq!(pod.automount_service_account_token, Some(false));
        for absent in [
            pod.volumes.is_some(),
            pod.tolerations.is_some(),
            pod.image_pull_secrets.is_some(),
            pod.node_selector.is_some(),
            pod.affinity.is_some(),
            c.env_from.is_some(),
            c.volume_mounts.is_some(),
            c.resources.is_some(),
        ] {
            assert!(!absent);
        }
    }

    /// The checks of the `restricted` Pod Security Standard that a pod must pass (runAsNonRoot,
    /// seccomp, no privilege escalation, all capabilities dropped), applied to the default pod.
    #[test]
    fn default_pod_passes_restricted_pod_security() {
        let d = build(json!({"database": {"dsn": "postgres://x"}})).deployment;
        let pod = pod_of(&d);
        let psc = pod.security_context.as_ref().unwrap();
        let c = &pod.containers[0];
        let csc = c.security_context.as_ref().unwrap();
        assert!(psc.run_as_non_root == Some(true) || csc.run_as_non_root == Some(true));
        let seccomp = |p: &Option<SeccompProfile>| p.as_ref().map(|s| s.type_.clone());
        assert_eq!(
            seccomp(&psc.seccomp_profile).as_deref(),
            Some("RuntimeDefault")
        );
        assert_eq!(csc.allow_privilege_escalation, Some(false));
        let caps = csc.capabilities.as_ref().unwrap();
        assert_eq!(caps.drop, Some(vec!["ALL".to_owned()]));
        assert!(caps.add.is_none());
        assert_eq!(csc.read_only_root_filesystem, Some(true));
        assert!(csc.privileged.is_none());
        assert!(pod.host_network.is_none() && pod.host_pid.is_none() && pod.host_ipc.is_none());
    }

    #[test]
    fn pod_spec_is_passed_through() {
        let b = build(json!({
            "database": {"dsn": "postgres://x"},
            "replicas": 1,
            "image": {"repository": "r.example/terdut", "tag": "v1", "pullPolicy": "Always"},
            "networking": {"hostname": "h", "servicePort": 9000},
            "pod": {
                "resources": {"limits": {"memory": "256Mi"}},
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "terdut",
                                 "effect": "NoSchedule"}],
                "nodeSelector": {"disk": "ssd"},
                "affinity": {"podAntiAffinity": {}},
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                                               "whenUnsatisfiable": "DoNotSchedule"}],
                "annotations": {"a": "b", "terdut.ryuvia.com/operator-key-hash": "mine",
                                "terdut.ryuvia.com/database-secret-hash": "mine"},
                "securityContext": {"runAsUser": 1000},
                "containerSecurityContext": {"privileged": false},
                "extraEnvFrom": [{"configMapRef": {"name": "cm"}}],
                "extraVolumes": [{"name": "tmp", "emptyDir": {}}],
                "extraVolumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                "imagePullSecrets": [{"name": "regcred"}],
            }
        }));
        let d = &b.deployment;
        let spec = &d.spec;
        assert_eq!(spec.replicas, Some(1));
        let ann = spec
            .template
            .metadata
            .as_ref()
            .unwrap()
            .annotations
            .as_ref()
            .unwrap();
        assert_eq!(ann["a"], "b");
        assert_eq!(ann[KEY_HASH_ANNOTATION], "abcd", "operator wins");
        assert!(
            !ann.contains_key(DATABASE_SECRET_ANNOTATION),
            "reserved even when the operator sets none"
        );
        assert_eq!(
            b.warnings,
            vec![
                SpecWarning::AnnotationReserved {
                    key: KEY_HASH_ANNOTATION.into()
                },
                SpecWarning::AnnotationReserved {
                    key: DATABASE_SECRET_ANNOTATION.into()
                }
            ]
        );
        let pod = pod_of(d);
        let c = &pod.containers[0];
        assert_eq!(c.image.as_deref(), Some("r.example/terdut:v1"));
        assert_eq!(c.image_pull_policy.as_deref(), Some("Always"));
        assert_eq!(c.ports.as_ref().unwrap()[0].container_port, 9000);
        let limits = c
            .resources
            .as_ref()
            .and_then(|r: &ResourceRequirements| r.limits.as_ref());
        assert_eq!(limits.unwrap()["memory"].0, "256Mi");
        let tol: &Vec<Toleration> = pod.tolerations.as_ref().unwrap();
        assert_eq!(tol[0].key.as_deref(), Some("dedicated"));
        assert_eq!(pod.node_selector.as_ref().unwrap()["disk"], "ssd");
        assert!(pod.affinity.as_ref().unwrap().pod_anti_affinity.is_some());
        assert_eq!(pod.topology_spread_constraints.as_ref().unwrap().len(), 1);
        // A user's own security context is laid over the defaults field by field.
        assert_eq!(
            pod.security_context.as_ref().unwrap().run_as_user,
            Some(1000)
        );
        assert_eq!(
            pod.security_context.as_ref().unwrap().run_as_non_root,
            Some(true),
            "the default the user did not set is kept"
        );
        assert_eq!(c.security_context.as_ref().unwrap().privileged, Some(false));
        assert_eq!(c.env_from.as_ref().unwrap().len(), 1);
        let vols: &Vec<Volume> = pod.volumes.as_ref().unwrap();
        assert_eq!(vols[0].name, "tmp");
        let mounts: &Vec<VolumeMount> = c.volume_mounts.as_ref().unwrap();
        assert_eq!(mounts[0].mount_path, "/tmp");
        let ips: &Vec<LocalObjectReference> = pod.image_pull_secrets.as_ref().unwrap();
        assert_eq!(ips[0].name, "regcred");
    }

    #[test]
    fn a_new_key_changes_only_the_hash_annotation() {
        let s = server(json!({"database": {"dsn": "postgres://x"}})).spec;
        let a = deployment(&parent(), &s, vec![], &RollTriggers::key("aaaa")).deployment;
        let mut b = deployment(&parent(), &s, vec![], &RollTriggers::key("bbbb")).deployment;
        assert_ne!(a, b);
        let ann = b.spec.template.metadata.as_mut().unwrap();
        ann.annotations
            .as_mut()
            .unwrap()
            .insert(KEY_HASH_ANNOTATION.into(), "aaaa".into());
        assert_eq!(a, b);
    }

    #[test]
    fn a_rotated_database_secret_changes_only_its_annotation() {
        let s = server(json!({"database": {"dsn": "postgres://x",
            "passwordSecretRef": {"name": "db", "key": "password"}}}))
        .spec;
        let with = |h: &str| {
            let t = RollTriggers {
                key_hash: "k".into(),
                database_secret: Some(h.into()),
            };
            deployment(&parent(), &s, vec![], &t).deployment
        };
        let (a, mut b) = (with("v1"), with("v2"));
        let ann = b.spec.template.metadata.as_mut().unwrap();
        assert_eq!(
            ann.annotations.as_ref().unwrap()[DATABASE_SECRET_ANNOTATION],
            "v2"
        );
        ann.annotations
            .as_mut()
            .unwrap()
            .insert(DATABASE_SECRET_ANNOTATION.into(), "v1".into());
        assert_eq!(a, b);
    }

    #[test]
    fn serializes_with_type_meta_for_apply() {
        use k8s_openapi::Resource;
        let d = build(json!({"database": {"dsn": "postgres://x"}})).deployment;
        assert_eq!(Deployment::API_VERSION, "apps/v1");
        assert_eq!(Deployment::KIND, "Deployment");
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!(v["apiVersion"], "apps/v1");
        assert_eq!(v["kind"], "Deployment");
    }
}
