//! What one TerdutTeam pass does on its server, decided without IO (docs/design.md §4.2, §5).
//!
//! Two pure functions:
//! - [`desired`]: the spec converted to wire types (durations through
//!   [`GoDuration::to_seconds`], the one place they become seconds). A spec the server could
//!   never accept is [`InvalidSpec`] before any call is made.
//! - [`plan`]: (desired, observed server state) -> the ordered calls of §4.2: create-or-find,
//!   rename, OIDC groups, the whole ladder in one PUT (or DELETE when the spec has none), then
//!   the switches diffed by name (create missing, update changed in place, delete unlisted).
//!   Nothing differs: no calls.
//!
//! **What is read to see drift** (the actor's observe step): `GET /teams/{id}`, `GET
//! .../escalation` and `GET .../deadman-switches` — three reads, no write. With `status.teamID`
//! known the team is read with a GET rather than the idempotent POST: both cost one round trip,
//! but the POST is a write (it would create the team if it had been deleted, before the
//! operator could notice and report it) and would count as one on the server. A GET that
//! answers 404, or a team with another `external_id` (the server's database was replaced and
//! the id reused), means the team is unknown: the plan is then the POST alone, and the actor
//! plans again with what the POST returned. For a team the POST just created (201) the actor
//! knows the ladder and switches are empty and skips those two reads.

use std::collections::BTreeMap;

use terdut_crds::v1alpha1::TerdutTeamSpec;
use terdut_crds::v1alpha1::team::TargetKind;

use crate::api::{Id, Ladder, Level, OidcGroups, Switch, SwitchSpec, Target, Team};
use crate::key::ObjectKey;

/// The team's identity on the server: `<namespace>/<name>` of its CR (docs/design.md §2).
pub fn external_id(key: &ObjectKey) -> String {
    format!("{}/{}", key.namespace, key.name)
}

/// What the server should hold for one TerdutTeam, in wire types.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Desired {
    pub external_id: String,
    pub name: String,
    pub oidc: OidcGroups,
    /// `None`: the team has no ladder (any on the server is deleted).
    pub ladder: Option<Ladder>,
    /// In spec order; names are unique (the CRD's list-map key).
    pub switches: Vec<SwitchSpec>,
}

/// The spec cannot be sent to the server as written; the message says which field and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidSpec(pub String);

/// The server's state of one team, as the actor read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    pub team: Team,
    /// `GET .../escalation`; `None` on 404 (no ladder).
    pub ladder: Option<Ladder>,
    /// `GET .../deadman-switches`.
    pub switches: Vec<Switch>,
}

/// One call to the server, in the order [`plan`] gives them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    /// `POST /teams`: creates the team, or finds the one with this `external_id`.
    CreateTeam {
        name: String,
        external_id: String,
    },
    RenameTeam {
        team: Id,
        from: String,
        to: String,
    },
    SetOidcGroups {
        team: Id,
        groups: OidcGroups,
    },
    PutEscalation {
        team: Id,
        ladder: Ladder,
    },
    DeleteEscalation {
        team: Id,
    },
    CreateSwitch {
        team: Id,
        spec: SwitchSpec,
    },
    UpdateSwitch {
        team: Id,
        switch: Id,
        spec: SwitchSpec,
    },
    DeleteSwitch {
        team: Id,
        switch: Id,
        name: String,
    },
}

impl Call {
    /// Every call but `CreateTeam` changes an existing team; `CreateTeam` answered 200 changes
    /// nothing, so the actor decides for it whether anything was written.
    pub fn is_create(&self) -> bool {
        matches!(self, Self::CreateTeam { .. })
    }
}

