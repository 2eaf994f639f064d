//! Which Events are repeats: the bookkeeping behind folding the same (object, type, reason,
//! action) within [`SERIES_WINDOW`] into one Event series (events.k8s.io/v1 `series`).
//!
//! kube's `Recorder` does the same folding but keeps a clone of every Event it published, all
//! strings of the Event and of its object reference, for six minutes or until the next publish
//! after that, and sweeps the whole cache on every publish. At 1,000 teams that cache was the
//! second-largest heap consumer after the actors (5.9 MB of hash table alone in the heap
//! profile, docs/performance.md). Here an entry is a 64-bit key and what a repeat needs: the
//! Event's namespace and name, its count and when it was last seen; the cache is swept at most
//! once a minute and shrinks when most of it expired. Pure: time comes in as an argument.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::Timestamp;

/// A repeat within this long of the last one joins its series (kube's `Recorder` uses the same
/// six minutes).
pub const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

/// Expired entries are dropped at most this often.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// Identifies "the same Event" (what kube keys on, less the reporting controller, which is
/// fixed per publisher).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SeriesKey(u64);

impl SeriesKey {
    pub fn of(type_: &str, reason: &str, action: &str, regarding: &ObjectReference) -> Self {
        let mut h = DefaultHasher::new();
        (type_, reason, action).hash(&mut h);
        (
            &regarding.api_version,
            &regarding.kind,
            &regarding.namespace,
            &regarding.name,
            &regarding.uid,
        )
            .hash(&mut h);
        Self(h.finish())
    }
}

/// The published Event a repeat updates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    pub namespace: String,
    pub name: String,
    /// How often it was seen, this repeat included (2 on the first repeat).
    pub count: i32,
}

#[derive(Debug)]
struct Entry {
    namespace: String,
    name: String,
    count: i32,
    last: Timestamp,
}

/// The live series of one publisher.
#[derive(Debug, Default)]
pub struct SeriesCache {
    entries: HashMap<SeriesKey, Entry>,
    last_sweep: Option<Timestamp>,
}

impl SeriesCache {
    /// If `key` was published within the window, counts this repeat and says which Event to
    /// update; otherwise `None` (publish a new Event and [`record`](Self::record) it).
    pub fn repeat(&mut self, key: SeriesKey, now: Timestamp) -> Option<Published> {
        self.sweep(now);
        let entry = self.entries.get_mut(&key)?;
        if !within_window(entry.last, now) {
            self.entries.remove(&key);
            return None;
        }
        entry.count = entry.count.saturating_add(1);
        entry.last = now;
        Some(Published {
            namespace: entry.namespace.clone(),
            name: entry.name.clone(),
            count: entry.count,
        })
    }

    /// A new Event was created: later repeats of `key` update it.
    pub fn record(&mut self, key: SeriesKey, namespace: String, name: String, now: Timestamp) {
        self.entries.insert(
            key,
            Entry {
                namespace,
                name,
                count: 1,
                last: now,
            },
        );
    }

    /// The Event behind `key` is gone (a patch answered 404): the next repeat starts anew.
    pub fn forget(&mut self, key: SeriesKey) {
        self.entries.remove(&key);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Drops expired entries, at most once per [`SWEEP_EVERY`], and gives memory back when
    /// most of the table is empty (a burst of creations leaves a large table behind).
    fn sweep(&mut self, now: Timestamp) {
        if self
            .last_sweep
            .is_some_and(|t| elapsed(t, now) < SWEEP_EVERY)
        {
            return;
        }
        self.last_sweep = Some(now);
        self.entries.retain(|_, e| within_window(e.last, now));
        if self.entries.capacity() > 64 && self.entries.len() < self.entries.capacity() / 4 {
            self.entries.shrink_to_fit();
        }
    }
}

fn elapsed(from: Timestamp, to: Timestamp) -> Duration {
    Duration::try_from(to.duration_since(from)).unwrap_or(Duration::ZERO)
}

fn within_window(last: Timestamp, now: Timestamp) -> bool {
    elapsed(last, now) < SERIES_WINDOW
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn team(name: &str, uid: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("terdut.ryuvia.com/v1alpha1".into()),
            kind: Some("TerdutTeam".into()),
            namespace: Some("ns".into()),
            name: Some(name.into()),
            uid: Some(uid.into()),
            ..ObjectReference::default()
        }
    }

