//! Least privilege, measured (docs/security.md): the verbs and resources the operator's
//! identities used, read from the kube-apiserver audit logs ([`crate::audit`]), against the
//! rules the chart grants. Pure: the `rbac-audit` binary does the reading and rendering.
//!
//! A grant that no request shows is allowed only when [`IMPLIED`] explains it: admission checks
//! of `OwnerReferencesPermissionEnforcement` (enabled in the harness, as on OpenShift) are
//! authorization checks inside a create or patch, not requests of their own.

use std::collections::{BTreeMap, BTreeSet};

/// One permission: API group, resource (with `/subresource`), verb.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Permission {
    pub group: String,
    pub resource: String,
    pub verb: String,
}

impl Permission {
    pub fn new(group: &str, resource: &str, verb: &str) -> Self {
        Self {
            group: group.to_owned(),
            resource: resource.to_owned(),
            verb: verb.to_owned(),
        }
    }
}

impl std::fmt::Display for Permission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(f, "{} {} {}", group, self.resource, self.verb)
    }
}

/// Grants no audited request shows, and why each is needed all the same.
pub const IMPLIED: &[(&str, &str, &str, &str)] = &[
    (
        "",
        "secrets",
        "delete",
        "OwnerReferencesPermissionEnforcement: setting ownerReferences on the key and webhook Secrets",
    ),
    (
        "",
        "services",
        "delete",
        "OwnerReferencesPermissionEnforcement: setting ownerReferences on the Service",
    ),
    (
        "apps",
        "deployments",
        "delete",
        "OwnerReferencesPermissionEnforcement: setting ownerReferences on the Deployment",
    ),
    (
        "terdut.ryuvia.com",
        "terdutservers/finalizers",
        "update",
        "OwnerReferencesPermissionEnforcement: blockOwnerDeletion on objects a TerdutServer owns",
    ),
    (
        "terdut.ryuvia.com",
        "terdutalertsources/finalizers",
        "update",
        "OwnerReferencesPermissionEnforcement: blockOwnerDeletion on a webhook Secret",
    ),
];

/// One request of an audit log, as far as permissions go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub permission: Permission,
    /// The name the request was about (none for list, watch and create).
    pub name: Option<String>,
    pub code: Option<u16>,
}

/// Reads one JSON line of an audit log; `None` for non-resource requests (discovery, healthz)
/// and lines that are not events.
pub fn parse_event(line: &str) -> Option<Request> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    let object = v.get("objectRef")?;
    let resource = object.get("resource")?.as_str()?;
    let resource = match object.get("subresource").and_then(|s| s.as_str()) {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource.to_owned(),
    };
    let group = object
        .get("apiGroup")
        .and_then(|g| g.as_str())
        .unwrap_or_default();
    let code = v
        .pointer("/responseStatus/code")
        .and_then(|c| c.as_u64())
        .and_then(|c| u16::try_from(c).ok());
    let mut verb = v.get("verb")?.as_str()?;
    // A refusal names the verb the authorizer checked, which is not always the request's: a
    // server-side apply of an object that does not exist yet is authorized as create too.
    let message = v
        .pointer("/responseStatus/message")
        .and_then(|m| m.as_str())
        .unwrap_or_default();
    if code == Some(403)
        && let Some(checked) = message
            .split_once(" cannot ")
            .and_then(|(_, rest)| rest.split_once(" resource "))
            .map(|(checked, _)| checked)
    {
        verb = checked;
    }
    Some(Request {
        permission: Permission::new(group, &resource, verb),
        name: object
            .get("name")
            .and_then(|n| n.as_str())
            .map(str::to_owned),
        code,
    })
}

impl Request {
    /// The permissions this request needed: a patch that answered 201 Created was a
    /// server-side apply of a new object, which the API server also authorizes as create.
    pub fn permissions(&self) -> Vec<Permission> {
        let mut out = vec![self.permission.clone()];
        if self.permission.verb == "patch" && self.code == Some(201) {
            out.push(Permission::new(
                &self.permission.group,
                &self.permission.resource,
                "create",
            ));
        }
        out
    }
}

