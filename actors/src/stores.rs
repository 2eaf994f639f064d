//! One informer cache per watched namespace, read as one.
//!
//! With `--watch-namespaces` the operator may hold only namespaced Roles (docs/design.md §9, the
//! per-namespace split deferred in §13), so every namespaced kind is watched once per namespace.
//! Those watches cannot share one reflector [`Store`]: its `Writer` buffers `InitApply` events
//! from `Init` to `InitDone` and then swaps the buffer in as the whole store
//! (kube-runtime 5, `reflector/store.rs`), so a second stream's `Init` would drop the first
//! stream's buffer and its `InitDone` would replace every other namespace's objects. Hence a
//! store (and writer) per namespace, and this type to look up any of them.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};

/// The caches of one kind: one cluster-wide store, or one store per watched namespace.
pub struct NamespacedStores<K: Resource<DynamicType = ()> + 'static> {
    scope: Scope<K>,
}

enum Scope<K: Resource<DynamicType = ()> + 'static> {
    All(Store<K>),
    Namespaces(Arc<BTreeMap<String, Store<K>>>),
}

impl<K: Resource<DynamicType = ()> + Clone + 'static> NamespacedStores<K> {
    /// The cache of a cluster-wide watch.
    pub fn all(store: Store<K>) -> Self {
        Self {
            scope: Scope::All(store),
        }
    }

    /// The caches of per-namespace watches, keyed by namespace.
    pub fn namespaced(stores: BTreeMap<String, Store<K>>) -> Self {
        Self {
            scope: Scope::Namespaces(Arc::new(stores)),
        }
    }

    /// The cached object, if its namespace is watched and the object exists.
    pub fn get(&self, key: &ObjectRef<K>) -> Option<Arc<K>> {
        match &self.scope {
            Scope::All(store) => store.get(key),
            Scope::Namespaces(stores) => stores.get(key.namespace.as_deref()?)?.get(key),
        }
    }

    /// Every cached object, across the watched namespaces.
    pub fn state(&self) -> Vec<Arc<K>> {
        match &self.scope {
            Scope::All(store) => store.state(),
            Scope::Namespaces(stores) => stores.values().flat_map(Store::state).collect(),
        }
    }
}

impl<K: Resource<DynamicType = ()> + 'static> Clone for NamespacedStores<K> {
    fn clone(&self) -> Self {
        Self {
            scope: match &self.scope {
                Scope::All(store) => Scope::All(store.clone()),
                Scope::Namespaces(stores) => Scope::Namespaces(stores.clone()),
            },
        }
    }
}

impl<K: Resource<DynamicType = ()> + 'static> std::fmt::Debug for NamespacedStores<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.scope {
            Scope::All(_) => f.write_str("NamespacedStores(all)"),
            Scope::Namespaces(stores) => f
                .debug_tuple("NamespacedStores")
                .field(&stores.keys().collect::<Vec<_>>())
                .finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;

    fn cm(ns: &str, name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// Fills a writer as a watcher's initial list does.
    fn listed(objs: &[ConfigMap]) -> (Writer<ConfigMap>, Store<ConfigMap>) {
        let mut w = Writer::<ConfigMap>::default();
        let r = w.as_reader();
        w.apply_watcher_event(&Event::Init);
        for o in objs {
            w.apply_watcher_event(&Event::InitApply(o.clone()));
        }
        w.apply_watcher_event(&Event::InitDone);
        (w, r)
    }

    #[test]
    fn looks_up_each_namespace_in_its_own_store() {
        let (_wa, a) = listed(&[cm("a", "x")]);
        let (_wb, b) = listed(&[cm("b", "y")]);
        let stores =
            NamespacedStores::namespaced(BTreeMap::from([("a".into(), a), ("b".into(), b)]));
        assert!(stores.get(&ObjectRef::new("x").within("a")).is_some());
        assert!(stores.get(&ObjectRef::new("y").within("b")).is_some());
        assert!(stores.get(&ObjectRef::new("x").within("b")).is_none());
        assert!(
            stores
                .get(&ObjectRef::new("x").within("unwatched"))
                .is_none()
        );
        assert!(stores.get(&ObjectRef::new("x")).is_none());
        assert_eq!(stores.state().len(), 2);
    }

    #[test]
    fn a_relist_of_one_namespace_leaves_the_others_alone() {
        let (_wa, a) = listed(&[cm("a", "x")]);
        let (mut wb, b) = listed(&[cm("b", "y")]);
        let stores =
            NamespacedStores::namespaced(BTreeMap::from([("a".into(), a), ("b".into(), b)]));
        // b relists and finds nothing: only b's cache empties (one shared writer would have
        // emptied a's as well).
        wb.apply_watcher_event(&Event::Init);
        wb.apply_watcher_event(&Event::InitDone);
        assert!(stores.get(&ObjectRef::new("x").within("a")).is_some());
        assert!(stores.get(&ObjectRef::new("y").within("b")).is_none());
    }
}
