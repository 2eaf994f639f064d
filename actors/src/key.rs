//! The identity of one Kubernetes object inside the actor system.
//!
//! Every per-object actor is keyed by namespace and name: the supervisor's child map, the
//! coalescing flags and log fields all use [`ObjectKey`], so it is cheap to clone, totally
//! ordered (snapshots list children deterministically) and prints the way `kubectl` does.

use std::fmt;

/// `namespace/name` of a namespaced object (all three CRDs are namespaced).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    /// The object's namespace.
    pub namespace: String,
    /// The object's name.
    pub name: String,
}

impl ObjectKey {
    /// A key from its two parts.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
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
}