/// A rule of a Role or ClusterRole, expanded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    pub permission: Permission,
    /// `resourceNames`, when the rule has them.
    pub names: Option<BTreeSet<String>>,
}

/// Expands the `rules` of a rendered Role or ClusterRole.
pub fn grants(rules: &serde_json::Value) -> Vec<Grant> {
    let strings = |v: &serde_json::Value, key: &str| -> Vec<String> {
        v.get(key)
            .and_then(|x| x.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out = vec![];
    for rule in rules.as_array().into_iter().flatten() {
        let names = rule
            .get("resourceNames")
            .map(|_| strings(rule, "resourceNames").into_iter().collect());
        for group in strings(rule, "apiGroups") {
            for resource in strings(rule, "resources") {
                for verb in strings(rule, "verbs") {
                    out.push(Grant {
                        permission: Permission::new(&group, &resource, &verb),
                        names: names.clone(),
                    });
                }
            }
        }
    }
    out
}

/// What the comparison found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Every permission used, with how many requests.
    pub used: BTreeMap<Permission, u64>,
    /// Used (and not refused) but granted by no rule: the chart would break the operator.
    pub missing: BTreeSet<Permission>,
    /// Requests the API server refused with 403 that no rule grants (refusals of a granted
    /// permission happen while a restarted kube-apiserver's authorizer catches up, e.g. in
    /// `just chaos`; they are counted in `transient`).
    pub refused: BTreeSet<Permission>,
    /// Refused, but granted: the authorizer was not ready yet.
    pub transient: BTreeSet<Permission>,
    /// Granted, never used, and not explained by [`IMPLIED`]: wider than needed.
    pub unused: BTreeSet<Permission>,
    /// A rule with `resourceNames` that a request outside those names used.
    pub outside_names: BTreeSet<(Permission, String)>,
}

impl Verdict {
    pub fn is_exact(&self) -> bool {
        self.missing.is_empty()
            && self.refused.is_empty()
            && self.unused.is_empty()
            && self.outside_names.is_empty()
    }
}

/// Compares the requests with the grants.
pub fn compare(requests: &[Request], grants: &[Grant]) -> Verdict {
    let mut v = Verdict::default();
    let needed = requests.iter().flat_map(|r| {
        r.permissions().into_iter().map(|permission| Request {
            permission,
            ..r.clone()
        })
    });
    for r in needed {
        let r = &r;
        *v.used.entry(r.permission.clone()).or_default() += 1;
        let matching: Vec<&Grant> = grants
            .iter()
            .filter(|g| g.permission == r.permission)
            .collect();
        if r.code == Some(403) {
            if matching.is_empty() {
                v.refused.insert(r.permission.clone());
            } else {
                v.transient.insert(r.permission.clone());
            }
            continue;
        }
        if matching.is_empty() {
            v.missing.insert(r.permission.clone());
        } else if matching.iter().all(|g| {
            g.names
                .as_ref()
                .is_some_and(|n| r.name.as_ref().is_none_or(|name| !n.contains(name)))
        }) {
            v.outside_names.insert((
                r.permission.clone(),
                r.name.clone().unwrap_or_else(|| "(no name)".into()),
            ));
        }
    }
    let implied: BTreeSet<Permission> = IMPLIED
        .iter()
        .map(|(g, r, verb, _)| Permission::new(g, r, verb))
        .collect();
    for g in grants {
        if !v.used.contains_key(&g.permission) && !implied.contains(&g.permission) {
            v.unused.insert(g.permission.clone());
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(group: &str, resource: &str, verb: &str, name: Option<&str>) -> Request {
        Request {
            permission: Permission::new(group, resource, verb),
            name: name.map(str::to_owned),
            code: Some(200),
        }
    }

    #[test]
    fn audit_lines_become_requests_and_non_resource_ones_are_skipped() {
        let line = json!({"kind": "Event", "verb": "patch", "responseStatus": {"code": 200},
            "objectRef": {"resource": "terdutteams", "subresource": "status",
                          "apiGroup": "terdut.ryuvia.com", "namespace": "a", "name": "t"}});
        assert_eq!(
            parse_event(&line.to_string()),
            Some(request(
                "terdut.ryuvia.com",
                "terdutteams/status",
                "patch",
                Some("t")
            ))
        );
        let core =
            json!({"verb": "list", "objectRef": {"resource": "secrets", "apiVersion": "v1"}});
        assert_eq!(
            parse_event(&core.to_string()).unwrap().permission,
            Permission::new("", "secrets", "list")
        );
        let discovery = json!({"verb": "get", "requestURI": "/apis/acid.zalan.do/v1"});
        assert_eq!(parse_event(&discovery.to_string()), None);
        assert_eq!(parse_event("not json"), None);
    }

    #[test]
    fn an_apply_that_creates_needs_create_and_its_refusal_names_create() {
        let created = json!({"verb": "patch", "responseStatus": {"code": 201},
            "objectRef": {"resource": "deployments", "apiGroup": "apps", "name": "d"}});
        let r = parse_event(&created.to_string()).unwrap();
        assert_eq!(
            r.permissions(),
            vec![
                Permission::new("apps", "deployments", "patch"),
                Permission::new("apps", "deployments", "create")
            ]
        );
        let only_patch = grants(&json!([
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["patch"]}
        ]));
        assert_eq!(
            compare(&[r], &only_patch).missing,
            BTreeSet::from([Permission::new("apps", "deployments", "create")])
        );

        let refused = json!({"verb": "patch", "responseStatus": {"code": 403, "message":
            "deployments.apps \"d\" is forbidden: User \"u\" cannot create resource \"deployments\" in API group \"apps\" in the namespace \"n\""},
            "objectRef": {"resource": "deployments", "apiGroup": "apps", "name": "d"}});
        let r = parse_event(&refused.to_string()).unwrap();
        assert_eq!(
            r.permission,
            Permission::new("apps", "deployments", "create")
        );
        // Not mistaken for a granted patch the authorizer was slow to allow.
        assert_eq!(
            compare(&[r], &only_patch).refused,
            BTreeSet::from([Permission::new("apps", "deployments", "create")])
        );
    }

    #[test]
    fn exact_grants_pass_and_every_kind_of_difference_is_named() {
        let rules = json!([
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "create", "delete"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
             "resourceNames": ["terdut-operator"], "verbs": ["get", "update"]},
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["update"]},
        ]);
        let g = grants(&rules);
        assert_eq!(g.len(), 6);
        let ok = [
            request("", "secrets", "get", Some("k")),
            request("", "secrets", "create", None),
            request(
                "coordination.k8s.io",
                "leases",
                "get",
                Some("terdut-operator"),
            ),
            request(
                "coordination.k8s.io",
                "leases",
                "update",
                Some("terdut-operator"),
            ),
        ];
        let v = compare(&ok, &g);
        assert_eq!(
            v.unused,
            BTreeSet::from([Permission::new("apps", "deployments", "update")])
        );
        assert!(v.missing.is_empty() && v.outside_names.is_empty());
        // secrets delete is implied (OwnerReferencesPermissionEnforcement), never unused.
        assert!(!v.unused.contains(&Permission::new("", "secrets", "delete")));

        let mut bad = ok.to_vec();
        bad.push(request("", "configmaps", "list", None));
        bad.push(request(
            "coordination.k8s.io",
            "leases",
            "get",
            Some("other"),
        ));
        bad.push(Request {
            code: Some(403),
            ..request("", "namespaces", "get", Some("x"))
        });
        // Refused though granted: a restarting authorizer, not a finding.
        bad.push(Request {
            code: Some(403),
            ..request("", "secrets", "get", Some("k"))
        });
        let v = compare(&bad, &g);
        assert!(!v.is_exact());
        assert_eq!(
            v.missing,
            BTreeSet::from([Permission::new("", "configmaps", "list")])
        );
        assert_eq!(
            v.refused,
            BTreeSet::from([Permission::new("", "namespaces", "get")])
        );
        assert_eq!(v.outside_names.len(), 1);
        assert_eq!(
            v.transient,
            BTreeSet::from([Permission::new("", "secrets", "get")])
        );
        assert_eq!(v.used[&Permission::new("", "secrets", "get")], 2);
    }
}
