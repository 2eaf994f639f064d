//! The terdut-server pods the operator makes meet the `restricted` Pod Security level, on the
//! real apiserver (docs/security.md; complements the unit test
//! `server::deployment::default_pod_passes_restricted_pod_security` and the chart's own check in
//! e2e/harness/tests/chart.rs).
//!
//! A TerdutServer is created in a namespace labelled
//! `pod-security.kubernetes.io/enforce=restricted`; the operator makes its Deployment there. A
//! Deployment is only warned about under `enforce` (and this control plane has no kubelet to
//! run its pods), so the proof is a Pod built from the operator-made Deployment's pod template,
//! created with a server-side dry run in that namespace: the PodSecurity admission plugin
//! enforces on Pods, dry run or not. Three servers: a bring-your-own DSN with defaults, one with
//! every pod field the spec offers, and the Zalando `postgresClusterRef` variant (PGPASSWORD
//! from the cluster's Secret). A negative control makes the same template allow privilege
//! escalation and must be refused with a PodSecurity message. Alone in its binary: it installs
//! the `postgresql` CRD into its control plane.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{eventually, operator, zalando_crd};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;
use terdut_crds::v1alpha1::TerdutServer;
use terdut_testenv::ControlPlane;

const WAIT: Duration = Duration::from_secs(30);

/// A namespace enforcing (and warning about) the restricted level.
async fn restricted_namespace(cp: &ControlPlane, client: &kube::Client, prefix: &str) -> String {
    let name = format!(
        "{prefix}-{}-{}",
        std::process::id(),
        rand::random::<u32>() % 100_000
    );
    let labels: BTreeMap<String, String> = [
        ("pod-security.kubernetes.io/enforce", "restricted"),
        ("pod-security.kubernetes.io/enforce-version", "latest"),
        ("pod-security.kubernetes.io/warn", "restricted"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    cp.create_namespace(client, &name, labels).await.unwrap();
    default_service_account(client, &name).await;
    name
}

/// A Pod names a service account and admission wants it to exist; this control plane's
/// controller-manager may not make `default`, so make it (or find it made).
async fn default_service_account(client: &kube::Client, ns: &str) {
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "default"}})).unwrap();
    match sas.create(&PostParams::default(), &sa).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("creating the default ServiceAccount: {e}"),
    }
}

