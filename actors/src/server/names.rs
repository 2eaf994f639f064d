//! Names, labels and ownership of everything the operator creates for a `TerdutServer`.
//!
//! Names are deterministic, derived from the server's own name only: a retry, a restart or a lost
//! cache finds the same objects instead of making new ones (docs/design.md §6, §7). Everything
//! carries a controller owner reference so garbage collection, not a finalizer, cleans up
//! (docs/design.md §7).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;
use terdut_crds::v1alpha1::TerdutServer;

/// The one field manager of every server-side apply the operator makes.
pub const FIELD_MANAGER: &str = "terdut-operator";

/// Suffix of the operator key Secret, `<server>-operator-key` (docs/design.md §6).
pub const KEY_SECRET_SUFFIX: &str = "-operator-key";
/// Data key of the operator key inside its Secret (docs/design.md §6).
pub const KEY_SECRET_DATA_KEY: &str = "token";

/// Name of the one container in the server's pods.
pub const CONTAINER_NAME: &str = "terdut-server";
/// Name of the container port and of the Service port; probes and `targetPort` use it.
pub const PORT_NAME: &str = "http";

/// `app.kubernetes.io/name`: what the workload is.
pub const LABEL_NAME: &str = "app.kubernetes.io/name";
/// `app.kubernetes.io/instance`: which TerdutServer it belongs to.
pub const LABEL_INSTANCE: &str = "app.kubernetes.io/instance";
/// `app.kubernetes.io/managed-by`.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// The TerdutServer an object belongs to, in the operator's own label namespace.
pub const LABEL_SERVER: &str = "terdut.ryuvia.com/server";
/// On every Secret the operator creates, so its informer watches only those Secrets and not
/// every Secret in the cluster (docs/design.md §9 on Secret access).
pub const LABEL_MANAGED: &str = "terdut.ryuvia.com/managed";

/// Value of [`LABEL_NAME`].
pub const APP_NAME: &str = "terdut-server";
/// Label selector for the operator's Secret informer.
pub const MANAGED_SECRET_SELECTOR: &str = "terdut.ryuvia.com/managed=true";

/// The longest TerdutServer name whose children are all valid: the Service takes the server's
/// name and must be a DNS-1035 label, and the name is a label value (both at most 63).
pub const MAX_SERVER_NAME_LEN: usize = 63;

/// `<server>-operator-key` (docs/design.md §6).
pub fn key_secret_name(server: &str) -> String {
    format!("{server}{KEY_SECRET_SUFFIX}")
}

/// The Service has the server's name, so the in-cluster base URL is
/// `http://<server>.<namespace>.svc:<port>` (terdut-api.md "Transport").
pub fn service_name(server: &str) -> String {
    server.to_owned()
}

/// The Deployment has the server's name.
pub fn deployment_name(server: &str) -> String {
    server.to_owned()
}

/// The PodDisruptionBudget has the server's name (a different kind, so no clash).
pub fn pdb_name(server: &str) -> String {
    server.to_owned()
}

/// The labels on every object the operator creates for `server` and on its pods.
pub fn labels(server: &str) -> BTreeMap<String, String> {
    let mut l = selector_labels(server);
    l.insert(LABEL_MANAGED_BY.into(), FIELD_MANAGER.into());
    l.insert(LABEL_SERVER.into(), server.into());
    l
}

/// The stable subset used in selectors. A Deployment's selector is immutable, so this must never
/// change for an existing server: only name and instance, which are fixed by the server's name.
pub fn selector_labels(server: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_NAME.into(), APP_NAME.into()),
        (LABEL_INSTANCE.into(), server.into()),
    ])
}

/// [`labels`] plus [`LABEL_MANAGED`], for Secrets the operator creates.
pub fn secret_labels(server: &str) -> BTreeMap<String, String> {
    let mut l = labels(server);
    l.insert(LABEL_MANAGED.into(), "true".into());
    l
}

/// Refuses a server name its children could not carry. The CRD does not check
/// `metadata.name` itself, so a 64-character or dotted name would otherwise surface only as an
/// apply error on the Service.
pub fn validate_server_name(name: &str) -> Result<(), String> {
    let ok_chars = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let starts = name.bytes().next().is_some_and(|b| b.is_ascii_lowercase());
    let ends = name
        .bytes()
        .last()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if name.len() <= MAX_SERVER_NAME_LEN && ok_chars && starts && ends {
        Ok(())
    } else {
        Err(format!(
            "TerdutServer name {name:?} must be at most {MAX_SERVER_NAME_LEN} characters of \
             lowercase letters, digits and '-', starting with a letter (its Service takes the \
             same name); recreate it under such a name"
        ))
    }
}

