//! The terdut-server pods and the `restricted` Pod Security level (docs/design.md §4.1 `spec.pod`).
//!
//! Two pure jobs:
//! - [`merge`]: a user's `securityContext` / `containerSecurityContext` is laid over the
//!   restricted defaults field by field (nested objects too, so `capabilities.add` keeps the
//!   default `drop: [ALL]`). Setting one field, such as `runAsUser`, no longer drops every
//!   other default (seccomp, runAsNonRoot).
//! - [`violations`]: what in the built pod spec breaks the restricted level, named by the spec
//!   field the user wrote, for the `PodSecurity` condition and a Warning. The operator still
//!   applies the Deployment (a namespace may enforce only baseline); where restricted is
//!   enforced, the pods are refused and `ReplicaFailure` follows.

use k8s_openapi::api::core::v1::{PodSecurityContext, PodSpec, SecurityContext};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// `defaults` with every field `user` sets laid over it (objects merged key by key, anything
/// else replaced). `None` for `user` is the defaults.
pub fn merge<T: Serialize + DeserializeOwned + Clone>(defaults: T, user: Option<&T>) -> T {
    let Some(user) = user else {
        return defaults;
    };
    match (serde_json::to_value(&defaults), serde_json::to_value(user)) {
        (Ok(mut base), Ok(over)) => {
            merge_values(&mut base, over);
            serde_json::from_value(base).unwrap_or(defaults)
        }
        _ => defaults,
    }
}

fn merge_values(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                if v.is_null() {
                    continue;
                }
                match b.get_mut(&k) {
                    Some(existing) => merge_values(existing, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, o) => *b = o,
    }
}

/// The volume types the restricted level admits.
const ALLOWED_VOLUMES: [&str; 8] = [
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

/// Sysctls the baseline (and so restricted) level admits.
const SAFE_SYSCTLS: [&str; 10] = [
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];

/// Everything in `pod` that breaks the restricted level, each naming the spec field and what
/// the level asks for. Empty: the pods pass.
pub fn violations(pod: &PodSpec) -> Vec<String> {
    let mut out = vec![];
    let psc = pod.security_context.clone().unwrap_or_default();
    check_pod(&psc, &mut out);
    for c in &pod.containers {
        check_container(&psc, c.security_context.as_ref(), &mut out);
    }
    for (i, v) in pod.volumes.iter().flatten().enumerate() {
        let json = serde_json::to_value(v).unwrap_or_default();
        let types: Vec<String> = json
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k.clone())
            .filter(|k| k != "name")
            .collect();
        for t in types {
            if !ALLOWED_VOLUMES.contains(&t.as_str()) {
                out.push(format!(
                    "spec.pod.extraVolumes[{i}] ({}) is a {t} volume; restricted admits only {}",
                    v.name,
                    ALLOWED_VOLUMES.join(", ")
                ));
            }
        }
    }
    out
}

fn check_pod(psc: &PodSecurityContext, out: &mut Vec<String>) {
    let field = "spec.pod.securityContext";
    if psc.run_as_user == Some(0) {
        out.push(format!(
            "{field}.runAsUser is 0 (root); restricted needs a non-root user"
        ));
    }
    if psc.run_as_non_root == Some(false) {
        out.push(format!(
            "{field}.runAsNonRoot is false; restricted needs true"
        ));
    }
    if let Some(p) = &psc.seccomp_profile
        && !matches!(p.type_.as_str(), "RuntimeDefault" | "Localhost")
    {
        out.push(format!(
            "{field}.seccompProfile.type is {}; restricted needs RuntimeDefault or Localhost",
            p.type_
        ));
    }
    for s in psc.sysctls.iter().flatten() {
        if !SAFE_SYSCTLS.contains(&s.name.as_str()) {
            out.push(format!(
                "{field}.sysctls sets {}, which is not one of the safe sysctls",
                s.name
            ));
        }
    }
    if psc
        .windows_options
        .as_ref()
        .and_then(|w| w.host_process)
        .unwrap_or(false)
    {
        out.push(format!("{field}.windowsOptions.hostProcess is true"));
    }
}

