//! Which TerdutTeams of each namespace name each TerdutServer across namespaces, oldest first:
//! what a policy's `maxTeams` counts (docs/design.md §4.6 "Policies"). Kept from the team
//! watch's events (`informers.rs`), so a pass learns its team's rank by one lookup rather
//! than a walk over every cached team.
//!
//! Only cross-namespace teams are kept (a server's own namespace is never limited): one entry
//! per team, two shared keys and a timestamp. Every TerdutTeam counts until it is gone, in
//! whatever state: a team being deleted still exists on the server until its DELETE is done.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

use terdut_crds::v1alpha1::TerdutTeam;

use crate::key::ObjectKey;
use crate::key::team_server_key;

/// The order teams are admitted in: creation time (whole seconds, as the API server keeps
/// it), then name.
type Age = (i64, ObjectKey);

/// See the module docs. Shared by the team watch (writer) and the team passes (readers).
#[derive(Debug, Default)]
pub struct Attachments {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// (server, team namespace) → its teams by age.
    by_namespace: HashMap<(ObjectKey, String), BTreeSet<Age>>,
    /// Each team's server and age, to remove it again.
    teams: HashMap<ObjectKey, (ObjectKey, i64)>,
    /// The watches (scopes) whose first list is in, and how many there are.
    listed: HashSet<Option<String>>,
    scopes: usize,
}

impl Attachments {
    /// Counts are known once `scopes` team watches have each listed once.
    pub fn new(scopes: usize) -> Self {
        Self {
            inner: Mutex::new(Inner {
                scopes: scopes.max(1),
                ..Inner::default()
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every update leaves both maps consistent before it can panic.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A team was applied (created, changed, listed).
    pub fn seen(&self, team: &TerdutTeam) {
        let key = ObjectKey::of(team);
        let server = team_server_key(team);
        if server.namespace == key.namespace {
            return;
        }
        let created = team
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(i64::MAX, |t| t.0.as_second());
        let mut inner = self.lock();
        if inner.teams.get(&key) == Some(&(server.clone(), created)) {
            return;
        }
        inner.remove(&key);
        inner
            .by_namespace
            .entry((server.clone(), key.namespace.clone()))
            .or_default()
            .insert((created, key.clone()));
        inner.teams.insert(key, (server, created));
    }

    /// A team is gone.
    pub fn gone(&self, team: &ObjectKey) {
        self.lock().remove(team);
    }

    /// The team watch of `scope` (`None`: every namespace) listed `present`: whatever it had
    /// of that scope and the list lacks was deleted while no watch was open.
    pub fn listed(&self, scope: Option<&str>, present: &BTreeSet<ObjectKey>) {
        let mut inner = self.lock();
        let gone: Vec<ObjectKey> = inner
            .teams
            .keys()
            .filter(|k| scope.is_none_or(|s| k.namespace == s) && !present.contains(*k))
            .cloned()
            .collect();
        for key in &gone {
            inner.remove(key);
        }
        inner.listed.insert(scope.map(str::to_owned));
    }

    /// How many teams of `team`'s namespace naming `server` are older than `team`; `None`
    /// until every team watch has listed once, or when the team is not known.
    pub fn rank(&self, server: &ObjectKey, team: &ObjectKey) -> Option<usize> {
        let inner = self.lock();
        if inner.listed.len() < inner.scopes {
            return None;
        }
        let (_, created) = inner.teams.get(team)?;
        let teams = inner
            .by_namespace
            .get(&(server.clone(), team.namespace.clone()))?;
        Some(teams.range(..(*created, team.clone())).count())
    }

    /// Teams kept (for tests and the memory notes).
    pub fn len(&self) -> usize {
        self.lock().teams.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Inner {
    fn remove(&mut self, key: &ObjectKey) {
        let Some((server, created)) = self.teams.remove(key) else {
            return;
        };
        let slot = (server, key.namespace.clone());
        if let Some(set) = self.by_namespace.get_mut(&slot) {
            set.remove(&(created, key.clone()));
            if set.is_empty() {
                self.by_namespace.remove(&slot);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    fn team(ns: &str, name: &str, server_ns: &str, created: i64) -> TerdutTeam {
        let mut t: TerdutTeam = serde_json::from_value(json!({
            "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutTeam",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"serverRef": {"name": "terdut", "namespace": server_ns}, "displayName": name},
        }))
        .unwrap();
        t.metadata.creation_timestamp = Some(Time(
            k8s_openapi::jiff::Timestamp::from_second(created).unwrap(),
        ));
        t
    }

    #[test]
    fn ranks_by_age_then_name_per_namespace_and_server_once_listed() {
        let a = Attachments::new(1);
        let server = ObjectKey::new("shared", "terdut");
        for (name, created) in [("c", 10), ("b", 20), ("a", 20), ("d", 5)] {
            a.seen(&team("pay", name, "shared", created));
        }
        a.seen(&team("other", "x", "shared", 1));
        a.seen(&team("shared", "own", "shared", 1));
        let key = |n: &str| ObjectKey::new("pay", n);
        assert_eq!(
            a.rank(&server, &key("d")),
            None,
            "not counted before the list is in"
        );
        a.listed(
            None,
            &["d", "c", "a", "b"]
                .iter()
                .map(|n| key(n))
                .chain([
                    ObjectKey::new("other", "x"),
                    ObjectKey::new("shared", "own"),
                ])
                .collect(),
        );
        let ranks: Vec<_> = ["d", "c", "a", "b"]
            .iter()
            .map(|n| a.rank(&server, &key(n)))
            .collect();
        assert_eq!(ranks, [Some(0), Some(1), Some(2), Some(3)]);
        assert_eq!(a.rank(&server, &ObjectKey::new("other", "x")), Some(0));
        assert_eq!(a.len(), 5, "the server's own namespace is not kept");
        // An older team going moves the others up; a relist drops what it did not bring.
        a.gone(&key("d"));
        assert_eq!(a.rank(&server, &key("b")), Some(2));
        a.listed(None, &[key("b")].into_iter().collect());
        assert_eq!(a.rank(&server, &key("b")), Some(0));
        assert_eq!(a.len(), 1);
        // Seen again unchanged: nothing moves.
        a.seen(&team("pay", "b", "shared", 20));
        assert_eq!(a.rank(&server, &key("b")), Some(0));
        assert_eq!(
            a.rank(&ObjectKey::new("elsewhere", "terdut"), &key("b")),
            None
        );
    }

    #[test]
    fn every_scope_must_have_listed() {
        let a = Attachments::new(2);
        let server = ObjectKey::new("shared", "terdut");
        a.seen(&team("pay", "t", "shared", 1));
        let key = ObjectKey::new("pay", "t");
        a.listed(Some("pay"), &[key.clone()].into_iter().collect());
        assert_eq!(a.rank(&server, &key), None);
        a.listed(Some("shared"), &BTreeSet::new());
        assert_eq!(
            a.rank(&server, &key),
            Some(0),
            "another scope's list keeps pay's teams"
        );
    }
}
