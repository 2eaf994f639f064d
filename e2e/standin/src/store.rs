//! The stand-in's state and the semantics of every contract row (terdut-api.md), free of HTTP
//! so each rule reads in one place: idempotent team create by `external_id`, unique team and
//! switch names, one-shot integration keys, username resolution, and a team delete that takes
//! its ladder, switches and integrations with it.
//!
//! Integration keys and webhook tokens are kept only as SHA-256 digests, so neither the
//! memory image nor the data file can give one back; a key can only be checked.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::admin::types::{AdminIntegration, AdminState, AdminTeam, KeyCheck};
use crate::error::ContractError;
use crate::secrets;
use crate::team_lookup::TeamLookup;
use crate::validate;
use crate::wire::{
    CreatedIntegration, Id, Integration, Kind, Ladder, NewIntegration, NewTeam, Oidc, Switch,
    SwitchBody, Target, Team,
};

/// Everything the stand-in knows; persisted whole as JSON, but for the lookup, which is
/// rebuilt on load (through [`StoreFile`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "StoreFile")]
pub struct Store {
    next_id: Id,
    users: BTreeSet<String>,
    teams: BTreeMap<Id, TeamRec>,
    #[serde(skip)]
    lookup: TeamLookup,
}

/// What a data file holds: a [`Store`] without its lookup.
#[derive(Deserialize)]
struct StoreFile {
    next_id: Id,
    users: BTreeSet<String>,
    teams: BTreeMap<Id, TeamRec>,
}

