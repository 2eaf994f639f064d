//! The Helm chart: `helm lint` passes, a typo in values fails at install (values.schema.json),
//! and the rendered manifests (default values and every feature on) are accepted by the real
//! kube-apiserver with strict validation, including the restricted Pod Security level.

use std::path::{Path, PathBuf};
use std::process::Command;

use terdut_testenv::{ControlPlane, tool};

fn chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../chart/terdut-operator")
}

fn helm(args: &[&str]) -> (bool, String) {
    let out = Command::new(tool("helm").unwrap())
        .args(args)
        .output()
        .unwrap();
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

fn render(ns: &str, extra: &[&str]) -> String {
    let chart = chart();
    let mut args = vec![
        "template",
        "terdut",
        chart.to_str().unwrap(),
        "--namespace",
        ns,
        "--kube-version",
        "1.37.2",
    ];
    args.extend_from_slice(extra);
    let (ok, out) = helm(&args);
    assert!(ok, "helm template failed: {out}");
    out
}

fn all_features() -> String {
    chart()
        .join("ci/all-features-values.yaml")
        .to_string_lossy()
        .into_owned()
}

#[test]
fn helm_lint_passes_with_default_and_all_feature_values() {
    let chart = chart();
    let (ok, out) = helm(&["lint", chart.to_str().unwrap()]);
    assert!(ok, "{out}");
    let (ok, out) = helm(&["lint", chart.to_str().unwrap(), "-f", &all_features()]);
    assert!(ok, "{out}");
    let namespaced = chart.join("ci/namespaced-values.yaml");
    let (ok, out) = helm(&[
        "lint",
        chart.to_str().unwrap(),
        "-f",
        namespaced.to_str().unwrap(),
    ]);
    assert!(ok, "{out}");
}

#[test]
fn a_typo_in_values_fails() {
    let chart = chart();
    let (ok, out) = helm(&[
        "template",
        "t",
        chart.to_str().unwrap(),
        "--set",
        "operater.resync=5m",
    ]);
    assert!(!ok && out.contains("operater"), "{out}");
    let (ok, out) = helm(&[
        "template",
        "t",
        chart.to_str().unwrap(),
        "--set",
        "operator.resync=five",
    ]);
    assert!(!ok && out.contains("resync"), "{out}");
}

async fn apply_dry_run(cp: &ControlPlane, ns: &str, manifests: &str) -> String {
    let path = cp.dir().join(format!("rendered-{ns}.yaml"));
    std::fs::write(&path, manifests).unwrap();
    let (ok, out) = cp
        .kubectl(&[
            "apply",
            "--dry-run=server",
            "--validate=strict",
            "-n",
            ns,
            "-f",
            path.to_str().unwrap(),
        ])
        .unwrap();
    assert!(ok, "the apiserver refused the rendered chart:\n{out}");
    out
}

/// The ServiceMonitor kind comes from the Prometheus operator; install its shape (idempotent).
async fn install_service_monitor_crd(client: &kube::Client) {
    let sm = serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
        "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
            "names": {"kind": "ServiceMonitor", "plural": "servicemonitors"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap();
    terdut_testenv::install_crds(client, vec![sm])
        .await
        .unwrap();
}

#[tokio::test]
async fn rendered_chart_is_accepted_by_the_apiserver() {
    let cp = ControlPlane::shared().await.unwrap();
    let client = cp.client().await.unwrap();
    let ns = cp.namespace(&client, "chart").await.unwrap();
    install_service_monitor_crd(&client).await;

    let default = render(&ns, &[]);
    let out = apply_dry_run(cp, &ns, &default).await;
    for kind in [
        "serviceaccount/",
        "clusterrole.rbac.authorization.k8s.io/",
        "deployment.apps/",
        "service/",
    ] {
        assert!(out.contains(kind), "default render lacks {kind}: {out}");
    }
    let all = render(&ns, &["-f", &all_features()]);
    let out = apply_dry_run(cp, &ns, &all).await;
    for kind in [
        "servicemonitor.monitoring.coreos.com/",
        "poddisruptionbudget.policy/",
        "terdutserver.terdut.ryuvia.com/",
    ] {
        assert!(
            out.contains(kind),
            "all-features render lacks {kind}: {out}"
        );
    }
}

#[tokio::test]
async fn operator_pods_meet_the_restricted_pod_security_level() {
    let cp = ControlPlane::shared().await.unwrap();
    let client = cp.client().await.unwrap();
    let ns = format!("restricted-{}", std::process::id());
    let labels = [
        ("pod-security.kubernetes.io/enforce", "restricted"),
        ("pod-security.kubernetes.io/warn", "restricted"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    cp.create_namespace(&client, &ns, labels).await.unwrap();
    install_service_monitor_crd(&client).await;
    // PodSecurity checks a Deployment's pod template at admission and warns on violations.
    let out = apply_dry_run(cp, &ns, &render(&ns, &[])).await;
    assert!(!out.contains("would violate PodSecurity"), "{out}");
    let out = apply_dry_run(cp, &ns, &render(&ns, &["-f", &all_features()])).await;
    assert!(!out.contains("would violate PodSecurity"), "{out}");
    // And the check is live: a pod template that allows privilege escalation is flagged in this
    // namespace.
    let bad = render(
        &ns,
        &["--set", "securityContext.allowPrivilegeEscalation=true"],
    );
    let out = apply_dry_run(cp, &ns, &bad).await;
    assert!(
        out.contains("would violate PodSecurity"),
        "expected a PodSecurity warning: {out}"
    );
}

/// The documents of a rendered chart, as JSON values.
fn documents(manifests: &str) -> Vec<serde_json::Value> {
    manifests
        .split("\n---")
        .filter_map(|doc| serde_yaml_ng::from_str::<serde_json::Value>(doc).ok())
        .filter(|v| v.is_object())
        .collect()
}

/// rbac.namespaced (docs/design.md §9, §13): a Role and RoleBinding per watched namespace and the
/// release namespace, the operator told to watch exactly those, and no cluster-wide grant
/// beyond reading Namespaces, so in particular no Secret outside the watched namespaces.
#[tokio::test]
async fn namespaced_rbac_has_a_role_per_namespace_and_no_cluster_wide_secrets() {
    let cp = ControlPlane::shared().await.unwrap();
    let client = cp.client().await.unwrap();
    let ns = cp.namespace(&client, "chart-ns").await.unwrap();
    let a = cp.namespace(&client, "tenant-a").await.unwrap();
    let b = cp.namespace(&client, "tenant-b").await.unwrap();
    let values = chart().join("ci/namespaced-values.yaml");
    let rendered = render(
        &ns,
        &[
            "-f",
            values.to_str().unwrap(),
            "--set",
            &format!("rbac.watchNamespaces={{{a},{b}}}"),
        ],
    );
    // Without `-n`: the Roles live in the tenant namespaces (every template sets its namespace).
    let path = cp.dir().join(format!("rendered-{ns}.yaml"));
    std::fs::write(&path, &rendered).unwrap();
    let (ok, out) = cp
        .kubectl(&[
            "apply",
            "--dry-run=server",
            "--validate=strict",
            "-f",
            path.to_str().unwrap(),
        ])
        .unwrap();
    assert!(ok, "the apiserver refused the rendered chart:\n{out}");
    assert!(out.contains("role.rbac.authorization.k8s.io/"), "{out}");

    let docs = documents(&rendered);
    let of_kind = |kind: &str| -> Vec<&serde_json::Value> {
        docs.iter().filter(|d| d["kind"] == kind).collect()
    };
    // The release namespace's own Roles (the Lease, the operator's records and claim) are
    // not the operator's rules per watched namespace.
    let operator_role = |d: &&serde_json::Value| {
        let name = d["metadata"]["name"].as_str().unwrap();
        !name.ends_with("-leader-election") && !name.ends_with("-own-namespace")
    };
    let mut role_namespaces: Vec<&str> = of_kind("Role")
        .into_iter()
        .filter(operator_role)
        .map(|d| d["metadata"]["namespace"].as_str().unwrap())
        .collect();
    role_namespaces.sort_unstable();
    let mut want = vec![a.as_str(), b.as_str(), ns.as_str()];
    want.sort_unstable();
    assert_eq!(role_namespaces, want);
    let mut binding_namespaces: Vec<&str> = of_kind("RoleBinding")
        .into_iter()
        .filter(operator_role)
        .map(|d| d["metadata"]["namespace"].as_str().unwrap())
        .collect();
    binding_namespaces.sort_unstable();
    assert_eq!(binding_namespaces, want);
    for role in of_kind("Role").into_iter().filter(operator_role) {
        assert!(role.to_string().contains("secrets"), "{role}");
    }

    // The operator's own: the tenant roles (rbac.tenantRoles) are what users get, not it.
    let cluster_roles: Vec<_> = of_kind("ClusterRole")
        .into_iter()
        .filter(|d| {
            !["terdut-view", "terdut-edit"].contains(&d["metadata"]["name"].as_str().unwrap())
        })
        .collect();
    assert_eq!(cluster_roles.len(), 1, "{cluster_roles:?}");
    let rules = cluster_roles[0]["rules"].as_array().unwrap();
    assert_eq!(
        rules,
        &vec![serde_json::json!({
            "apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]
        })]
    );

    let deployment = &of_kind("Deployment")[0];
    let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(
        args.contains(&format!("--watch-namespaces={a},{b},{ns}")),
        "{args}"
    );
}

#[test]
fn namespaced_rbac_without_watch_namespaces_fails_the_render() {
    let chart = chart();
    let (ok, out) = helm(&[
        "template",
        "t",
        chart.to_str().unwrap(),
        "--kube-version",
        "1.37.2",
        "--set",
        "rbac.namespaced=true",
    ]);
    assert!(
        !ok && out.contains("rbac.namespaced=true needs rbac.watchNamespaces"),
        "{out}"
    );
}

#[test]
fn an_existing_service_account_must_be_named() {
    let chart = chart();
    let (ok, out) = helm(&[
        "template",
        "t",
        chart.to_str().unwrap(),
        "--kube-version",
        "1.37.2",
        "--set",
        "serviceAccount.create=false",
    ]);
    assert!(
        !ok && out.contains("serviceAccount.create=false needs serviceAccount.name"),
        "{out}"
    );
    let (ok, out) = helm(&[
        "template",
        "t",
        chart.to_str().unwrap(),
        "--kube-version",
        "1.37.2",
        "--set",
        "serviceAccount.create=false",
        "--set",
        "serviceAccount.name=ops-terdut",
    ]);
    assert!(ok, "{out}");
    assert!(out.contains("name: ops-terdut"), "{out}");
    assert!(!out.contains("name: default\n"), "{out}");
}

/// Asks the authorizer whether `user` may `verb` the resource (`group`, `resource`, with an
/// optional `/subresource`, and `name`) in `ns`.
async fn allowed(
    client: &kube::Client,
    user: &str,
    ns: &str,
    (group, resource, verb, name): (&str, &str, &str, Option<&str>),
) -> bool {
    use k8s_openapi::api::authorization::v1::SubjectAccessReview;
    let (resource, subresource) = match resource.split_once('/') {
        Some((r, s)) => (r, Some(s)),
        None => (resource, None),
    };
    let review: SubjectAccessReview = serde_json::from_value(serde_json::json!({
        "spec": {
            "user": user,
            "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{ns}"),
                       "system:authenticated"],
            "resourceAttributes": {
                "namespace": ns, "group": group, "resource": resource,
                "subresource": subresource.unwrap_or_default(), "verb": verb,
                "name": name.unwrap_or_default(),
            },
        }
    }))
    .unwrap();
    let answer = kube::Api::<SubjectAccessReview>::all(client.clone())
        .create(&Default::default(), &review)
        .await
        .unwrap();
    answer.status.is_some_and(|s| s.allowed)
}

/// Least privilege (docs/security.md): the chart's ServiceAccount, impersonated against the
/// real authorizer with the chart's RBAC applied, may do what the operator does (the audited
/// set) and is refused what it never does, including every verb the chart used to grant.
#[tokio::test]
async fn the_chart_service_account_is_refused_what_the_operator_never_does() {
    let cp = ControlPlane::shared().await.unwrap();
    let client = cp.client().await.unwrap();
    let ns = cp.namespace(&client, "least").await.unwrap();
    let rendered = render(
        &ns,
        &[
            "--show-only",
            "templates/serviceaccount.yaml",
            "--show-only",
            "templates/rbac.yaml",
        ],
    );
    let path = cp.dir().join(format!("rbac-{ns}.yaml"));
    std::fs::write(&path, &rendered).unwrap();
    let (ok, out) = cp
        .kubectl(&["apply", "-n", &ns, "-f", path.to_str().unwrap()])
        .unwrap();
    assert!(ok, "{out}");
    let user = format!("system:serviceaccount:{ns}:terdut-terdut-operator");
    let t = "terdut.ryuvia.com";

    for p in [
        (t, "terdutteams", "patch", Some("x")),
        (t, "terdutteams/status", "patch", Some("x")),
        (t, "terdutalertsources", "get", Some("x")),
        (t, "terdutservers", "watch", None),
        (t, "terdutservers/status", "patch", Some("x")),
        ("apps", "deployments", "patch", Some("x")),
        // A server-side apply of a new object is authorized as create as well.
        ("apps", "deployments", "create", None),
        ("", "services", "create", None),
        ("policy", "poddisruptionbudgets", "create", None),
        ("", "services", "get", Some("x")),
        ("", "secrets", "create", None),
        ("", "secrets", "update", Some("x")),
        ("policy", "poddisruptionbudgets", "delete", Some("x")),
        ("acid.zalan.do", "postgresqls", "get", Some("x")),
        ("postgresql.cnpg.io", "clusters", "get", Some("x")),
        ("events.k8s.io", "events", "patch", Some("x")),
        ("", "namespaces", "list", None),
        ("coordination.k8s.io", "leases", "create", None),
        (
            "coordination.k8s.io",
            "leases",
            "update",
            Some("terdut-operator"),
        ),
        // The leader's own pod-deletion-cost (actors/src/runtime/leader_pod.rs).
        ("", "pods", "patch", Some("x")),
        // The team records and the instance claims, in the release namespace only
        // (team/records.rs, routing/claims.rs; refused elsewhere, below).
        ("", "configmaps", "list", None),
        ("", "configmaps", "create", None),
    ] {
        assert!(
            allowed(&client, &user, &ns, p).await,
            "{p:?} must be allowed"
        );
    }
    for p in [
        (t, "terdutteams", "update", Some("x")),
        (t, "terdutteams", "delete", Some("x")),
        (t, "terdutteams", "create", None),
        (t, "terdutservers", "patch", Some("x")),
        (t, "terdutservers", "update", Some("x")),
        (t, "terdutservers/status", "update", Some("x")),
        (t, "terdutteams/finalizers", "update", Some("x")),
        ("apps", "deployments", "update", Some("x")),
        ("", "services", "update", Some("x")),
        ("", "secrets", "patch", Some("x")),
        ("policy", "poddisruptionbudgets", "update", Some("x")),
        ("acid.zalan.do", "postgresqls", "list", None),
        ("acid.zalan.do", "postgresqls", "watch", None),
        ("postgresql.cnpg.io", "clusters", "list", None),
        ("postgresql.cnpg.io", "clusters", "watch", None),
        ("", "namespaces", "get", Some("x")),
        ("", "configmaps", "update", Some("x")),
        ("", "pods", "create", None),
        ("", "pods", "get", Some("x")),
        ("", "pods", "delete", Some("x")),
        ("coordination.k8s.io", "leases", "list", None),
        (
            "coordination.k8s.io",
            "leases",
            "patch",
            Some("terdut-operator"),
        ),
        (
            "coordination.k8s.io",
            "leases",
            "update",
            Some("another-lease"),
        ),
        (
            "coordination.k8s.io",
            "leases",
            "get",
            Some("another-lease"),
        ),
    ] {
        assert!(
            !allowed(&client, &user, &ns, p).await,
            "{p:?} must be refused"
        );
    }

    // And for real, impersonating the ServiceAccount: a dropped verb is refused with 403.
    let kc = kube::config::Kubeconfig::read_from(cp.kubeconfig()).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    config.auth_info.impersonate = Some(user.clone());
    config.auth_info.impersonate_groups = Some(vec![
        "system:serviceaccounts".into(),
        format!("system:serviceaccounts:{ns}"),
    ]);
    let sa = kube::Client::try_from(config).unwrap();
    // ConfigMaps only in the release namespace: another namespace's are refused.
    assert!(
        !allowed(&client, &user, "default", ("", "configmaps", "list", None)).await,
        "configmaps outside the release namespace must be refused"
    );
    let cms = kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(sa.clone(), "default");
    let refused = cms.list(&Default::default()).await;
    assert!(
        matches!(&refused, Err(kube::Error::Api(e)) if e.code == 403),
        "{refused:?}"
    );
    let deployments = kube::Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(sa, &ns);
    let d: k8s_openapi::api::apps::v1::Deployment = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {"selector": {"matchLabels": {"a": "b"}},
                 "template": {"metadata": {"labels": {"a": "b"}},
                              "spec": {"containers": [{"name": "c", "image": "i"}]}}}
    }))
    .unwrap();
    let applied = deployments
        .patch(
            "x",
            &kube::api::PatchParams::apply("terdut-operator"),
            &kube::api::Patch::Apply(&d),
        )
        .await;
    assert!(
        applied.is_ok(),
        "the operator creates what it owns by server-side apply: {applied:?}"
    );
    assert!(
        deployments.list(&Default::default()).await.is_ok(),
        "list is"
    );
}
