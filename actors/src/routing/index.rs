//! Which actors an event concerns, and where each team and alert-source actor lives, as a pure
//! function of what was seen before (docs/design.md §5 "Re-reconcile triggers", §4.6, ADR
//! 0008). The informers feed [`Index`] what they saw; it answers with [`Command`]s, which the
//! tree's writer (`tree/writer.rs`) sends. No IO, no actors, no clock: every routing rule is a
//! unit test below.
//!
//! Placement: a TerdutTeam lives under its TerdutServer's actor when that server exists and
//! accepts the team's namespace (or the team is being deleted: cleaning up needs no consent,
//! §4.6); otherwise under the holding host, which answers why there is no server to use. An
//! alert source lives where its team lives (under holding while its team does not exist). A
//! change of placement is a move: removed from one host, ensured under the other.

use std::collections::{BTreeMap, BTreeSet};

use terdut_crds::v1alpha1::server::AllowedTeams;

use crate::consent::{Consent, decide};
use crate::key::ObjectKey;

/// Where a team or alert-source actor lives.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Host {
    /// Under the actor of this TerdutServer.
    Server(ObjectKey),
    /// Under the holding host: no server exists or accepts it yet.
    Holding,
}

/// The kinds that live under a host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ChildKind {
    Team,
    Source,
}

/// What the writer sends.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Command {
    /// Start or nudge the actor of this TerdutServer (at the root).
    EnsureServer(ObjectKey),
    /// Stop it (its object is gone).
    RemoveServer(ObjectKey),
    /// Start or nudge the actor of a team or alert source under `host`.
    Ensure {
        kind: ChildKind,
        key: ObjectKey,
        host: Host,
    },
    /// Stop it there (its object is gone, or it moves).
    Remove {
        kind: ChildKind,
        key: ObjectKey,
        host: Host,
    },
}

/// What routing reads of a TerdutServer: it exists with this uid, its generation (consent
/// and port live in the spec), whether it is being deleted, and whom it accepts.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerFacts {
    pub uid: Option<String>,
    pub generation: Option<i64>,
    pub deleting: bool,
    pub allowed: AllowedTeams,
}

/// What routing reads of a TerdutTeam: its server, what its sources gate on (Ready, the id,
/// deletion, §5), and the version it was seen at.
#[derive(Clone, Debug, PartialEq)]
pub struct TeamFacts {
    pub server: ObjectKey,
    pub ready: bool,
    pub team_id: Option<i64>,
    pub deleting: bool,
    /// The team's pause annotation: its sources pause with it (docs/design.md §5 "Pause").
    pub paused: bool,
    pub resource_version: Option<String>,
}

impl TeamFacts {
    /// What an alert source waits for of its team (§5: Ready, with an id, not paused).
    fn gate(&self) -> (bool, Option<i64>, bool, bool) {
        (self.ready, self.team_id, self.deleting, self.paused)
    }
}

/// What routing reads of a TerdutAlertSource: its team (in its namespace) and its version.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceFacts {
    pub team: String,
    pub resource_version: Option<String>,
}

/// The kinds whose list can finish.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listed {
    Server,
    Team,
    Source,
    Namespace,
}

#[derive(Clone, Debug)]
struct Placed<F> {
    facts: F,
    host: Host,
}

/// Everything routing remembers; one per operator, owned by the writer.
#[derive(Debug, Default)]
pub struct Index {
    servers: BTreeMap<ObjectKey, ServerFacts>,
    teams: BTreeMap<ObjectKey, Placed<TeamFacts>>,
    sources: BTreeMap<ObjectKey, Placed<SourceFacts>>,
    /// Namespace labels (consent reads them).
    namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// The version each webhook Secret was last seen at.
    secrets: BTreeMap<ObjectKey, Option<String>>,
    /// Server → its teams; team → its sources (the fan-outs).
    teams_of: BTreeMap<ObjectKey, BTreeSet<ObjectKey>>,
    sources_of: BTreeMap<ObjectKey, BTreeSet<ObjectKey>>,
}

