//! What docs/installation.md and docs/upgrade.md say about the CRDs, against a real
//! kube-apiserver: a client-side `kubectl apply -f chart/terdut-operator/crds/` works (the
//! TerdutServer CRD fits the last-applied annotation), and `kubectl explain` shows a
//! description for every field, read from the OpenAPI document the apiserver publishes for the
//! group, which is what kubectl explain reads.

use std::path::Path;

use terdut_testenv::ControlPlane;

fn walk(schema: &serde_json::Value, path: &str, doc: &serde_json::Value, out: &mut Vec<String>) {
    let schema = resolve(schema, doc);
    if let Some(props) = schema.get("properties").and_then(|p| p.as_object()) {
        for (name, prop) in props {
            let here = format!("{path}.{name}");
            let resolved = resolve(prop, doc);
            let described = [prop, resolved].iter().any(|p| {
                p.get("description")
                    .and_then(|d| d.as_str())
                    .is_some_and(|d| !d.trim().is_empty())
            });
            if !described {
                out.push(here.clone());
            }
            walk(prop, &here, doc, out);
        }
    }
    if let Some(items) = schema.get("items") {
        walk(items, &format!("{path}[]"), doc, out);
    }
    if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
        walk(values, &format!("{path}{{}}"), doc, out);
    }
}

/// A `$ref` (possibly under `allOf`) resolved within the OpenAPI document.
fn resolve<'a>(schema: &'a serde_json::Value, doc: &'a serde_json::Value) -> &'a serde_json::Value {
    let reference = schema.get("$ref").or_else(|| {
        schema
            .get("allOf")
            .and_then(|a| a.get(0))
            .and_then(|a| a.get("$ref"))
    });
    match reference.and_then(|r| r.as_str()) {
        Some(r) => r
            .strip_prefix("#/")
            .map(|p| {
                p.split('/').fold(doc, |v, part| {
                    v.get(part).unwrap_or(&serde_json::Value::Null)
                })
            })
            .unwrap_or(schema),
        None => schema,
    }
}

#[tokio::test]
async fn client_side_apply_and_kubectl_explain_work_on_every_field() {
    let cp = ControlPlane::shared().await.unwrap();
    let crds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../chart/terdut-operator/crds");
    let (ok, out) = cp
        .kubectl(&["apply", "-f", crds.to_str().unwrap()])
        .unwrap();
    assert!(ok, "client-side apply of the CRDs failed: {out}");
    let (ok, out) = cp
        .kubectl(&[
            "get",
            "crd",
            "terdutservers.terdut.ryuvia.com",
            "-o",
            "jsonpath={.metadata.annotations.kubectl\\.kubernetes\\.io/last-applied-configuration}",
        ])
        .unwrap();
    assert!(
        ok && out.len() > 50_000,
        "no last-applied annotation: {}",
        out.len()
    );

    // Established, then published: kubectl explain reads discovery and the OpenAPI document,
    // which trail a CRD's update by a moment (more on a loaded machine).
    let (ok, out) = cp
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/terdutservers.terdut.ryuvia.com",
        ])
        .unwrap();
    assert!(ok, "{out}");
    let explain = |path: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let (ok, out) = cp.kubectl(&["explain", path]).unwrap();
            if ok || std::time::Instant::now() > deadline {
                return (ok, out);
            }
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
    };
    let (ok, out) = explain("terdutservers.spec.database.cnpgClusterRef.name");
    // kubectl explain wraps its text: compare with the whitespace collapsed.
    let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        ok && flat(&out).contains("`<name>-rw` is still a Service name"),
        "{out}"
    );
    let (ok, out) = explain("terdutservers.spec.pod.affinity.nodeAffinity");
    assert!(
        ok && flat(&out).contains("Describes node affinity scheduling rules"),
        "{out}"
    );

    let (ok, text) = cp
        .kubectl(&[
            "get",
            "--raw",
            "/openapi/v3/apis/terdut.ryuvia.com/v1alpha1",
        ])
        .unwrap();
    assert!(ok, "{text}");
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    let mut missing = vec![];
    let mut kinds = 0;
    for (name, schema) in schemas {
        if let Some(kind) = name.strip_prefix("com.ryuvia.terdut.v1alpha1.") {
            kinds += 1;
            for part in ["spec", "status"] {
                if let Some(s) = schema["properties"].get(part) {
                    walk(s, &format!("{kind}.{part}"), &doc, &mut missing);
                }
            }
        }
    }
    assert!(
        kinds >= 3,
        "the group's kinds not found in {:?}",
        schemas.keys().take(10).collect::<Vec<_>>()
    );
    assert!(
        missing.is_empty(),
        "fields kubectl explain shows without a description:\n{}",
        missing.join("\n")
    );
}
