//! The v1alpha1 → v1beta1 plan of docs/adr/0015-api-version-plan.md, step by step against a real
//! kube-apiserver, on a copy of the CRDs with a second version (same schema, conversion
//! `None`): objects made at v1alpha1; the CRDs serve both with v1beta1 stored; the storage
//! migration (every object read and written back, `kubectl get -o json | kubectl replace`);
//! `status.storedVersions` trimmed; v1alpha1 removed; every object still reads, spec intact.
//! The migration is shown to be needed: a kind whose objects are not rewritten before its
//! storedVersions are trimmed cannot be read once v1alpha1 is gone.

use std::path::Path;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use terdut_testenv::ControlPlane;

fn kubectl(cp: &ControlPlane, args: &[&str]) -> String {
    let (ok, out) = cp.kubectl(args).unwrap();
    assert!(ok, "kubectl {args:?}: {out}");
    out
}

fn write(cp: &ControlPlane, name: &str, text: &str) -> String {
    let path = cp.dir().join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

/// The CRD of `plural` with the versions `(name, served, storage)`, each with v1alpha1's schema.
fn with_versions(plural: &str, versions: &[(&str, bool, bool)]) -> CustomResourceDefinition {
    let mut crd = terdut_crds::v1alpha1::crds()
        .into_iter()
        .find(|c| c.spec.names.plural == plural)
        .unwrap();
    let base = crd.spec.versions[0].clone();
    crd.spec.versions = versions
        .iter()
        .map(|(name, served, storage)| {
            let mut v = base.clone();
            v.name = (*name).to_owned();
            v.served = *served;
            v.storage = *storage;
            v
        })
        .collect();
    crd
}

fn apply_crd(cp: &ControlPlane, crd: &CustomResourceDefinition) {
    let name = crd.metadata.name.clone().unwrap();
    let file = write(
        cp,
        &format!("{name}.json"),
        &serde_json::to_string(crd).unwrap(),
    );
    kubectl(
        cp,
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=migration-test",
            "-f",
            &file,
        ],
    );
    kubectl(
        cp,
        &[
            "wait",
            "--for=condition=Established",
            &format!("crd/{name}"),
            "--timeout=60s",
        ],
    );
}

fn stored_versions(cp: &ControlPlane, crd: &str) -> String {
    kubectl(
        cp,
        &["get", "crd", crd, "-o", "jsonpath={.status.storedVersions}"],
    )
}

/// `kubectl get <resource> -A -o json | kubectl replace -f -`: every object written back, so
/// the apiserver stores it at the storage version.
fn migrate(cp: &ControlPlane, resource: &str) {
    let list = kubectl(cp, &["get", resource, "-A", "-o", "json"]);
    let file = write(cp, &format!("{resource}-list.json"), &list);
    let out = kubectl(cp, &["replace", "-f", &file]);
    assert!(out.contains("replaced"), "{out}");
}

fn trim(cp: &ControlPlane, crd: &str) {
    kubectl(
        cp,
        &[
            "patch",
            "crd",
            crd,
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"storedVersions":["v1beta1"]}}"#,
        ],
    );
}

#[tokio::test]
async fn v1alpha1_objects_survive_the_move_to_v1beta1() {
    let cp = ControlPlane::shared().await.unwrap();
    let client = cp.client().await.unwrap();
    let ns = cp.namespace(&client, "migrate").await.unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/examples");
    for file in ["20-terdutteams.yaml", "30-terdutalertsources.yaml"] {
        // The examples' first object of each kind, in this test's namespace.
        let text = std::fs::read_to_string(examples.join(file)).unwrap();
        let first = text
            .split("\n---")
            .next()
            .unwrap()
            .replace("namespace: platform-oncall", &format!("namespace: {ns}"));
        let path = write(cp, file, &first);
        kubectl(cp, &["apply", "-n", &ns, "-f", &path]);
    }
    let team_before = kubectl(
        cp,
        &[
            "get",
            "terdutteam",
            "platform",
            "-n",
            &ns,
            "-o",
            "jsonpath={.spec}",
        ],
    );

    // 1. Both served, v1beta1 stored.
    for plural in ["terdutteams", "terdutalertsources"] {
        apply_crd(
            cp,
            &with_versions(
                plural,
                &[("v1alpha1", true, false), ("v1beta1", true, true)],
            ),
        );
    }
    let teams = "terdutteams.terdut.ryuvia.com";
    let sources = "terdutalertsources.terdut.ryuvia.com";
    assert_eq!(stored_versions(cp, teams), r#"["v1alpha1","v1beta1"]"#);
    let at_beta = kubectl(
        cp,
        &[
            "get",
            "terdutteams.v1beta1.terdut.ryuvia.com",
            "platform",
            "-n",
            &ns,
            "-o",
            "jsonpath={.apiVersion} {.spec}",
        ],
    );
    assert_eq!(at_beta, format!("terdut.ryuvia.com/v1beta1 {team_before}"));

    // 2. Teams: migrated, then trimmed. Sources: trimmed without the migration (the mistake).
    migrate(cp, teams);
    trim(cp, teams);
    trim(cp, sources);
    assert_eq!(stored_versions(cp, teams), r#"["v1beta1"]"#);

    // 3. v1alpha1 no longer served nor known.
    for plural in ["terdutteams", "terdutalertsources"] {
        apply_crd(cp, &with_versions(plural, &[("v1beta1", true, true)]));
    }
    let after = kubectl(
        cp,
        &[
            "get",
            "terdutteams.v1beta1.terdut.ryuvia.com",
            "platform",
            "-n",
            &ns,
            "-o",
            "jsonpath={.apiVersion} {.spec}",
        ],
    );
    assert_eq!(after, format!("terdut.ryuvia.com/v1beta1 {team_before}"));
    // The source, still stored as v1alpha1, cannot be read any more.
    let (ok, out) = cp
        .kubectl(&[
            "get",
            "terdutalertsources.v1beta1.terdut.ryuvia.com",
            "prod-alertmanager",
            "-n",
            &ns,
        ])
        .unwrap();
    assert!(
        !ok && out.contains("v1alpha1"),
        "an object never migrated was read after its version was removed: {out}"
    );
}