/// Converts the spec of the TerdutTeam `key` into what the server should hold.
pub fn desired(key: &ObjectKey, spec: &TerdutTeamSpec) -> Result<Desired, InvalidSpec> {
    let ladder = match &spec.escalation {
        None => None,
        Some(e) => {
            let repeat_count = u32::try_from(e.repeat_count).map_err(|_| {
                InvalidSpec(format!(
                    "spec.escalation.repeatCount is {}; it must not be negative",
                    e.repeat_count
                ))
            })?;
            let mut levels = Vec::with_capacity(e.levels.len());
            for (i, level) in e.levels.iter().enumerate() {
                let field = format!("spec.escalation.levels[{i}].timeout");
                let timeout_seconds = seconds(&field, &level.timeout)?;
                let mut targets = Vec::with_capacity(level.targets.len());
                for (j, t) in level.targets.iter().enumerate() {
                    targets.push(match (t.kind, &t.username) {
                        (TargetKind::Oncall, None) => Target::Oncall,
                        (TargetKind::User, Some(u)) => Target::User {
                            username: u.clone(),
                        },
                        _ => {
                            return Err(InvalidSpec(format!(
                                "spec.escalation.levels[{i}].targets[{j}]: a target of kind user \
                                 needs a username, and only kind user takes one"
                            )));
                        }
                    });
                }
                levels.push(Level {
                    timeout_seconds,
                    targets,
                });
            }
            if levels.is_empty() {
                return Err(InvalidSpec(
                    "spec.escalation.levels is empty; a ladder needs at least one level \
                     (remove spec.escalation for none)"
                        .into(),
                ));
            }
            Some(Ladder {
                repeat_count,
                fallback_topic: e.fallback_topic.clone(),
                levels,
            })
        }
    };
    let mut switches = Vec::with_capacity(spec.deadman_switches.len());
    let mut seen = BTreeMap::new();
    for (i, s) in spec.deadman_switches.iter().enumerate() {
        if let Some(first) = seen.insert(s.name.as_str(), i) {
            return Err(InvalidSpec(format!(
                "spec.deadmanSwitches[{first}] and [{i}] are both named {:?}; names are unique \
                 per team",
                s.name
            )));
        }
        switches.push(SwitchSpec {
            name: s.name.clone(),
            matcher: s.matcher.clone(),
            timeout_seconds: seconds(&format!("spec.deadmanSwitches[{i}].timeout"), &s.timeout)?,
            severity: s.severity.as_str().to_owned(),
        });
    }
    Ok(Desired {
        external_id: external_id(key),
        name: spec.display_name.clone(),
        oidc: OidcGroups {
            member_group: spec.oidc.member_group.clone(),
            owner_group: spec.oidc.owner_group.clone(),
        },
        ladder,
        switches,
    })
}

/// Wire seconds of a timeout; zero is refused here because no server accepts a timeout that
/// fires at once (the CRD's pattern admits `0`).
fn seconds(field: &str, d: &terdut_crds::GoDuration) -> Result<u64, InvalidSpec> {
    match d.to_seconds() {
        Ok(0) => Err(InvalidSpec(format!(
            "{field} is {d}; a timeout must be at least 1s"
        ))),
        Ok(s) => Ok(s),
        Err(e) => Err(InvalidSpec(format!("{field}: {e}"))),
    }
}

/// Step one of docs/design.md §4.2, the only call possible while no team is known: the idempotent
/// POST, answered with the team it created or the one this `external_id` already names.
pub fn create_or_find(desired: &Desired) -> Call {
    Call::CreateTeam {
        name: desired.name.clone(),
        external_id: desired.external_id.clone(),
    }
}

/// The calls that make the server hold `desired`, in docs/design.md §4.2's order.
///
/// `observed: None` (no team known): exactly `[CreateTeam]`, since nothing else can be decided
/// before the server answers with the team's id and state. Otherwise only what differs; the
/// team's `external_id` is the caller's to check (a team with another one is not this team).
pub fn plan(desired: &Desired, observed: Option<&Observed>) -> Vec<Call> {
    let Some(o) = observed else {
        return vec![create_or_find(desired)];
    };
    let team = o.team.id;
    let mut calls = vec![];
    if o.team.name != desired.name {
        calls.push(Call::RenameTeam {
            team,
            from: o.team.name.clone(),
            to: desired.name.clone(),
        });
    }
    if o.team.oidc != desired.oidc {
        calls.push(Call::SetOidcGroups {
            team,
            groups: desired.oidc.clone(),
        });
    }
    match (&desired.ladder, &o.ladder) {
        (Some(want), have) if have.as_ref() != Some(want) => calls.push(Call::PutEscalation {
            team,
            ladder: want.clone(),
        }),
        (None, Some(_)) => calls.push(Call::DeleteEscalation { team }),
        _ => {}
    }
    let have: BTreeMap<&str, &Switch> = o.switches.iter().map(|s| (s.name.as_str(), s)).collect();
    let mut updates = vec![];
    for want in &desired.switches {
        match have.get(want.name.as_str()) {
            None => calls.push(Call::CreateSwitch {
                team,
                spec: want.clone(),
            }),
            Some(s) if s.spec() != *want => updates.push(Call::UpdateSwitch {
                team,
                switch: s.id,
                spec: want.clone(),
            }),
            Some(_) => {}
        }
    }
    calls.extend(updates);
    for s in &o.switches {
        if !desired.switches.iter().any(|w| w.name == s.name) {
            calls.push(Call::DeleteSwitch {
                team,
                switch: s.id,
                name: s.name.clone(),
            });
        }
    }
    calls
}

