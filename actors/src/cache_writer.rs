//! The writer of one informer cache: kube-runtime's reflector `Writer`, fed so that a relist
//! replaces the cached objects in place.
//!
//! kube-runtime's own `reflect` collects a relist's objects in a second map and swaps it in
//! when the list is done, so for the length of every relist the cache is held twice: at
//! 10,000 teams ~16 MB, most of the relist peak that docs/performance.md run 18 measured.
//! Here the first list goes through as kube-runtime does it (the store is empty; its end marks
//! the store ready), and every later one is applied object by object, as updates, with the
//! objects it did not bring (deleted while the watch was down) removed at its end. A reader
//! sees each object at its old or its new version during the relist, and one deleted meanwhile
//! until the relist ends, as it did with the swap.

use std::collections::HashSet;

use kube::Resource;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{Lookup, Store};
use kube::runtime::watcher::Event;

use crate::key::ObjectKey;

/// See the module docs.
pub struct CacheWriter<K>
where
    K: Lookup<DynamicType = ()> + Resource<DynamicType = ()> + Clone + 'static,
{
    writer: Writer<K>,
    /// Set once the first list is done.
    listed: bool,
    /// During a relist: the objects it brought so far.
    relisted: Option<HashSet<ObjectKey>>,
}

impl<K> std::fmt::Debug for CacheWriter<K>
where
    K: Lookup<DynamicType = ()> + Resource<DynamicType = ()> + Clone + 'static,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheWriter")
            .field("listed", &self.listed)
            .field("relisting", &self.relisted.is_some())
            .finish_non_exhaustive()
    }
}

impl<K> CacheWriter<K>
where
    K: Lookup<DynamicType = ()> + Resource<DynamicType = ()> + Clone + 'static,
{
    /// A writer and the store it fills.
    pub fn new() -> (Self, Store<K>) {
        let writer = Writer::default();
        let reader = writer.as_reader();
        let this = Self {
            writer,
            listed: false,
            relisted: None,
        };
        (this, reader)
    }

    /// Applies one watcher event to the cache and hands it back for the routes.
    pub fn apply(&mut self, event: Event<K>) -> Event<K> {
        if !self.listed {
            if matches!(event, Event::InitDone) {
                self.listed = true;
            }
            self.writer.apply_watcher_event(&event);
            return event;
        }
        match event {
            Event::Init => {
                self.relisted = Some(HashSet::new());
                Event::Init
            }
            Event::InitApply(object) => {
                if let Some(seen) = &mut self.relisted {
                    seen.insert(ObjectKey::of(&object));
                }
                // An update of the one copy, not an entry in a second map.
                let update = Event::Apply(object);
                self.writer.apply_watcher_event(&update);
                let Event::Apply(object) = update else {
                    unreachable!("built as an Apply above")
                };
                Event::InitApply(object)
            }
            Event::InitDone => {
                if let Some(seen) = self.relisted.take() {
                    for gone in self
                        .writer
                        .as_reader()
                        .state()
                        .into_iter()
                        .filter(|o| !seen.contains(&ObjectKey::of(o.as_ref())))
                    {
                        self.writer
                            .apply_watcher_event(&Event::Delete(gone.as_ref().clone()));
                    }
                }
                Event::InitDone
            }
            other => {
                self.writer.apply_watcher_event(&other);
                other
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::FutureExt as _;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use kube::runtime::reflector::ObjectRef;

    use super::*;

    fn cm(name: &str, version: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                resource_version: Some(version.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn version(store: &Store<ConfigMap>, name: &str) -> Option<String> {
        store
            .get(&ObjectRef::new(name).within("ns"))
            .and_then(|o| o.metadata.resource_version.clone())
    }

    #[test]
    fn the_first_list_is_kube_runtimes_and_marks_the_store_ready() {
        let (mut w, store) = CacheWriter::<ConfigMap>::new();
        w.apply(Event::Init);
        w.apply(Event::InitApply(cm("a", "1")));
        assert_eq!(
            version(&store, "a"),
            None,
            "not visible before the list is done"
        );
        w.apply(Event::InitDone);
        assert_eq!(version(&store, "a").as_deref(), Some("1"));
        assert!(store.wait_until_ready().now_or_never().is_some());
    }

    #[test]
    fn a_relist_updates_each_object_in_place_and_drops_those_it_did_not_bring() {
        let (mut w, store) = CacheWriter::<ConfigMap>::new();
        for e in [
            Event::Init,
            Event::InitApply(cm("a", "1")),
            Event::InitApply(cm("b", "1")),
            Event::InitApply(cm("c", "1")),
            Event::InitDone,
        ] {
            w.apply(e);
        }
        let before: Arc<ConfigMap> = store.get(&ObjectRef::new("b").within("ns")).unwrap();
        // The watch was down; `c` was deleted meanwhile and `a` changed.
        w.apply(Event::Init);
        w.apply(Event::InitApply(cm("a", "2")));
        assert_eq!(
            version(&store, "a").as_deref(),
            Some("2"),
            "the new copy replaces the old one at once: no second map holds it"
        );
        assert_eq!(
            version(&store, "c").as_deref(),
            Some("1"),
            "kept until the end"
        );
        let handed_back = w.apply(Event::InitApply(cm("b", "1")));
        assert!(
            matches!(handed_back, Event::InitApply(_)),
            "the routes see the list"
        );
        assert!(matches!(w.apply(Event::InitDone), Event::InitDone));
        assert_eq!(
            version(&store, "c"),
            None,
            "deleted while the watch was down"
        );
        assert_eq!(store.state().len(), 2);
        assert_eq!(before.metadata.resource_version.as_deref(), Some("1"));
        // Updates after the relist are applied as usual.
        w.apply(Event::Apply(cm("d", "3")));
        w.apply(Event::Delete(cm("a", "2")));
        assert_eq!(version(&store, "d").as_deref(), Some("3"));
        assert_eq!(version(&store, "a"), None);
    }

    #[test]
    fn a_relist_cut_short_and_started_again_counts_only_the_last_one() {
        let (mut w, store) = CacheWriter::<ConfigMap>::new();
        for e in [
            Event::Init,
            Event::InitApply(cm("a", "1")),
            Event::InitApply(cm("b", "1")),
            Event::InitDone,
            Event::Init,
            Event::InitApply(cm("a", "2")),
            // The list failed part way and started over; `a` is gone by now.
            Event::Init,
            Event::InitApply(cm("b", "2")),
            Event::InitDone,
        ] {
            w.apply(e);
        }
        assert_eq!(version(&store, "a"), None);
        assert_eq!(version(&store, "b").as_deref(), Some("2"));
    }
}