/// Whether an event is only the operator's own write landing: a new version (not the one
/// seen before, which a dependency's re-nudge carries again) that the operator wrote. That
/// pass already ran on everything else; a write by anyone else still nudges.
fn own_write(own_version: bool, before: Option<&Option<String>>, now: &Option<String>) -> bool {
    own_version && now.is_some() && before != Some(now)
}

impl Index {
    /// Where the actor of team `key` lives, if the team is known.
    pub fn host_of(&self, kind: ChildKind, key: &ObjectKey) -> Option<&Host> {
        match kind {
            ChildKind::Team => self.teams.get(key).map(|p| &p.host),
            ChildKind::Source => self.sources.get(key).map(|p| &p.host),
        }
    }

    /// The TerdutServers the index knows: what a (re)started root adopts.
    pub fn servers(&self) -> impl Iterator<Item = &ObjectKey> {
        self.servers.keys()
    }

    /// The teams and sources living under `host`: what a (re)started host adopts.
    pub fn children_of(&self, host: &Host) -> (Vec<ObjectKey>, Vec<ObjectKey>) {
        let (teams, sources) = match host {
            Host::Server(server) => {
                let teams: Vec<ObjectKey> = self
                    .teams_of
                    .get(server)
                    .into_iter()
                    .flatten()
                    .filter(|t| self.host_of(ChildKind::Team, t) == Some(host))
                    .cloned()
                    .collect();
                let sources = teams
                    .iter()
                    .flat_map(|t| self.sources_of.get(t).into_iter().flatten())
                    .filter(|s| self.host_of(ChildKind::Source, s) == Some(host))
                    .cloned()
                    .collect();
                (teams, sources)
            }
            Host::Holding => (
                self.teams
                    .iter()
                    .filter(|(_, p)| p.host == Host::Holding)
                    .map(|(k, _)| k.clone())
                    .collect(),
                self.sources
                    .iter()
                    .filter(|(_, p)| p.host == Host::Holding)
                    .map(|(k, _)| k.clone())
                    .collect(),
            ),
        };
        (teams, sources)
    }

    /// A TerdutServer was seen (`Some`) or is gone (`None`).
    pub fn server(&mut self, key: ObjectKey, facts: Option<ServerFacts>) -> Vec<Command> {
        let mut out = vec![];
        match facts {
            Some(now) => {
                out.push(Command::EnsureServer(key.clone()));
                // Most server events are its own status writes and its Deployment's status:
                // the teams read none of that (docs/performance.md).
                if self.servers.insert(key.clone(), now.clone()) == Some(now) {
                    return out;
                }
            }
            None => {
                self.servers.remove(&key);
                out.push(Command::RemoveServer(key.clone()));
            }
        }
        // §5: a TerdutTeam re-reconciles when its TerdutServer changes; it may also move (the
        // server appeared, went, or changed whom it accepts).
        for team in self.teams_of.get(&key).cloned().unwrap_or_default() {
            self.place_team(&team, true, &mut out);
        }
        out
    }

    /// An object the server owns (Deployment, Service, PDB, key Secret) changed.
    pub fn server_owned(&self, key: &ObjectKey) -> Vec<Command> {
        if self.servers.contains_key(key) {
            vec![Command::EnsureServer(key.clone())]
        } else {
            vec![]
        }
    }

