//! The only place a TerdutTeam pass writes to its server: runs the calls of a
//! [`plan`](super::plan::plan) in order, says what each failure means for the pass, and
//! describes each applied call for its Event (DESIGN §12).

use crate::api::{ApiError, TeamCreate, TerdutClient};
use crate::key::ObjectKey;

use super::plan::{Call, Desired};
use super::status::Outcome;

/// Sends one call. `CreateTeam`'s answer is needed by the pass: it runs through [`create`].
pub async fn execute(client: &TerdutClient, call: &Call) -> Result<(), ApiError> {
    match call {
        Call::CreateTeam { name, external_id } => {
            client.create_team(name, external_id).await.map(done)
        }
        Call::RenameTeam { team, to, .. } => client.rename_team(*team, to).await.map(done),
        Call::SetOidcGroups { team, groups } => {
            client.set_oidc_groups(*team, groups).await.map(done)
        }
        Call::PutEscalation { team, ladder } => {
            client.put_escalation(*team, ladder).await.map(done)
        }
        Call::DeleteEscalation { team } => client.delete_escalation(*team).await,
        Call::CreateSwitch { team, spec } => client.create_switch(*team, spec).await.map(done),
        Call::UpdateSwitch { team, switch, spec } => {
            client.update_switch(*team, *switch, spec).await.map(done)
        }
        // A switch already gone is what the call wanted (DESIGN §5: 404 is success).
        Call::DeleteSwitch { team, switch, .. } => {
            client.delete_switch(*team, *switch).await.map(done)
        }
    }
}

fn done<T>(_: T) {}

/// The create-or-find call ([`plan::create_or_find`](super::plan::create_or_find)), answered
/// with the team it created (201) or found by `external_id` (200).
pub async fn create(client: &TerdutClient, desired: &Desired) -> Result<TeamCreate, ApiError> {
    client
        .create_team(&desired.name, &desired.external_id)
        .await
}

/// What a failed call means for the rest of the pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Only this call is refused until something outside the operator changes (a user signs
    /// up, another team gives up the name) or the spec does; the later calls are independent
    /// of it and still run. The first such outcome is the pass's Ready reason.
    Blocks(Outcome),
    /// The pass stops here: no team to work on, or the server is not answering as it should.
    /// Retried with backoff.
    Stops(Outcome),
}

impl Failure {
    pub fn outcome(&self) -> &Outcome {
        match self {
            Self::Blocks(o) | Self::Stops(o) => o,
        }
    }
}

/// Classifies the failure of `call` on `server`. No variant carries a secret: [`ApiError`]
/// never holds one.
pub fn classify(call: &Call, error: &ApiError, server: &ObjectKey) -> Failure {
    match error {
        ApiError::TeamNameTaken if call.is_create() => Failure::Stops(Outcome::TeamNameTaken),
        ApiError::TeamNameTaken => Failure::Blocks(Outcome::TeamNameTaken),
        ApiError::UnknownUser { username } => Failure::Blocks(Outcome::UnknownUser {
            username: username.clone(),
        }),
        ApiError::Invalid { message } if !call.is_create() => {
            Failure::Blocks(Outcome::InvalidSpec(format!(
                "TerdutServer {server} refused to {}: {message}",
                describe(call)
            )))
        }
        ApiError::Invalid { message } => Failure::Stops(Outcome::InvalidSpec(format!(
            "TerdutServer {server} refused to {}: {message}",
            describe(call)
        ))),
        other => Failure::Stops(Outcome::WaitingForServer(format!(
            "TerdutServer {server} could not {}: {other}; retrying",
            describe(call)
        ))),
    }
}

/// The call in words, for messages.
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

/// An Event about an applied call: reason, action and note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallEvent {
    pub reason: &'static str,
    pub action: &'static str,
    pub note: String,
}

/// The Event of an applied call other than `CreateTeam` (whose Event depends on whether it
/// created, found or recreated the team: the actor's to say). `drift`: the server had been
/// changed behind the operator's back, which the note says.
pub fn event_for(call: &Call, drift: bool) -> Option<CallEvent> {
    let (reason, action, note) = match call {
        Call::CreateTeam { .. } => return None,
        Call::RenameTeam { team, from, to } => (
            "TeamRenamed",
            "Rename",
            format!("renamed team {team} from {from:?} to {to:?}"),
        ),
        Call::SetOidcGroups { team, groups } => (
            "OidcGroupsApplied",
            "SetOidcGroups",
            format!(
                "set the OIDC groups of team {team}: members {}, owners {}",
                group(groups.member_group.as_deref()),
                group(groups.owner_group.as_deref())
            ),
        ),
        Call::PutEscalation { team, ladder } => (
            "EscalationApplied",
            "PutEscalation",
            format!(
                "applied the escalation ladder of team {team}: {} level(s), repeated {} time(s)",
                ladder.levels.len(),
                ladder.repeat_count
            ),
        ),
        Call::DeleteEscalation { team } => (
            "EscalationCleared",
            "DeleteEscalation",
            format!("cleared the escalation ladder of team {team}: spec.escalation is absent"),
        ),
        Call::CreateSwitch { team, spec } => (
            "SwitchCreated",
            "CreateSwitch",
            format!("created dead man's switch {:?} of team {team}", spec.name),
        ),
        Call::UpdateSwitch { team, spec, .. } => (
            "SwitchUpdated",
            "UpdateSwitch",
            format!("updated dead man's switch {:?} of team {team}", spec.name),
        ),
        Call::DeleteSwitch { team, name, .. } => (
            "SwitchDeleted",
            "DeleteSwitch",
            format!(
                "deleted dead man's switch {name:?} of team {team}: not in spec.deadmanSwitches"
            ),
        ),
    };
    let note = if drift {
        format!("{note} (it had been changed on the server; the TerdutTeam wins)")
    } else {
        note
    };
    Some(CallEvent {
        reason,
        action,
        note,
    })
}