fn check_container(psc: &PodSecurityContext, c: Option<&SecurityContext>, out: &mut Vec<String>) {
    let field = "spec.pod.containerSecurityContext";
    let c = c.cloned().unwrap_or_default();
    if c.privileged == Some(true) {
        out.push(format!(
            "{field}.privileged is true; restricted forbids privileged containers"
        ));
    }
    if c.allow_privilege_escalation != Some(false) {
        out.push(format!(
            "{field}.allowPrivilegeEscalation is not false; restricted needs false"
        ));
    }
    let caps = c.capabilities.clone().unwrap_or_default();
    if !caps.drop.iter().flatten().any(|d| d == "ALL") {
        out.push(format!(
            "{field}.capabilities.drop does not drop ALL; restricted needs it"
        ));
    }
    for add in caps.add.iter().flatten() {
        if add != "NET_BIND_SERVICE" {
            out.push(format!(
                "{field}.capabilities.add adds {add}; restricted admits only NET_BIND_SERVICE"
            ));
        }
    }
    if c.run_as_user == Some(0) {
        out.push(format!(
            "{field}.runAsUser is 0 (root); restricted needs a non-root user"
        ));
    }
    let non_root = c.run_as_non_root.or(psc.run_as_non_root);
    if non_root != Some(true) {
        out.push(format!(
            "{field}.runAsNonRoot (or spec.pod.securityContext.runAsNonRoot) is not true; \
             restricted needs true"
        ));
    }
    let seccomp = c
        .seccomp_profile
        .as_ref()
        .or(psc.seccomp_profile.as_ref())
        .map(|p| p.type_.as_str());
    if !matches!(seccomp, Some("RuntimeDefault" | "Localhost")) {
        out.push(format!(
            "{field}.seccompProfile (or the pod's) is {}; restricted needs RuntimeDefault or \
             Localhost",
            seccomp.unwrap_or("unset")
        ));
    }
    if c.proc_mount.as_deref().is_some_and(|m| m != "Default") {
        out.push(format!("{field}.procMount is not Default"));
    }
    if c.windows_options
        .as_ref()
        .and_then(|w| w.host_process)
        .unwrap_or(false)
    {
        out.push(format!("{field}.windowsOptions.hostProcess is true"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::deployment::{restricted_container_context, restricted_pod_context};
    use k8s_openapi::api::core::v1::{Capabilities, Container, Volume};
    use serde_json::json;

    fn pod(psc: PodSecurityContext, sc: SecurityContext, volumes: Vec<Volume>) -> PodSpec {
        PodSpec {
            containers: vec![Container {
                name: "terdut-server".into(),
                security_context: Some(sc),
                ..Default::default()
            }],
            security_context: Some(psc),
            volumes: (!volumes.is_empty()).then_some(volumes),
            ..Default::default()
        }
    }

    #[test]
    fn one_user_field_keeps_every_other_default() {
        let user: PodSecurityContext = serde_json::from_value(json!({"runAsUser": 1000})).unwrap();
        let merged = merge(restricted_pod_context(), Some(&user));
        assert_eq!(merged.run_as_user, Some(1000));
        assert_eq!(merged.run_as_non_root, Some(true));
        assert_eq!(
            merged.seccomp_profile.unwrap().type_,
            "RuntimeDefault",
            "seccomp kept"
        );
        let user: SecurityContext =
            serde_json::from_value(json!({"capabilities": {"add": ["NET_BIND_SERVICE"]}})).unwrap();
        let merged = merge(restricted_container_context(), Some(&user));
        let caps = merged.capabilities.clone().unwrap();
        assert_eq!(caps.drop, Some(vec!["ALL".to_owned()]));
        assert_eq!(caps.add, Some(vec!["NET_BIND_SERVICE".to_owned()]));
        assert_eq!(merged.read_only_root_filesystem, Some(true));
        assert!(violations(&pod(restricted_pod_context(), merged, vec![])).is_empty());
        assert_eq!(
            merge(restricted_pod_context(), None),
            restricted_pod_context()
        );
    }

    #[test]
    fn the_defaults_pass() {
        assert!(
            violations(&pod(
                restricted_pod_context(),
                restricted_container_context(),
                vec![]
            ))
            .is_empty()
        );
    }

    #[test]
    fn each_breach_is_named_by_the_field_the_user_wrote() {
        let sc = merge(
            restricted_container_context(),
            Some(&SecurityContext {
                privileged: Some(true),
                allow_privilege_escalation: Some(true),
                run_as_user: Some(0),
                capabilities: Some(Capabilities {
                    add: Some(vec!["SYS_ADMIN".into()]),
                    drop: Some(vec![]),
                }),
                ..Default::default()
            }),
        );
        let psc = merge(
            restricted_pod_context(),
            Some(
                &serde_json::from_value(
                    json!({"runAsNonRoot": false, "seccompProfile": {"type": "Unconfined"}}),
                )
                .unwrap(),
            ),
        );
        let host: Volume =
            serde_json::from_value(json!({"name": "host", "hostPath": {"path": "/"}})).unwrap();
        let ok: Volume = serde_json::from_value(json!({"name": "tmp", "emptyDir": {}})).unwrap();
        let v = violations(&pod(psc, sc, vec![ok, host]));
        let text = v.join("\n");
        for needle in [
            "containerSecurityContext.privileged is true",
            "allowPrivilegeEscalation is not false",
            "capabilities.add adds SYS_ADMIN",
            "capabilities.drop does not drop ALL",
            "containerSecurityContext.runAsUser is 0",
            "securityContext.runAsNonRoot is false",
            "seccompProfile.type is Unconfined",
            "extraVolumes[1] (host) is a hostPath volume",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in\n{text}");
        }
        assert!(!text.contains("extraVolumes[0]"), "{text}");
    }
}