    /// A TerdutTeam was seen or is gone. `own_version`: the operator wrote this version.
    pub fn team(
        &mut self,
        key: ObjectKey,
        facts: Option<TeamFacts>,
        own_version: bool,
    ) -> Vec<Command> {
        let key = held_key(&self.teams, key);
        let mut out = vec![];
        let Some(mut now) = facts else {
            let Some(gone) = self.teams.remove(&key) else {
                return out;
            };
            out.push(Command::Remove {
                kind: ChildKind::Team,
                key: key.clone(),
                host: gone.host,
            });
            remove_from(&mut self.teams_of, &gone.facts.server, &key);
            // The server recounts its teams (§4.6); the sources now wait for their team.
            self.nudge_server(&gone.facts.server, &mut out);
            self.place_sources_of(&key, true, &mut out);
            return out;
        };
        now.server = self.shared_server_key(now.server);
        let before = self.teams.get(&key).map(|p| p.facts.clone());
        let own = own_write(
            own_version,
            before.as_ref().map(|b| &b.resource_version),
            &now.resource_version,
        );
        if let Some(b) = &before
            && b.server != now.server
        {
            remove_from(&mut self.teams_of, &b.server, &key);
        }
        self.teams_of
            .entry(now.server.clone())
            .or_default()
            .insert(key.clone());
        let server = now.server.clone();
        let server_affected = before
            .as_ref()
            .is_none_or(|b| b.server != now.server || b.ready != now.ready);
        let sources_affected = before.as_ref().map(TeamFacts::gate) != Some(now.gate());
        let host = self.team_host(&key, &now);
        let old_host = self.teams.get(&key).map(|p| p.host.clone());
        self.teams.insert(
            key.clone(),
            Placed {
                facts: now,
                host: host.clone(),
            },
        );
        let moved = old_host.as_ref() != Some(&host);
        if moved {
            if let Some(old) = old_host {
                out.push(Command::Remove {
                    kind: ChildKind::Team,
                    key: key.clone(),
                    host: old,
                });
            }
            out.push(Command::Ensure {
                kind: ChildKind::Team,
                key: key.clone(),
                host,
            });
        } else if !own {
            out.push(Command::Ensure {
                kind: ChildKind::Team,
                key: key.clone(),
                host,
            });
        }
        // The server's status counts its accepted and refused teams (§4.6).
        if server_affected {
            self.nudge_server(&server, &mut out);
        }
        // §5: an alert source waiting for its team re-reconciles when it changes.
        if sources_affected || moved {
            self.place_sources_of(&key, sources_affected, &mut out);
        }
        out
    }

    /// A TerdutAlertSource was seen or is gone.
    pub fn source(
        &mut self,
        key: ObjectKey,
        facts: Option<SourceFacts>,
        own_version: bool,
    ) -> Vec<Command> {
        let key = held_key(&self.sources, key);
        let mut out = vec![];
        let Some(now) = facts else {
            if let Some(gone) = self.sources.remove(&key) {
                remove_from(
                    &mut self.sources_of,
                    &team_key(&key, &gone.facts.team),
                    &key,
                );
                out.push(Command::Remove {
                    kind: ChildKind::Source,
                    key,
                    host: gone.host,
                });
            }
            return out;
        };
        let before = self.sources.get(&key).map(|p| p.facts.clone());
        let own = own_write(
            own_version,
            before.as_ref().map(|b| &b.resource_version),
            &now.resource_version,
        );
        if let Some(b) = &before
            && b.team != now.team
        {
            remove_from(&mut self.sources_of, &team_key(&key, &b.team), &key);
        }
        self.sources_of
            .entry(team_key(&key, &now.team))
            .or_default()
            .insert(key.clone());
        let host = self.source_host(&key, &now);
        let old_host = self.sources.get(&key).map(|p| p.host.clone());
        self.sources.insert(
            key.clone(),
            Placed {
                facts: now,
                host: host.clone(),
            },
        );
        self.moved_or_nudged(ChildKind::Source, &key, old_host, host, !own, &mut out);
        out
    }