impl From<StoreFile> for Store {
    fn from(file: StoreFile) -> Self {
        let lookup = TeamLookup::of(file.teams.values().map(|t| &t.team));
        Self {
            next_id: file.next_id,
            users: file.users,
            teams: file.teams,
            lookup,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct TeamRec {
    team: Team,
    #[serde(default)]
    open_incidents: u32,
    #[serde(default)]
    ladder: Option<Ladder>,
    #[serde(default)]
    switches: BTreeMap<Id, Switch>,
    #[serde(default)]
    integrations: BTreeMap<Id, IntegrationRec>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct IntegrationRec {
    integration: Integration,
    key_sha256: String,
    token_sha256: String,
    #[serde(default)]
    ingested: u64,
}

/// What team create did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TeamOutcome {
    Created(Team),
    Found(Team),
}

/// What integration create did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IntegrationOutcome {
    Created(CreatedIntegration),
    Existing(Integration),
}

const TEAM: &str = "team";
const LADDER: &str = "escalation ladder";
const SWITCH: &str = "dead man's switch";
const INTEGRATION: &str = "integration";

impl Store {
    fn next_id(&mut self) -> Id {
        self.next_id += 1;
        self.next_id
    }

    fn team(&self, id: Id) -> Result<&TeamRec, ContractError> {
        self.teams.get(&id).ok_or(ContractError::NotFound(TEAM))
    }

    fn team_mut(&mut self, id: Id) -> Result<&mut TeamRec, ContractError> {
        self.teams.get_mut(&id).ok_or(ContractError::NotFound(TEAM))
    }

    /// Whether a team other than `except` is called `name` (assumption: names compare exactly,
    /// case-sensitive).
    fn name_taken(&self, name: &str, except: Option<Id>) -> bool {
        self.lookup
            .by_name(name)
            .is_some_and(|holder| Some(holder) != except)
    }

    // ---- teams ---------------------------------------------------------------------------

    /// `POST /api/v1/teams`: a known `external_id` returns its team as is (name untouched),
    /// else a name held by another team is `team_name_taken`, else a new team.
    pub fn create_team(&mut self, body: NewTeam) -> Result<TeamOutcome, ContractError> {
        validate::new_team(&body)?;
        if let Some(existing) = self.lookup.by_external_id(&body.external_id) {
            return Ok(TeamOutcome::Found(self.team(existing)?.team.clone()));
        }
        if self.name_taken(&body.name, None) {
            return Err(ContractError::TeamNameTaken);
        }
        let id = self.next_id();
        let team = Team {
            id,
            name: body.name,
            external_id: body.external_id,
            oidc: Oidc::default(),
        };
        self.lookup.insert(&team);
        self.teams.insert(
            id,
            TeamRec {
                team: team.clone(),
                open_incidents: 0,
                ladder: None,
                switches: BTreeMap::new(),
                integrations: BTreeMap::new(),
            },
        );
        Ok(TeamOutcome::Created(team))
    }

    pub fn get_team(&self, id: Id) -> Result<Team, ContractError> {
        Ok(self.team(id)?.team.clone())
    }

    pub fn rename_team(&mut self, id: Id, name: String) -> Result<Team, ContractError> {
        self.team(id)?;
        validate::team_name(&name)?;
        if self.name_taken(&name, Some(id)) {
            return Err(ContractError::TeamNameTaken);
        }
        let rec = self.team_mut(id)?;
        let old = std::mem::replace(&mut rec.team.name, name);
        let team = rec.team.clone();
        self.lookup.rename(id, &old, &team.name);
        Ok(team)
    }

    pub fn set_oidc(&mut self, id: Id, oidc: Oidc) -> Result<Team, ContractError> {
        self.team(id)?;
        validate::oidc(&oidc)?;
        let rec = self.team_mut(id)?;
        rec.team.oidc = oidc;
        Ok(rec.team.clone())
    }

    /// Refused while the team has open incidents; otherwise the team goes with its ladder,
    /// switches and integrations (whose keys die with them).
    pub fn delete_team(&mut self, id: Id) -> Result<(), ContractError> {
        if self.team(id)?.open_incidents > 0 {
            return Err(ContractError::OpenIncidents);
        }
        if let Some(gone) = self.teams.remove(&id) {
            self.lookup.remove(&gone.team);
        }
        Ok(())
    }

    // ---- escalation ladder ---------------------------------------------------------------

    pub fn get_ladder(&self, team: Id) -> Result<Ladder, ContractError> {
        self.team(team)?
            .ladder
            .clone()
            .ok_or(ContractError::NotFound(LADDER))
    }

    /// Replaces the ladder whole; the first username nobody has is `unknown_user`.
    pub fn put_ladder(&mut self, team: Id, ladder: Ladder) -> Result<Ladder, ContractError> {
        self.team(team)?;
        validate::ladder(&ladder)?;
        let unknown = ladder
            .levels
            .iter()
            .flat_map(|l| &l.targets)
            .find_map(|t| match t {
                Target::User { username } if !self.users.contains(username) => {
                    Some(username.clone())
                }
                _ => None,
            });
        if let Some(username) = unknown {
            return Err(ContractError::UnknownUser(username));
        }
        self.team_mut(team)?.ladder = Some(ladder.clone());
        Ok(ladder)
    }

    /// Idempotent: also when the team has none (but not for a missing team: assumption).
    pub fn delete_ladder(&mut self, team: Id) -> Result<(), ContractError> {
        self.team_mut(team)?.ladder = None;
        Ok(())
    }

    // ---- dead man's switches -------------------------------------------------------------

    pub fn list_switches(&self, team: Id) -> Result<Vec<Switch>, ContractError> {
        Ok(self.team(team)?.switches.values().cloned().collect())
    }

    pub fn create_switch(&mut self, team: Id, body: SwitchBody) -> Result<Switch, ContractError> {
        self.team(team)?;
        validate::switch(&body)?;
        if self
            .team(team)?
            .switches
            .values()
            .any(|s| s.name == body.name)
        {
            return Err(ContractError::SwitchNameTaken);
        }
        let id = self.next_id();
        let switch = Switch {
            id,
            name: body.name,
            matcher: body.matcher,
            timeout_seconds: body.timeout_seconds,
            severity: body.severity,
        };
        self.team_mut(team)?.switches.insert(id, switch.clone());
        Ok(switch)
    }

    pub fn update_switch(
        &mut self,
        team: Id,
        switch: Id,
        body: SwitchBody,
    ) -> Result<Switch, ContractError> {
        let rec = self.team(team)?;
        if !rec.switches.contains_key(&switch) {
            return Err(ContractError::NotFound(SWITCH));
        }
        validate::switch(&body)?;
        if rec
            .switches
            .values()
            .any(|s| s.name == body.name && s.id != switch)
        {
            return Err(ContractError::SwitchNameTaken);
        }
        let updated = Switch {
            id: switch,
            name: body.name,
            matcher: body.matcher,
            timeout_seconds: body.timeout_seconds,
            severity: body.severity,
        };
        self.team_mut(team)?
            .switches
            .insert(switch, updated.clone());
        Ok(updated)
    }

    pub fn delete_switch(&mut self, team: Id, switch: Id) -> Result<(), ContractError> {
        self.team_mut(team)?
            .switches
            .remove(&switch)
            .map(|_| ())
            .ok_or(ContractError::NotFound(SWITCH))
    }

    // ---- integrations --------------------------------------------------------------------

    /// A new integration gets a fresh key and token, returned this once; an `external_id` the
    /// team already has returns that integration without them (terdut-api.md, assumption).
    pub fn create_integration(
        &mut self,
        team: Id,
        body: NewIntegration,
        public_url: &str,
    ) -> Result<IntegrationOutcome, ContractError> {
        let rec = self.team(team)?;
        validate::new_integration(&body)?;
        if let Some(existing) = rec
            .integrations
            .values()
            .find(|i| i.integration.external_id == body.external_id)
        {
            return Ok(IntegrationOutcome::Existing(existing.integration.clone()));
        }
        let id = self.next_id();
        let integration = Integration {
            id,
            kind: body.kind,
            name: body.name,
            external_id: body.external_id,
        };
        let key = secrets::generate_integration_key();
        let token = secrets::generate_token();
        let url = format!(
            "{}/api/v1/ingest/{}/{token}",
            public_url.trim_end_matches('/'),
            body.kind.as_str()
        );
        self.team_mut(team)?.integrations.insert(
            id,
            IntegrationRec {
                integration: integration.clone(),
                key_sha256: secrets::digest_hex(&key),
                token_sha256: secrets::digest_hex(&token),
                ingested: 0,
            },
        );
        Ok(IntegrationOutcome::Created(CreatedIntegration {
            integration,
            url,
            key,
        }))
    }

    fn integration(&self, team: Id, id: Id) -> Result<&IntegrationRec, ContractError> {
        self.team(team)?
            .integrations
            .get(&id)
            .ok_or(ContractError::NotFound(INTEGRATION))
    }

    pub fn get_integration(&self, team: Id, id: Id) -> Result<Integration, ContractError> {
        Ok(self.integration(team, id)?.integration.clone())
    }

    pub fn rename_integration(
        &mut self,
        team: Id,
        id: Id,
        name: String,
    ) -> Result<Integration, ContractError> {
        self.integration(team, id)?;
        validate::integration_name(&name)?;
        let rec = self
            .team_mut(team)?
            .integrations
            .get_mut(&id)
            .ok_or(ContractError::NotFound(INTEGRATION))?;
        rec.integration.name = name;
        Ok(rec.integration.clone())
    }

    pub fn delete_integration(&mut self, team: Id, id: Id) -> Result<(), ContractError> {
        self.team_mut(team)?
            .integrations
            .remove(&id)
            .map(|_| ())
            .ok_or(ContractError::NotFound(INTEGRATION))
    }

    /// `POST /api/v1/ingest/{kind}/{token}` (assumption): accepted when the token names an
    /// integration of that kind and the key is its key.
    pub fn ingest(&mut self, kind: &str, token: &str, key: &str) -> Result<Id, ContractError> {
        let kind = Kind::parse(kind).ok_or(ContractError::NotFound(INTEGRATION))?;
        let token_digest = secrets::digest_hex(token);
        let key_digest = secrets::digest_hex(key);
        let rec = self
            .teams
            .values_mut()
            .flat_map(|t| t.integrations.values_mut())
            .find(|i| {
                i.integration.kind == kind
                    && secrets::digests_eq(i.token_sha256.as_bytes(), token_digest.as_bytes())
            })
            .ok_or(ContractError::NotFound(INTEGRATION))?;
        if !secrets::digests_eq(rec.key_sha256.as_bytes(), key_digest.as_bytes()) {
            return Err(ContractError::Unauthorized);
        }
        rec.ingested += 1;
        Ok(rec.integration.id)
    }

    // ---- admin ---------------------------------------------------------------------------

    pub fn seed_users(&mut self, users: impl IntoIterator<Item = String>) {
        self.users.extend(users);
    }

    pub fn remove_user(&mut self, username: &str) -> bool {
        self.users.remove(username)
    }

    pub fn set_open_incidents(&mut self, team: Id, count: u32) -> Result<(), ContractError> {
        self.team_mut(team)?.open_incidents = count;
        Ok(())
    }

    /// Whether `key` is the key of a live integration (a deleted one's key is dead).
    pub fn key_check(&self, key: &str) -> KeyCheck {
        let digest = secrets::digest_hex(key);
        self.teams
            .values()
            .flat_map(|t| t.integrations.values().map(move |i| (t.team.id, i)))
            .find(|(_, i)| secrets::digests_eq(i.key_sha256.as_bytes(), digest.as_bytes()))
            .map_or(KeyCheck::default(), |(team, i)| KeyCheck {
                live: true,
                integration_id: Some(i.integration.id),
                team_id: Some(team),
            })
    }

    /// Everything, without a key or token.
    pub fn snapshot(&self) -> AdminState {
        AdminState {
            users: self.users.iter().cloned().collect(),
            teams: self
                .teams
                .values()
                .map(|t| AdminTeam {
                    id: t.team.id,
                    name: t.team.name.clone(),
                    external_id: t.team.external_id.clone(),
                    oidc: t.team.oidc.clone(),
                    open_incidents: t.open_incidents,
                    ladder: t.ladder.clone(),
                    switches: t.switches.values().cloned().collect(),
                    integrations: t
                        .integrations
                        .values()
                        .map(|i| AdminIntegration {
                            id: i.integration.id,
                            kind: i.integration.kind,
                            name: i.integration.name.clone(),
                            external_id: i.integration.external_id.clone(),
                            ingested: i.ingested,
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Level;

    fn new_team(name: &str, ext: &str) -> NewTeam {
        NewTeam {
            name: name.into(),
            external_id: ext.into(),
        }
    }

    fn created(o: TeamOutcome) -> Team {
        match o {
            TeamOutcome::Created(t) => t,
            TeamOutcome::Found(t) => panic!("found {t:?}"),
        }
    }

    /// Names and external ids are looked up, not scanned: a rename frees the old name, a
    /// delete frees both, and a store read back from its file knows its teams again.
    #[test]
    fn names_and_external_ids_follow_renames_deletes_and_reloads() {
        let mut s = Store::default();
        let a = created(s.create_team(new_team("A", "ns/a")).unwrap());
        s.rename_team(a.id, "A2".into()).unwrap();
        let b = created(s.create_team(new_team("A", "ns/b")).unwrap());
        assert_eq!(
            s.create_team(new_team("A2", "ns/c")),
            Err(ContractError::TeamNameTaken)
        );
        s.rename_team(b.id, "A".into()).unwrap();
        s.delete_team(a.id).unwrap();
        let c = created(s.create_team(new_team("A2", "ns/a")).unwrap());
        assert_ne!(c.id, a.id);

        let mut reloaded: Store =
            serde_json::from_value(serde_json::to_value(&s).unwrap()).unwrap();
        assert_eq!(reloaded, s);
        assert_eq!(
            reloaded.create_team(new_team("x", "ns/b")).unwrap(),
            TeamOutcome::Found(reloaded.get_team(b.id).unwrap())
        );
        assert_eq!(
            reloaded.create_team(new_team("A2", "ns/z")),
            Err(ContractError::TeamNameTaken)
        );
    }

    #[test]
    fn team_create_is_idempotent_by_external_id() {
        let mut s = Store::default();
        let t = created(s.create_team(new_team("A", "ns/a")).unwrap());
        assert_eq!(
            s.create_team(new_team("Other", "ns/a")).unwrap(),
            TeamOutcome::Found(t.clone())
        );
        assert_eq!(
            s.create_team(new_team("A", "ns/b")),
            Err(ContractError::TeamNameTaken)
        );
        let b = created(s.create_team(new_team("B", "ns/b")).unwrap());
        assert_eq!(
            s.rename_team(b.id, "A".into()),
            Err(ContractError::TeamNameTaken)
        );
        assert_eq!(s.rename_team(t.id, "A".into()).unwrap().name, "A");
    }

    #[test]
    fn delete_takes_children_and_respects_incidents() {
        let mut s = Store::default();
        let t = created(s.create_team(new_team("A", "ns/a")).unwrap());
        let IntegrationOutcome::Created(c) = s
            .create_integration(
                t.id,
                NewIntegration {
                    kind: Kind::Generic,
                    name: "g".into(),
                    external_id: "ns/g".into(),
                },
                "http://x",
            )
            .unwrap()
        else {
            panic!("not created")
        };
        assert!(s.key_check(&c.key).live);
        s.set_open_incidents(t.id, 1).unwrap();
        assert_eq!(s.delete_team(t.id), Err(ContractError::OpenIncidents));
        s.set_open_incidents(t.id, 0).unwrap();
        s.delete_team(t.id).unwrap();
        assert!(!s.key_check(&c.key).live);
        assert_eq!(s.get_team(t.id), Err(ContractError::NotFound(TEAM)));
    }

    /// The stand-in applies calls in place (`State::write`): each refusal must leave the
    /// store exactly as it was.
    #[test]
    fn a_refused_call_changes_nothing() {
        let mut s = Store::default();
        let a = created(s.create_team(new_team("A", "ns/a")).unwrap());
        let b = created(s.create_team(new_team("B", "ns/b")).unwrap());
        let body = |name: &str| SwitchBody {
            name: name.into(),
            matcher: "alertname=X".into(),
            timeout_seconds: 60,
            severity: "critical".into(),
        };
        let w = s.create_switch(a.id, body("w")).unwrap();
        s.create_switch(a.id, body("v")).unwrap();
        s.set_open_incidents(b.id, 1).unwrap();
        let before = s.clone();
        let ladder = Ladder {
            repeat_count: 1,
            fallback_topic: None,
            levels: vec![Level {
                timeout_seconds: 60,
                targets: vec![Target::User {
                    username: "nobody".into(),
                }],
            }],
        };
        let refusals: Vec<ContractError> = [
            s.create_team(new_team("A", "ns/c")).err(),
            s.create_team(new_team("", "ns/d")).err(),
            s.rename_team(b.id, "A".into()).err(),
            s.delete_team(b.id).err(),
            s.put_ladder(a.id, ladder).err(),
            s.create_switch(a.id, body("w")).err(),
            s.update_switch(a.id, w.id, body("v")).err(),
            s.update_switch(a.id, 999, body("x")).err(),
            s.delete_switch(a.id, 999).err(),
            s.delete_integration(a.id, 999).err(),
            s.rename_integration(a.id, 999, "n".into()).err(),
            s.set_open_incidents(999, 1).err(),
            s.ingest("generic", "no-such-token", "k").err(),
        ]
        .into_iter()
        .map(|e| e.expect("refused"))
        .collect();
        assert_eq!(refusals.len(), 13);
        assert_eq!(s, before);
    }

    #[test]
    fn ladder_resolves_usernames() {
        let mut s = Store::default();
        let t = created(s.create_team(new_team("A", "ns/a")).unwrap());
        let ladder = Ladder {
            repeat_count: 1,
            fallback_topic: None,
            levels: vec![Level {
                timeout_seconds: 60,
                targets: vec![
                    Target::Oncall,
                    Target::User {
                        username: "alice".into(),
                    },
                ],
            }],
        };
        assert_eq!(
            s.put_ladder(t.id, ladder.clone()),
            Err(ContractError::UnknownUser("alice".into()))
        );
        s.seed_users(["alice".to_owned()]);
        assert_eq!(s.put_ladder(t.id, ladder.clone()).unwrap(), ladder);
        assert_eq!(s.get_ladder(t.id).unwrap(), ladder);
        s.delete_ladder(t.id).unwrap();
        s.delete_ladder(t.id).unwrap();
        assert_eq!(s.get_ladder(t.id), Err(ContractError::NotFound(LADDER)));
    }
}