/// What every child builder needs about the parent TerdutServer, taken once per pass.
#[derive(Clone, Debug, PartialEq)]
pub struct Parent {
    pub name: String,
    pub namespace: String,
    /// Controller owner reference: GC deletes the child with the server (docs/design.md §7).
    pub owner: OwnerReference,
}

/// A TerdutServer read from a cache always has these; one built by hand may not.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("TerdutServer is missing metadata.{0}")]
pub struct MissingMetadata(pub &'static str);

impl Parent {
    pub fn of(server: &TerdutServer) -> Result<Self, MissingMetadata> {
        let name = server
            .metadata
            .name
            .clone()
            .ok_or(MissingMetadata("name"))?;
        let namespace = server
            .metadata
            .namespace
            .clone()
            .ok_or(MissingMetadata("namespace"))?;
        let mut owner = server
            .controller_owner_ref(&())
            .ok_or(MissingMetadata("uid"))?;
        // Foreground deletion of the server waits for its children.
        owner.block_owner_deletion = Some(true);
        Ok(Self {
            name,
            namespace,
            owner,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use terdut_crds::v1alpha1::TerdutServerSpec;

    /// A minimal server as read from the API (name, namespace, uid, generation); `spec` is
    /// merged over a required image and hostname.
    pub(crate) fn server(spec: serde_json::Value) -> TerdutServer {
        let mut full = serde_json::json!({
            "image": {"tag": "v0.9.3"},
            "networking": {"hostname": "terdut.example.com"},
        });
        if let (Some(base), serde_json::Value::Object(extra)) = (full.as_object_mut(), spec) {
            base.extend(extra);
        }
        let spec: TerdutServerSpec = serde_json::from_value(full).expect("spec parses");
        TerdutServer {
            metadata: ObjectMeta {
                name: Some("terdut".into()),
                namespace: Some("oncall".into()),
                uid: Some("uid-1".into()),
                generation: Some(3),
                ..Default::default()
            },
            spec,
            status: None,
        }
    }

    /// A server with a bring-your-own DSN and nothing else set.
    pub(crate) fn byo_server() -> TerdutServer {
        server(serde_json::json!({"database": {"dsn": "postgres://terdut@db:5432/terdut"}}))
    }

    pub(crate) fn parent() -> Parent {
        Parent::of(&byo_server()).unwrap()
    }

    #[test]
    fn names_follow_the_design() {
        assert_eq!(key_secret_name("terdut"), "terdut-operator-key");
        assert_eq!(service_name("terdut"), "terdut");
        assert_eq!(deployment_name("terdut"), "terdut");
        assert_eq!(pdb_name("terdut"), "terdut");
    }

    #[test]
    fn selector_is_a_stable_subset_of_labels() {
        let all = labels("terdut");
        let sel = selector_labels("terdut");
        assert!(sel.iter().all(|(k, v)| all.get(k) == Some(v)));
        assert_eq!(sel.len(), 2);
        assert_eq!(all[LABEL_MANAGED_BY], "terdut-operator");
        assert_eq!(all[LABEL_SERVER], "terdut");
        assert_eq!(all[LABEL_NAME], "terdut-server");
        assert_eq!(all[LABEL_INSTANCE], "terdut");
    }

    #[test]
    fn secret_labels_match_the_informer_selector() {
        let l = secret_labels("terdut");
        let (k, v) = MANAGED_SECRET_SELECTOR.split_once('=').unwrap();
        assert_eq!(l[k], v);
    }

    #[test]
    fn owner_is_a_blocking_controller_reference() {
        let p = parent();
        assert_eq!(p.owner.kind, "TerdutServer");
        assert_eq!(p.owner.api_version, "terdut.ryuvia.com/v1alpha1");
        assert_eq!(p.owner.uid, "uid-1");
        assert_eq!(p.owner.controller, Some(true));
        assert_eq!(p.owner.block_owner_deletion, Some(true));
    }

    #[test]
    fn parent_needs_uid() {
        let mut s = byo_server();
        s.metadata.uid = None;
        assert_eq!(Parent::of(&s), Err(MissingMetadata("uid")));
    }

    #[test]
    fn server_names_children_can_carry() {
        assert!(validate_server_name("terdut").is_ok());
        assert!(validate_server_name("a1-b").is_ok());
        assert!(validate_server_name(&"a".repeat(63)).is_ok());
        for bad in ["", "1abc", "a.b", "A", "abc-", &"a".repeat(64)] {
            assert!(validate_server_name(bad).is_err(), "{bad:?}");
        }
    }
}