fn group(g: Option<&str>) -> String {
    g.map_or_else(|| "none".to_owned(), |g| format!("{g:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Ladder, Level, OidcGroups, SwitchSpec, Target, TransientCause};

    fn server() -> ObjectKey {
        ObjectKey::new("oncall", "terdut")
    }

    fn create() -> Call {
        Call::CreateTeam {
            name: "Platform".into(),
            external_id: "ns/platform".into(),
        }
    }

    fn rename() -> Call {
        Call::RenameTeam {
            team: 4,
            from: "a".into(),
            to: "Platform".into(),
        }
    }

    fn put() -> Call {
        Call::PutEscalation {
            team: 4,
            ladder: Ladder {
                repeat_count: 1,
                fallback_topic: None,
                levels: vec![Level {
                    timeout_seconds: 60,
                    targets: vec![Target::Oncall],
                }],
            },
        }
    }

    #[test]
    fn name_conflicts_stop_a_create_but_only_block_a_rename() {
        assert_eq!(
            classify(&create(), &ApiError::TeamNameTaken, &server()),
            Failure::Stops(Outcome::TeamNameTaken)
        );
        assert_eq!(
            classify(&rename(), &ApiError::TeamNameTaken, &server()),
            Failure::Blocks(Outcome::TeamNameTaken)
        );
    }

    #[test]
    fn unknown_users_and_refused_bodies_block_the_call() {
        let e = ApiError::UnknownUser {
            username: "alice".into(),
        };
        assert_eq!(
            classify(&put(), &e, &server()),
            Failure::Blocks(Outcome::UnknownUser {
                username: "alice".into()
            })
        );
        let e = ApiError::Invalid {
            message: "levels[0] bad".into(),
        };
        let Failure::Blocks(Outcome::InvalidSpec(m)) = classify(&put(), &e, &server()) else {
            panic!("not InvalidSpec")
        };
        assert!(
            m.contains("oncall/terdut") && m.contains("levels[0] bad"),
            "{m}"
        );
    }

    #[test]
    fn everything_else_stops_the_pass_waiting_for_the_server() {
        for e in [
            ApiError::Transient {
                cause: TransientCause::Connect,
                detail: "refused".into(),
            },
            ApiError::Unauthorized,
            ApiError::NotFound,
            ApiError::SwitchNameTaken,
            ApiError::Unexpected {
                status: 418,
                code: None,
            },
        ] {
            let f = classify(&rename(), &e, &server());
            assert!(
                matches!(&f, Failure::Stops(Outcome::WaitingForServer(m)) if m.contains("rename team 4")),
                "{e:?} -> {f:?}"
            );
        }
    }

    #[test]
    fn every_applied_call_but_create_has_an_event() {
        let calls = [
            rename(),
            Call::SetOidcGroups {
                team: 4,
                groups: OidcGroups {
                    member_group: Some("m".into()),
                    owner_group: None,
                },
            },
            put(),
            Call::DeleteEscalation { team: 4 },
            Call::CreateSwitch {
                team: 4,
                spec: SwitchSpec {
                    name: "w".into(),
                    matcher: "a=b".into(),
                    timeout_seconds: 60,
                    severity: "info".into(),
                },
            },
            Call::UpdateSwitch {
                team: 4,
                switch: 9,
                spec: SwitchSpec {
                    name: "w".into(),
                    matcher: "a=b".into(),
                    timeout_seconds: 60,
                    severity: "info".into(),
                },
            },
            Call::DeleteSwitch {
                team: 4,
                switch: 9,
                name: "w".into(),
            },
        ];
        let reasons: Vec<_> = calls
            .iter()
            .map(|c| event_for(c, false).unwrap().reason)
            .collect();
        assert_eq!(
            reasons,
            [
                "TeamRenamed",
                "OidcGroupsApplied",
                "EscalationApplied",
                "EscalationCleared",
                "SwitchCreated",
                "SwitchUpdated",
                "SwitchDeleted"
            ]
        );
        assert_eq!(event_for(&create(), false), None);
        let e = event_for(&calls[1], true).unwrap();
        assert!(e.note.contains("members \"m\", owners none"), "{}", e.note);
        assert!(e.note.contains("changed on the server"), "{}", e.note);
    }
}