    /// The webhook Secret `secret` of alert source `source` was written at `resource_version`,
    /// or deleted. §5: a lost Secret fails closed, so anything but the source's own write
    /// nudges it.
    pub fn webhook_secret(
        &mut self,
        secret: ObjectKey,
        source: &ObjectKey,
        resource_version: Option<String>,
        deleted: bool,
        own_version: bool,
    ) -> Vec<Command> {
        let before = if deleted {
            self.secrets.remove(&secret)
        } else {
            self.secrets.insert(secret, resource_version.clone())
        };
        let own = !deleted && own_write(own_version, before.as_ref(), &resource_version);
        match self.sources.get(source) {
            Some(placed) if !own => vec![Command::Ensure {
                kind: ChildKind::Source,
                key: source.clone(),
                host: placed.host.clone(),
            }],
            _ => vec![],
        }
    }

    /// A Namespace's labels were seen (`Some`), or it is gone: its teams may be accepted or
    /// refused now (§4.6).
    pub fn namespace(
        &mut self,
        name: &str,
        labels: Option<BTreeMap<String, String>>,
    ) -> Vec<Command> {
        let changed = match labels {
            Some(l) => self.namespaces.insert(name.to_owned(), l.clone()) != Some(l),
            None => self.namespaces.remove(name).is_some(),
        };
        let mut out = vec![];
        if !changed {
            return out;
        }
        let teams: Vec<ObjectKey> = self
            .teams
            .keys()
            .filter(|k| k.namespace == name)
            .cloned()
            .collect();
        for team in teams {
            self.place_team(&team, true, &mut out);
        }
        out
    }

    /// A list of `kind` in `scope` (`None`: every namespace) finished with `present` in it:
    /// what the index still has of that scope and the list lacks was deleted while no watch
    /// was open. Then every team and source looks again: a reflector swaps its list in whole,
    /// so until now a pass could find its server or team missing from the cache.
    pub fn listed(
        &mut self,
        kind: Listed,
        scope: Option<&str>,
        present: &BTreeSet<ObjectKey>,
    ) -> Vec<Command> {
        let in_scope = |k: &ObjectKey| scope.is_none_or(|ns| k.namespace == ns);
        let gone = |keys: Vec<&ObjectKey>| -> Vec<ObjectKey> {
            keys.into_iter()
                .filter(|k| in_scope(k) && !present.contains(*k))
                .cloned()
                .collect()
        };
        let mut out = vec![];
        match kind {
            Listed::Server => {
                for key in gone(self.servers.keys().collect()) {
                    out.extend(self.server(key, None));
                }
            }
            Listed::Team => {
                for key in gone(self.teams.keys().collect()) {
                    out.extend(self.team(key, None, false));
                }
            }
            Listed::Source => {
                for key in gone(self.sources.keys().collect()) {
                    out.extend(self.source(key, None, false));
                }
            }
            Listed::Namespace => {
                let names: BTreeSet<&str> = present.iter().map(|k| k.name.as_str()).collect();
                let absent: Vec<String> = self
                    .namespaces
                    .keys()
                    .filter(|n| !names.contains(n.as_str()))
                    .cloned()
                    .collect();
                for name in absent {
                    out.extend(self.namespace(&name, None));
                }
            }
        }
        let teams: Vec<ObjectKey> = self.teams.keys().cloned().collect();
        for team in teams {
            self.place_team(&team, true, &mut out);
        }
        let sources: Vec<ObjectKey> = self.sources.keys().cloned().collect();
        for source in sources {
            self.place_source(&source, true, &mut out);
        }
        dedup(out)
    }

    /// The key the index already holds for `server`, if any: every team of a server then
    /// shares one key allocation (in its facts, its host and the fan-out) instead of one each.
    fn shared_server_key(&self, server: ObjectKey) -> ObjectKey {
        if self.servers.contains_key(&server) {
            held_key(&self.servers, server)
        } else {
            held_key(&self.teams_of, server)
        }
    }

    /// Where team `key` belongs now.
    fn team_host(&self, key: &ObjectKey, team: &TeamFacts) -> Host {
        let Some(server) = self.servers.get(&team.server) else {
            return Host::Holding;
        };
        if team.deleting {
            return Host::Server(team.server.clone());
        }
        match decide(
            &team.server.namespace,
            &team.server.name,
            &server.allowed,
            &key.namespace,
            self.namespaces.get(&key.namespace),
        ) {
            Consent::Allowed => Host::Server(team.server.clone()),
            Consent::Refused(_) => Host::Holding,
        }
    }