fn server(name: &str, port: i32, extra: serde_json::Value) -> TerdutServer {
    let mut spec = json!({
        "image": {"tag": "v0.9.3"},
        "networking": {"hostname": "terdut.example.com", "servicePort": port},
        "database": {"dsn": "postgres://terdut@db:5432/terdut"},
    });
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    serde_json::from_value(json!({
        "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutServer",
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap()
}

/// The Deployment the operator made for server `name`.
async fn operator_deployment(client: &kube::Client, ns: &str, name: &str) -> Deployment {
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    eventually("the operator's Deployment", WAIT, || async {
        api.get_opt(name).await.ok().flatten()
    })
    .await
}

/// A Pod exactly as the Deployment's ReplicaSet would create it.
fn pod_of(d: &Deployment, name: &str) -> Pod {
    let t = &d.spec.template;
    let mut meta = t.metadata.clone().unwrap_or_default();
    meta.name = Some(name.to_owned());
    Pod {
        metadata: meta,
        spec: t.spec.clone(),
        status: None,
    }
}

/// Creates `pod` with a server-side dry run; the admission error, if any.
async fn admit(client: &kube::Client, ns: &str, pod: &Pod) -> Result<(), String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pp = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    pods.create(&pp, pod)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The pod template passes `restricted`; with privilege escalation allowed it does not.
async fn assert_restricted(client: &kube::Client, ns: &str, d: &Deployment, what: &str) {
    let pod = pod_of(d, "psa-check");
    let spec = pod.spec.as_ref().unwrap();
    assert!(!spec.containers.is_empty(), "{what}: a container");
    if let Err(e) = admit(client, ns, &pod).await {
        panic!("{what}: the operator's pod template is refused under restricted: {e}");
    }
    // Negative control: the same template with one restricted rule broken.
    let mut bad = pod_of(d, "psa-check-bad");
    let c = &mut bad.spec.as_mut().unwrap().containers[0];
    c.security_context
        .get_or_insert_with(Default::default)
        .allow_privilege_escalation = Some(true);
    let err = admit(client, ns, &bad)
        .await
        .expect_err("a pod allowing privilege escalation is refused");
    assert!(
        err.contains("violates PodSecurity") && err.contains("allowPrivilegeEscalation"),
        "{what}: {err}"
    );
}

#[tokio::test]
async fn operator_made_server_pods_meet_the_restricted_level() {
    let cp = ControlPlane::shared().await.unwrap();
    let client = cp.client().await.unwrap();
    operator().await;
    let ns = restricted_namespace(cp, &client, "psa").await;
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);

    // Defaults.
    servers
        .create(&PostParams::default(), &server("terdut", 19481, json!({})))
        .await
        .unwrap();
    let d = operator_deployment(&client, &ns, "terdut").await;
    assert_restricted(&client, &ns, &d, "default server").await;

    // Every pod field the spec offers, with values a restricted namespace allows.
    let all = json!({
        "replicas": 2,
        "pod": {
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                          "limits": {"memory": "256Mi"}},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "oncall", "effect": "NoSchedule"}],
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "annotations": {"example.com/team": "oncall"},
            "extraEnv": [{"name": "TERDUT_LOG_LEVEL", "value": "debug"}],
            "extraEnvFrom": [{"configMapRef": {"name": "terdut-extra", "optional": true}}],
            "extraVolumes": [{"name": "scratch", "emptyDir": {}},
                             {"name": "ca", "configMap": {"name": "ca-bundle", "optional": true}}],
            "extraVolumeMounts": [{"name": "scratch", "mountPath": "/scratch"},
                                  {"name": "ca", "mountPath": "/etc/ca", "readOnly": true}],
            "imagePullSecrets": [{"name": "registry"}],
            "disruptionBudget": {"minAvailable": 1},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app.kubernetes.io/instance": "terdut-all"}}}],
        },
    });
    servers
        .create(&PostParams::default(), &server("terdut-all", 19482, all))
        .await
        .unwrap();
    let d = operator_deployment(&client, &ns, "terdut-all").await;
    let pod = d.spec.template.spec.as_ref().unwrap();
    assert!(
        pod.volumes.iter().flatten().any(|v| v.name == "scratch"),
        "the extra volume is in the template"
    );
    assert_restricted(&client, &ns, &d, "server with every pod field").await;

    // The Zalando variant: DSN and PGPASSWORD from the postgres-operator's cluster.
    terdut_testenv::install_crds(&client, vec![zalando_crd()])
        .await
        .unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("acid.zalan.do", "v1", "postgresql"),
        "postgresqls",
    );
    let pg: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "acid.zalan.do/v1", "kind": "postgresql",
        "metadata": {"name": "terdut-postgres"},
        "spec": {"teamId": "terdut", "numberOfInstances": 1},
    }))
    .unwrap();
    // The CRD may take a moment to be served.
    eventually("the postgresql cluster", WAIT, || async {
        pg.create(&PostParams::default(), &obj).await.ok()
    })
    .await;
    // What the postgres-operator makes with it: the master Service (where the DSN points) and
    // the credentials Secret.
    master_service(&client, &ns, "terdut-postgres").await;
    common::create_secret(
        &client,
        &ns,
        "terdut.terdut-postgres.credentials.postgresql.acid.zalan.do",
        &[("username", "terdut"), ("password", "not-a-real-password")],
    )
    .await;
    servers
        .create(
            &PostParams::default(),
            &server(
                "terdut-pg",
                19483,
                json!({"database": {"postgresClusterRef": {"name": "terdut-postgres"}}}),
            ),
        )
        .await
        .unwrap();
    let d = operator_deployment(&client, &ns, "terdut-pg").await;
    let env = d.spec.template.spec.as_ref().unwrap().containers[0]
        .env
        .clone()
        .unwrap_or_default();
    assert!(
        env.iter().any(|e| e.name == "PGPASSWORD"
            && e.value_from
                .as_ref()
                .is_some_and(|v| v.secret_key_ref.is_some())),
        "the Zalando wiring is in the template: {env:?}"
    );
    let dsn = env
        .iter()
        .find(|e| e.name == "TERDUT_DATABASE_DSN")
        .and_then(|e| e.value.clone())
        .unwrap_or_default();
    assert!(
        dsn.contains(&format!("@terdut-postgres.{ns}.svc.cluster.local.:6432/")),
        "the DSN points at the master Service the cluster has, by its absolute name: {dsn}"
    );
    assert_restricted(&client, &ns, &d, "Zalando server").await;
}

