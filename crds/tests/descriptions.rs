//! `kubectl explain` on any field of the three kinds says what it is: every property of every
//! schema carries a description, written for a cluster's users (no pointer into this
//! repository's documents, which they cannot open), and the CRDs stay small enough for a
//! client-side `kubectl apply` (whose last-applied annotation must fit the apiserver's 256 KiB
//! for all annotations together).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};

/// What a description must not cite: a file or section of this repository.
fn cites_the_repository(text: &str) -> bool {
    let re = regex::Regex::new(r"(docs/[a-z0-9./-]*\.md|§|\bADR\b|design\.md|runbook)").unwrap();
    re.is_match(text)
}

fn walk(schema: &JSONSchemaProps, path: &str, problems: &mut Vec<String>) {
    for (name, prop) in schema.properties.iter().flatten() {
        let here = format!("{path}.{name}");
        match prop.description.as_deref().map(str::trim) {
            None | Some("") => problems.push(format!("{here}: no description")),
            Some(d) if cites_the_repository(d) => {
                problems.push(format!("{here}: cites the repository: {d:?}"));
            }
            Some(_) => {}
        }
        walk(prop, &here, problems);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = &schema.items {
        walk(items, &format!("{path}[]"), problems);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(values)) = &schema.additional_properties {
        walk(values, &format!("{path}{{}}"), problems);
    }
}

#[test]
fn every_field_has_a_description_a_cluster_user_can_read() {
    let mut problems = vec![];
    let mut fields = 0;
    for crd in terdut_crds::v1alpha1::crds() {
        let kind = crd.spec.names.kind.clone();
        for v in &crd.spec.versions {
            let schema = v
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .expect("a schema");
            let before = problems.len();
            walk(schema, &kind, &mut problems);
            fields += count(schema);
            assert!(problems.len() >= before);
        }
    }
    assert!(fields > 500, "walked only {fields} fields");
    assert!(
        problems.is_empty(),
        "{} of {fields} fields:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

fn count(schema: &JSONSchemaProps) -> usize {
    let mut n = 0;
    for prop in schema.properties.iter().flat_map(|p| p.values()) {
        n += 1 + count(prop);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = &schema.items {
        n += count(items);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(values)) = &schema.additional_properties {
        n += count(values);
    }
    n
}

#[test]
fn the_check_catches_a_missing_or_citing_description() {
    let schema: JSONSchemaProps = serde_json::from_value(serde_json::json!({
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": "string", "description": "see docs/design.md §4"},
            "c": {"type": "array", "description": "ok", "items": {"type": "object",
                "properties": {"d": {"type": "string", "description": ""}}}}
        }
    }))
    .unwrap();
    let mut problems = vec![];
    walk(&schema, "X", &mut problems);
    assert_eq!(problems.len(), 3, "{problems:?}");
}

#[test]
fn each_crd_fits_a_client_side_apply() {
    for crd in terdut_crds::v1alpha1::crds() {
        let json = serde_json::to_string(&crd).unwrap();
        // kubectl's last-applied-configuration holds the object as JSON; every annotation of
        // an object together may hold 256 KiB. Leave room for the others.
        assert!(
            json.len() < 192 * 1024,
            "{} is {} bytes as JSON",
            crd.metadata.name.unwrap_or_default(),
            json.len()
        );
    }
}
