//! The identity of one Kubernetes object inside the actor system.
//!
//! Every per-object actor is keyed by namespace and name: the supervisor's child map, the
//! coalescing flags and log fields all use [`ObjectKey`], so it is cheap to clone, totally
//! ordered (snapshots list children deterministically) and prints the way `kubectl` does.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// `namespace/name` of a namespaced object (all three CRDs are namespaced).
///
/// One allocation shared by every clone: the same key sits in the supervisor's table, its
/// timer wheel and the routing index (twice per team: its entry and its server's fan-out), and
/// at 10,000 idle teams two owned strings per copy were ~400 bytes per
/// team (docs/performance.md run 18). Reads go through [`KeyParts`] (`key.namespace`).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey(Arc<KeyParts>);

/// The two parts of an [`ObjectKey`]; ordered by namespace first.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KeyParts {
    /// The object's namespace.
    pub namespace: String,
    /// The object's name.
    pub name: String,
}

impl Deref for ObjectKey {
    type Target = KeyParts;

    fn deref(&self) -> &KeyParts {
        &self.0
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectKey")
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .finish()
    }
}

impl ObjectKey {
    /// A key from its two parts.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self(Arc::new(KeyParts {
            namespace: namespace.into(),
            name: name.into(),
        }))
    }

    /// Whether `other` is a clone of this key (the same allocation), not only equal to it.
    pub fn shares_allocation(&self, other: &ObjectKey) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The key of a watched object. A cluster-scoped object gets an empty namespace, which
    /// cannot collide with a namespaced one because Kubernetes namespaces are never empty.
    pub fn of<K: kube::ResourceExt>(obj: &K) -> Self {
        Self::new(obj.namespace().unwrap_or_default(), obj.name_any())
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The key of the server a team's `serverRef` names.
pub fn team_server_key(team: &terdut_crds::v1alpha1::TerdutTeam) -> ObjectKey {
    let team_ns = team.metadata.namespace.clone().unwrap_or_default();
    ObjectKey::new(
        team.spec.server_ref.namespace.clone().unwrap_or(team_ns),
        team.spec.server_ref.name.clone(),
    )
}

#[cfg(test)]
mod tests {
    use super::ObjectKey;

    #[test]
    fn displays_like_kubectl_and_orders_by_namespace_first() {
        let a = ObjectKey::new("a", "z");
        let b = ObjectKey::new("b", "a");
        assert_eq!(a.to_string(), "a/z");
        assert!(a < b);
    }

    #[test]
    fn clones_share_one_allocation_and_compare_by_value() {
        let a = ObjectKey::new("ns", "t");
        let b = a.clone();
        assert!(a.shares_allocation(&b));
        let equal = ObjectKey::new("ns", "t");
        assert_eq!(a, equal, "equal parts are equal keys");
        assert!(!a.shares_allocation(&equal));
        assert_eq!(
            format!("{a:?}"),
            r#"ObjectKey { namespace: "ns", name: "t" }"#
        );
    }
}
