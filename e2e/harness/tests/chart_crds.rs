//! The documented CRD upgrade path through Helm (docs/installation.md, "Upgrading the CRDs"),
//! against a real kube-apiserver: CRDs that exist outside any release (as after an install from
//! the chart's crds/ folder, or `kubectl apply`) are handed to the release, `helm install` and
//! `helm upgrade` with `crds.templated=true --skip-crds` own them, and `helm uninstall` leaves
//! them, with the objects in them, in place (`helm.sh/resource-policy: keep`).

use std::process::Command;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use terdut_testenv::{ControlPlane, tool};

const CRDS: [&str; 3] = [
    "terdutservers.terdut.ryuvia.com",
    "terdutteams.terdut.ryuvia.com",
    "terdutalertsources.terdut.ryuvia.com",
];

fn helm(cp: &ControlPlane, args: &[&str]) -> String {
    let chart =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../chart/terdut-operator");
    let out = Command::new(tool("helm").unwrap())
        .arg("--kubeconfig")
        .arg(cp.kubeconfig())
        .args(
            args.iter()
                .map(|a| a.replace("CHART", chart.to_str().unwrap())),
        )
        .output()
        .expect("helm runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "helm {args:?} failed: {text}");
    text
}

#[tokio::test]
async fn templated_crds_are_adopted_upgraded_and_kept() {
    let cp = ControlPlane::shared().await.unwrap();
    let client = cp.client().await.unwrap();
    let ns = cp.namespace(&client, "crds").await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());

    // The CRDs the harness installed belong to no release: hand them to this one.
    for c in CRDS {
        let (ok, out) = cp
            .kubectl(&[
                "annotate",
                "crd",
                c,
                "--overwrite",
                "meta.helm.sh/release-name=terdut-operator",
                &format!("meta.helm.sh/release-namespace={ns}"),
            ])
            .unwrap();
        assert!(ok, "{out}");
        let (ok, out) = cp
            .kubectl(&[
                "label",
                "crd",
                c,
                "--overwrite",
                "app.kubernetes.io/managed-by=Helm",
            ])
            .unwrap();
        assert!(ok, "{out}");
    }
    let base = ["-n", &ns, "--skip-crds", "--set", "crds.templated=true"];
    helm(
        cp,
        &[&["install", "terdut-operator", "CHART"][..], &base[..]].concat(),
    );
    for c in CRDS {
        let crd = crds.get(c).await.unwrap();
        let a = crd.metadata.annotations.unwrap_or_default();
        assert_eq!(
            a.get("helm.sh/resource-policy").map(String::as_str),
            Some("keep"),
            "{c}"
        );
        let labels = crd.metadata.labels.unwrap_or_default();
        assert_eq!(
            labels.get("helm.sh/chart").map(String::as_str),
            Some("terdut-operator-0.1.0"),
            "{c}"
        );
    }

    // An upgrade writes the CRDs as part of the release: a label of the release lands on them.
    helm(
        cp,
        &[
            &["upgrade", "terdut-operator", "CHART"][..],
            &base[..],
            &["--set", "commonLabels.crd-upgrade=yes"][..],
        ]
        .concat(),
    );
    for c in CRDS {
        let labels = crds
            .get(c)
            .await
            .unwrap()
            .metadata
            .labels
            .unwrap_or_default();
        assert_eq!(
            labels.get("crd-upgrade").map(String::as_str),
            Some("yes"),
            "{c}"
        );
    }

    // An object in them survives the uninstall, and so do the CRDs.
    let server = serde_json::json!({
        "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutServer",
        "metadata": {"name": "kept", "namespace": ns},
        "spec": {"image": {"tag": "v0.9.3"}, "networking": {"hostname": "t.example.com"},
                 "database": {"dsn": "postgres://t@db:5432/t"}},
    });
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("terdut.ryuvia.com", "v1alpha1", "TerdutServer"),
            "terdutservers",
        ),
    );
    api.create(
        &Default::default(),
        &serde_json::from_value(server).unwrap(),
    )
    .await
    .unwrap();
    let out = helm(cp, &["uninstall", "terdut-operator", "-n", &ns]);
    assert!(out.contains("kept due to the resource policy"), "{out}");
    for c in CRDS {
        assert!(crds.get_opt(c).await.unwrap().is_some(), "{c} kept");
    }
    assert!(
        api.get_opt("kept").await.unwrap().is_some(),
        "the TerdutServer survives"
    );
}