/// The call in words, for messages, the plan in status and the last applied changes (never
/// a secret: a team holds none).
pub fn describe(call: &Call) -> String {
    match call {
        Call::CreateTeam { external_id, .. } => format!("create the team {external_id}"),
        Call::RenameTeam { team, to, .. } => format!("rename team {team} to {to:?}"),
        Call::SetOidcGroups { team, .. } => format!("set the OIDC groups of team {team}"),
        Call::PutEscalation { team, .. } => format!("apply the escalation ladder of team {team}"),
        Call::DeleteEscalation { team } => format!("clear the escalation ladder of team {team}"),
        Call::CreateSwitch { team, spec } => {
            format!("create dead man's switch {:?} of team {team}", spec.name)
        }
        Call::UpdateSwitch { team, spec, .. } => {
            format!("update dead man's switch {:?} of team {team}", spec.name)
        }
        Call::DeleteSwitch { team, name, .. } => {
            format!("delete dead man's switch {name:?} of team {team}")
        }
    }
}

/// The changes `calls` make, in words. `found_first`: the team's id is not known, so the
/// first call creates or finds it by `external_id`, and the rest of the spec follows once it
/// exists.
pub fn describe_all(calls: &[Call], found_first: bool) -> Vec<String> {
    let mut lines: Vec<String> = calls.iter().map(describe).collect();
    if found_first {
        lines.push(
            "then apply its OIDC groups, escalation ladder and dead man's switches as the spec \
             says"
                .into(),
        );
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use terdut_crds::v1alpha1::TerdutTeamSpec;

    fn key() -> ObjectKey {
        ObjectKey::new("team-ns", "platform")
    }

    fn spec(v: serde_json::Value) -> TerdutTeamSpec {
        let mut base = json!({"serverRef": {"name": "terdut"}, "displayName": "Platform"});
        for (k, val) in v.as_object().unwrap() {
            base[k] = val.clone();
        }
        serde_json::from_value(base).unwrap()
    }

    fn full() -> TerdutTeamSpec {
        spec(json!({
            "oidc": {"memberGroup": "members", "ownerGroup": "owners"},
            "escalation": {"repeatCount": 2, "fallbackTopic": "platform-oncall", "levels": [
                {"timeout": "5m", "targets": [{"kind": "oncall"}, {"kind": "user", "username": "alice"}]},
                {"timeout": "1h30m", "targets": [{"kind": "oncall"}]}]},
            "deadmanSwitches": [
                {"name": "watchdog", "matcher": "alertname=Watchdog", "timeout": "15m"},
                {"name": "beat", "matcher": "alertname=Beat", "timeout": "1500ms", "severity": "info"}],
        }))
    }

    fn want() -> Desired {
        desired(&key(), &full()).unwrap()
    }

    /// The server state that matches [`want`] exactly.
    fn converged() -> Observed {
        let d = want();
        Observed {
            team: Team {
                id: 42,
                name: d.name.clone(),
                external_id: d.external_id.clone(),
                oidc: d.oidc.clone(),
            },
            ladder: d.ladder.clone(),
            switches: d
                .switches
                .iter()
                .enumerate()
                .map(|(i, s)| Switch {
                    id: 100 + i as i64,
                    name: s.name.clone(),
                    matcher: s.matcher.clone(),
                    timeout_seconds: s.timeout_seconds,
                    severity: s.severity.clone(),
                })
                .collect(),
        }
    }

    #[test]
    fn converts_the_spec_to_wire_types() {
        let d = want();
        assert_eq!(d.external_id, "team-ns/platform");
        assert_eq!(d.name, "Platform");
        assert_eq!(d.oidc.member_group.as_deref(), Some("members"));
        let ladder = d.ladder.unwrap();
        assert_eq!(ladder.repeat_count, 2);
        assert_eq!(ladder.fallback_topic.as_deref(), Some("platform-oncall"));
        assert_eq!(ladder.levels[0].timeout_seconds, 300);
        assert_eq!(ladder.levels[1].timeout_seconds, 5400);
        assert_eq!(
            ladder.levels[0].targets,
            vec![
                Target::Oncall,
                Target::User {
                    username: "alice".into()
                }
            ]
        );
        assert_eq!(d.switches[0].timeout_seconds, 900);
        assert_eq!(d.switches[0].severity, "critical", "the CRD's default");
        assert_eq!(
            d.switches[1].timeout_seconds, 2,
            "sub-second remainders round up"
        );
        assert_eq!(d.switches[1].severity, "info");
    }

    #[test]
    fn no_team_known_plans_the_create_alone() {
        assert_eq!(
            plan(&want(), None),
            vec![Call::CreateTeam {
                name: "Platform".into(),
                external_id: "team-ns/platform".into()
            }]
        );
    }

    #[test]
    fn converged_state_plans_nothing() {
        assert_eq!(plan(&want(), Some(&converged())), vec![]);
        // Also for a spec without ladder or switches against a bare team.
        let bare = desired(&key(), &spec(json!({}))).unwrap();
        let o = Observed {
            team: Team {
                id: 1,
                name: "Platform".into(),
                external_id: "team-ns/platform".into(),
                oidc: OidcGroups::default(),
            },
            ladder: None,
            switches: vec![],
        };
        assert_eq!(plan(&bare, Some(&o)), vec![]);
    }

    #[test]
    fn a_freshly_created_team_gets_everything_in_design_order() {
        let o = Observed {
            team: Team {
                id: 42,
                name: "Platform".into(),
                external_id: "team-ns/platform".into(),
                oidc: OidcGroups::default(),
            },
            ladder: None,
            switches: vec![],
        };
        let calls = plan(&want(), Some(&o));
        let kinds: Vec<&str> = calls
            .iter()
            .map(|c| match c {
                Call::SetOidcGroups { .. } => "oidc",
                Call::PutEscalation { .. } => "ladder",
                Call::CreateSwitch { .. } => "create",
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(kinds, ["oidc", "ladder", "create", "create"]);
    }

    #[test]
    fn rename_when_the_name_differs() {
        let mut o = converged();
        o.team.name = "Renamed on the server".into();
        assert_eq!(
            plan(&want(), Some(&o)),
            vec![Call::RenameTeam {
                team: 42,
                from: "Renamed on the server".into(),
                to: "Platform".into()
            }]
        );
    }

    #[test]
    fn oidc_groups_when_either_differs_and_none_clears() {
        let mut o = converged();
        o.team.oidc.owner_group = None;
        assert_eq!(
            plan(&want(), Some(&o)),
            vec![Call::SetOidcGroups {
                team: 42,
                groups: want().oidc
            }]
        );
        let no_groups = desired(&key(), &spec(json!({}))).unwrap();
        let mut o = converged();
        o.ladder = None;
        o.switches.clear();
        assert_eq!(
            plan(&no_groups, Some(&o)),
            vec![Call::SetOidcGroups {
                team: 42,
                groups: OidcGroups::default()
            }]
        );
    }

    #[test]
    fn the_whole_ladder_is_put_when_any_part_differs() {
        let changes: [fn(&mut Ladder); 5] = [
            |l| l.repeat_count = 3,
            |l| l.fallback_topic = None,
            |l| l.levels[1].timeout_seconds = 60,
            |l| {
                l.levels[0].targets.pop();
            },
            |l| l.levels.truncate(1),
        ];
        for change in changes {
            let mut o = converged();
            change(o.ladder.as_mut().unwrap());
            assert_eq!(
                plan(&want(), Some(&o)),
                vec![Call::PutEscalation {
                    team: 42,
                    ladder: want().ladder.unwrap()
                }]
            );
        }
        let mut o = converged();
        o.ladder = None;
        assert!(matches!(
            plan(&want(), Some(&o))[..],
            [Call::PutEscalation { .. }]
        ));
    }

    #[test]
    fn an_absent_escalation_deletes_the_servers_ladder() {
        let mut s = full();
        s.escalation = None;
        let d = desired(&key(), &s).unwrap();
        assert_eq!(
            plan(&d, Some(&converged())),
            vec![Call::DeleteEscalation { team: 42 }]
        );
        let mut o = converged();
        o.ladder = None;
        assert_eq!(plan(&d, Some(&o)), vec![], "nothing to clear");
    }

    #[test]
    fn switches_are_diffed_by_name() {
        let mut o = converged();
        // watchdog changed on the server, beat deleted there, an unlisted one added there.
        o.switches[0].matcher = "alertname=Other".into();
        o.switches.remove(1);
        o.switches.push(Switch {
            id: 7,
            name: "stray".into(),
            matcher: "a=b".into(),
            timeout_seconds: 60,
            severity: "warning".into(),
        });
        let d = want();
        assert_eq!(
            plan(&d, Some(&o)),
            vec![
                Call::CreateSwitch {
                    team: 42,
                    spec: d.switches[1].clone()
                },
                Call::UpdateSwitch {
                    team: 42,
                    switch: 100,
                    spec: d.switches[0].clone()
                },
                Call::DeleteSwitch {
                    team: 42,
                    switch: 7,
                    name: "stray".into()
                },
            ]
        );
    }

    #[test]
    fn every_switch_field_is_compared() {
        let changes: [fn(&mut Switch); 3] = [
            |s| s.timeout_seconds += 1,
            |s| s.severity = "warning".into(),
            |s| s.matcher.push('x'),
        ];
        for change in changes {
            let mut o = converged();
            change(&mut o.switches[0]);
            assert!(matches!(
                plan(&want(), Some(&o))[..],
                [Call::UpdateSwitch { switch: 100, .. }]
            ));
        }
    }

    #[test]
    fn removing_every_switch_deletes_them_all() {
        let mut s = full();
        s.deadman_switches.clear();
        let d = desired(&key(), &s).unwrap();
        let calls = plan(&d, Some(&converged()));
        assert_eq!(
            calls,
            vec![
                Call::DeleteSwitch {
                    team: 42,
                    switch: 100,
                    name: "watchdog".into()
                },
                Call::DeleteSwitch {
                    team: 42,
                    switch: 101,
                    name: "beat".into()
                },
            ]
        );
    }

    #[test]
    fn everything_drifted_is_put_back_in_order() {
        let mut o = converged();
        o.team.name = "x".into();
        o.team.oidc = OidcGroups::default();
        o.ladder = None;
        o.switches.clear();
        let calls = plan(&want(), Some(&o));
        assert!(matches!(
            calls[..],
            [
                Call::RenameTeam { .. },
                Call::SetOidcGroups { .. },
                Call::PutEscalation { .. },
                Call::CreateSwitch { .. },
                Call::CreateSwitch { .. },
            ]
        ));
        assert!(calls.iter().all(|c| !c.is_create()));
    }

    #[test]
    fn invalid_durations_are_invalid_spec() {
        let over = spec(json!({"escalation": {"levels": [
            {"timeout": "3000000h", "targets": [{"kind": "oncall"}]}]}}));
        let e = desired(&key(), &over).unwrap_err();
        assert!(
            e.0.contains("spec.escalation.levels[0].timeout") && e.0.contains("too large"),
            "{e}"
        );
        let zero = spec(json!({"deadmanSwitches": [
            {"name": "w", "matcher": "a=b", "timeout": "0"}]}));
        let e = desired(&key(), &zero).unwrap_err();
        assert!(
            e.0.contains("spec.deadmanSwitches[0].timeout") && e.0.contains("at least 1s"),
            "{e}"
        );
        let syntax = spec(json!({"deadmanSwitches": [
            {"name": "w", "matcher": "a=b", "timeout": "5 minutes"}]}));
        assert!(desired(&key(), &syntax).is_err());
    }

    #[test]
    fn what_admission_should_have_refused_is_invalid_spec_too() {
        let negative = spec(json!({"escalation": {"repeatCount": -1, "levels": [
            {"timeout": "5m", "targets": [{"kind": "oncall"}]}]}}));
        assert!(
            desired(&key(), &negative)
                .unwrap_err()
                .0
                .contains("repeatCount")
        );
        let no_levels = spec(json!({"escalation": {"levels": []}}));
        assert!(
            desired(&key(), &no_levels)
                .unwrap_err()
                .0
                .contains("levels")
        );
        let user_without_name = spec(json!({"escalation": {"levels": [
            {"timeout": "5m", "targets": [{"kind": "user"}]}]}}));
        assert!(
            desired(&key(), &user_without_name)
                .unwrap_err()
                .0
                .contains("targets[0]")
        );
        let dup = spec(json!({"deadmanSwitches": [
            {"name": "w", "matcher": "a=b", "timeout": "1m"},
            {"name": "w", "matcher": "c=d", "timeout": "1m"}]}));
        assert!(desired(&key(), &dup).unwrap_err().0.contains("both named"));
    }
}