/// The Service the postgres-operator makes for a cluster's primary, on a port of its own, to
/// show the DSN reads it rather than assuming 5432.
async fn master_service(client: &kube::Client, ns: &str, cluster: &str) {
    let svc: k8s_openapi::api::core::v1::Service = serde_json::from_value(json!({
        "metadata": {"name": cluster, "labels": {"application": "spilo", "cluster-name": cluster,
                                                "spilo-role": "master"}},
        "spec": {"ports": [{"name": "postgresql", "port": 6432, "targetPort": 5432}]},
    }))
    .unwrap();
    Api::<k8s_openapi::api::core::v1::Service>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &svc)
        .await
        .unwrap();
}

/// One field of the pod's security context set by the user (`runAsUser`) keeps every other
/// restricted default: the pod is admitted under `restricted` (it used to replace the whole
/// default, dropping seccomp and runAsNonRoot), and the TerdutServer says it meets the level.
/// A privileged container is named in the `PodSecurity` condition and a Warning.
#[tokio::test]
async fn a_run_as_user_only_context_keeps_the_restricted_defaults() {
    let cp = ControlPlane::shared().await.unwrap();
    let client = cp.client().await.unwrap();
    operator().await;
    let ns = restricted_namespace(cp, &client, "psa-user").await;
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    servers
        .create(
            &PostParams::default(),
            &server(
                "terdut",
                19485,
                json!({"pod": {"securityContext": {"runAsUser": 1000}}}),
            ),
        )
        .await
        .unwrap();
    let d = operator_deployment(&client, &ns, "terdut").await;
    let psc = d
        .spec
        .template
        .spec
        .as_ref()
        .unwrap()
        .security_context
        .clone();
    assert_eq!(psc.as_ref().and_then(|p| p.run_as_user), Some(1000));
    assert_restricted(&client, &ns, &d, "runAsUser only").await;
    let condition = |name: &'static str| {
        let servers = servers.clone();
        async move {
            let s = servers.get(name).await.ok()?;
            s.status?
                .conditions
                .into_iter()
                .find(|c| c.type_ == "PodSecurity")
        }
    };
    let c = eventually("PodSecurity on the server", WAIT, || condition("terdut")).await;
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("True", "Restricted")
    );

    servers
        .create(
            &PostParams::default(),
            &server(
                "terdut-priv",
                19486,
                json!({"pod": {"containerSecurityContext": {"privileged": true},
                               "extraVolumes": [{"name": "host", "hostPath": {"path": "/var/log"}}],
                               "extraVolumeMounts": [{"name": "host", "mountPath": "/host"}]}}),
            ),
        )
        .await
        .unwrap();
    let c = eventually("PodSecurity on the privileged server", WAIT, || async {
        condition("terdut-priv")
            .await
            .filter(|c| c.status == "False")
    })
    .await;
    assert_eq!(c.reason, "BreaksRestricted");
    assert!(c.message.contains("privileged is true"), "{}", c.message);
    assert!(c.message.contains("hostPath volume"), "{}", c.message);
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), &ns);
    eventually("the PodSecurity Warning", WAIT, || async {
        events
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("PodSecurityBreaksRestricted")
                    && e.note.as_deref().is_some_and(|n| n.contains("privileged"))
            })
    })
    .await;
}

/// The check is not vacuous: the same pod that passes under `restricted` with one rule broken
/// is admitted in a namespace that enforces nothing, so the refusal above is PodSecurity's.
#[tokio::test]
async fn the_refusal_comes_from_the_namespace_level() {
    let cp = ControlPlane::shared().await.unwrap();
    let client = cp.client().await.unwrap();
    operator().await;
    let ns = cp.namespace(&client, "psa-none").await.unwrap();
    default_service_account(&client, &ns).await;
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    servers
        .create(&PostParams::default(), &server("terdut", 19484, json!({})))
        .await
        .unwrap();
    let d = operator_deployment(&client, &ns, "terdut").await;
    let mut bad = pod_of(&d, "psa-check-bad");
    bad.spec.as_mut().unwrap().containers[0]
        .security_context
        .get_or_insert_with(Default::default)
        .allow_privilege_escalation = Some(true);
    admit(&client, &ns, &bad)
        .await
        .expect("no Pod Security level here: admitted");
}