    #[test]
    fn the_same_event_within_the_window_is_a_repeat_with_a_growing_count() {
        let mut cache = SeriesCache::default();
        let key = SeriesKey::of("Warning", "UnknownUser", "Reconcile", &team("a", "u1"));
        assert_eq!(cache.repeat(key, at(0)), None);
        cache.record(key, "ns".into(), "a.17f".into(), at(0));
        let second = cache.repeat(key, at(10)).expect("a repeat");
        assert_eq!(
            second,
            Published {
                namespace: "ns".into(),
                name: "a.17f".into(),
                count: 2
            }
        );
        assert_eq!(cache.repeat(key, at(20)).unwrap().count, 3);
        // The window runs from the last repeat, not the first Event.
        assert_eq!(cache.repeat(key, at(20 + 359)).unwrap().count, 4);
    }

    #[test]
    fn after_the_window_the_next_one_starts_a_new_event() {
        let mut cache = SeriesCache::default();
        let key = SeriesKey::of("Normal", "TeamCreated", "Create", &team("a", "u1"));
        cache.record(key, "ns".into(), "a.1".into(), at(0));
        assert_eq!(cache.repeat(key, at(360)), None);
        assert!(cache.is_empty());
    }

    #[test]
    fn any_difference_in_object_type_reason_or_action_is_another_series() {
        let base = SeriesKey::of("Warning", "R", "A", &team("a", "u1"));
        let others = [
            SeriesKey::of("Normal", "R", "A", &team("a", "u1")),
            SeriesKey::of("Warning", "R2", "A", &team("a", "u1")),
            SeriesKey::of("Warning", "R", "A2", &team("a", "u1")),
            SeriesKey::of("Warning", "R", "A", &team("b", "u1")),
            // The same name after a delete and re-create is another object.
            SeriesKey::of("Warning", "R", "A", &team("a", "u2")),
        ];
        for other in others {
            assert_ne!(base, other);
        }
        assert_eq!(base, SeriesKey::of("Warning", "R", "A", &team("a", "u1")));
    }

    #[test]
    fn forgotten_series_start_anew() {
        let mut cache = SeriesCache::default();
        let key = SeriesKey::of("Warning", "R", "A", &team("a", "u1"));
        cache.record(key, "ns".into(), "a.1".into(), at(0));
        cache.forget(key);
        assert_eq!(cache.repeat(key, at(1)), None);
    }

    #[test]
    fn expired_entries_are_swept_at_most_once_a_minute_and_the_table_shrinks() {
        let mut cache = SeriesCache::default();
        for i in 0..1000 {
            let key = SeriesKey::of(
                "Normal",
                "TeamCreated",
                "Create",
                &team(&format!("t{i}"), "u"),
            );
            cache.record(key, "ns".into(), format!("t{i}.1"), at(0));
        }
        let probe = SeriesKey::of("Normal", "Other", "Create", &team("x", "u"));
        // First call sweeps (nothing expired yet); within the minute no sweep runs.
        assert_eq!(cache.repeat(probe, at(1)), None);
        assert_eq!(cache.len(), 1000);
        assert_eq!(cache.repeat(probe, at(400)), None);
        assert_eq!(cache.len(), 0, "all expired by now");
        assert!(
            cache.entries.capacity() < 64,
            "{}",
            cache.entries.capacity()
        );
        cache.record(probe, "ns".into(), "x.1".into(), at(400));
        assert_eq!(cache.repeat(probe, at(430)).unwrap().count, 2);
        assert_eq!(cache.len(), 1, "no sweep within the minute");
    }
}