    /// Where source `key` belongs now: with its team.
    fn source_host(&self, key: &ObjectKey, source: &SourceFacts) -> Host {
        self.teams
            .get(&team_key(key, &source.team))
            .map_or(Host::Holding, |t| t.host.clone())
    }

    /// Re-places team `key` (a move takes its sources along); `nudge`: ensure it where it
    /// stays, too.
    fn place_team(&mut self, key: &ObjectKey, nudge: bool, out: &mut Vec<Command>) {
        let Some(placed) = self.teams.get(key) else {
            return;
        };
        let host = self.team_host(key, &placed.facts);
        let old = placed.host.clone();
        if let Some(p) = self.teams.get_mut(key) {
            p.host = host.clone();
        }
        let moved = old != host;
        self.moved_or_nudged(ChildKind::Team, key, Some(old), host, nudge, out);
        if moved {
            self.place_sources_of(key, false, out);
        }
    }

    fn place_sources_of(&mut self, team: &ObjectKey, nudge: bool, out: &mut Vec<Command>) {
        for source in self.sources_of.get(team).cloned().unwrap_or_default() {
            self.place_source(&source, nudge, out);
        }
    }

    fn place_source(&mut self, key: &ObjectKey, nudge: bool, out: &mut Vec<Command>) {
        let Some(placed) = self.sources.get(key) else {
            return;
        };
        let host = self.source_host(key, &placed.facts);
        let old = placed.host.clone();
        if let Some(p) = self.sources.get_mut(key) {
            p.host = host.clone();
        }
        self.moved_or_nudged(ChildKind::Source, key, Some(old), host, nudge, out);
    }

    /// A move (remove there, ensure here) when the host changed; else an ensure if `nudge`.
    fn moved_or_nudged(
        &self,
        kind: ChildKind,
        key: &ObjectKey,
        old: Option<Host>,
        host: Host,
        nudge: bool,
        out: &mut Vec<Command>,
    ) {
        let moved = old.as_ref() != Some(&host);
        if moved && let Some(old) = old {
            out.push(Command::Remove {
                kind,
                key: key.clone(),
                host: old,
            });
        }
        if moved || nudge {
            out.push(Command::Ensure {
                kind,
                key: key.clone(),
                host,
            });
        }
    }

    fn nudge_server(&self, server: &ObjectKey, out: &mut Vec<Command>) {
        if self.servers.contains_key(server) {
            out.push(Command::EnsureServer(server.clone()));
        }
    }
}

/// The key `map` already holds for `key`, if any: an event brings a new key, and the index,
/// the commands it sends and the supervisors that keep them then share the first one.
fn held_key<V>(map: &BTreeMap<ObjectKey, V>, key: ObjectKey) -> ObjectKey {
    map.get_key_value(&key)
        .map_or(key, |(held, _)| held.clone())
}

/// The key of the team `name` an alert source `source` names (same namespace, §4.3).
fn team_key(source: &ObjectKey, name: &str) -> ObjectKey {
    ObjectKey::new(source.namespace.clone(), name.to_owned())
}

fn remove_from(
    map: &mut BTreeMap<ObjectKey, BTreeSet<ObjectKey>>,
    at: &ObjectKey,
    key: &ObjectKey,
) {
    if let Some(set) = map.get_mut(at) {
        set.remove(key);
        if set.is_empty() {
            map.remove(at);
        }
    }
}

/// Drops repeated commands, keeping the first of each in order (a relist re-places objects
/// a removal already re-placed).
fn dedup(commands: Vec<Command>) -> Vec<Command> {
    let mut seen = BTreeSet::new();
    commands
        .into_iter()
        .filter(|c| seen.insert(c.clone()))
        .collect()
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
