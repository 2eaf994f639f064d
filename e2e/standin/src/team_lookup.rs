//! Which team holds an `external_id` and which holds a name, kept beside the store's teams so a
//! team create is not a scan of every team: at 100,000 teams the two scans per create made the
//! stand-in, not the operator, the bottleneck of `just bench-rss`. Derived from the teams, never
//! persisted; [`crate::store::Store`] keeps it in step on create, rename and delete.

use std::collections::HashMap;

use crate::wire::{Id, Team};

#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct TeamLookup {
    by_external_id: HashMap<String, Id>,
    by_name: HashMap<String, Id>,
}

impl TeamLookup {
    pub(crate) fn of<'a>(teams: impl IntoIterator<Item = &'a Team>) -> Self {
        let mut lookup = Self::default();
        for team in teams {
            lookup.insert(team);
        }
        lookup
    }

    pub(crate) fn insert(&mut self, team: &Team) {
        self.by_external_id
            .insert(team.external_id.clone(), team.id);
        self.by_name.insert(team.name.clone(), team.id);
    }

    pub(crate) fn remove(&mut self, team: &Team) {
        self.by_external_id.remove(&team.external_id);
        self.by_name.remove(&team.name);
    }

    pub(crate) fn rename(&mut self, id: Id, from: &str, to: &str) {
        self.by_name.remove(from);
        self.by_name.insert(to.to_owned(), id);
    }

    pub(crate) fn by_external_id(&self, external_id: &str) -> Option<Id> {
        self.by_external_id.get(external_id).copied()
    }

    pub(crate) fn by_name(&self, name: &str) -> Option<Id> {
        self.by_name.get(name).copied()
    }
}
