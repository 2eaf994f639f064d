//! A TerdutTeam being deleted (docs/design.md §5 "Finalizers", §4.6 last bullet): DELETE the team
//! on the server, then release the finalizer. PURE: [`step`] is the plan, from what the pass
//! has learnt so far ([`Facts`]); `cleanup.rs` answers its [`Question`]s and the pipeline driver
//! carries it out (`pipeline::deletion`).
//!
//! - 404 is success; 409 open incidents keeps the finalizer, publishes a Warning and retries
//!   with backoff, as does any other failure: the finalizer is never removed early.
//! - `deletionPolicy: Orphan` leaves the team on the server, unless the server owner's
//!   policy for the namespace forbids it (docs/design.md §4.6 "Policies"): then the team is
//!   deleted there like any other, with an `OrphanNotAllowed` Warning, so a tenant cannot
//!   squat a display name by orphaning a team and deleting the object.
//! - Consent is not asked: "consent gates what the operator starts acting on, not whether it
//!   may clean up after itself".
//! - **A TerdutServer that no longer exists** (absent from the cache and confirmed by a live
//!   GET) releases the finalizer at once with a Warning Event. Deleting a TerdutServer takes its
//!   Deployment, Service and key with it, and the operator never touches its database
//!   (docs/design.md §1, §8): there is no API left to call and nothing the operator could ever
//!   clean up later, so waiting would only leave the TerdutTeam stuck forever (as
//!   grafana-operator's users met with its finalizers). A TerdutServer that exists but does not
//!   answer keeps the finalizer and is retried.
//! - **Paused** teams are deleted all the same (docs/configuration.md: "deletion still cleans
//!   up"): the pause stops the operator from changing a team that exists, but a deleted
//!   TerdutTeam that waited for an annotation on an object being deleted would be stuck for
//!   anyone who did not know, and deleting it says what the user wants.
//! - **Identity, not hints**: `status.teamID` (and the id the actor remembers) is deleted only
//!   once the server confirms that team's `external_id` is this object's: a tenant can write
//!   the status of their own TerdutTeam, and must not get another tenant's team deleted.
//! - **`deletionPolicy: Orphan` leaves the team, not its alert sources' keys.** Deleting a team
//!   on the server deletes its integrations; orphaning it does not. So an orphaned team waits
//!   (`DeletionBlocked`, naming them) while alert sources of it that delete their integration
//!   (`deletionPolicy: Delete`) still hold their finalizer: they need the team, its id and its
//!   server to delete the integration, and would otherwise be released on the assumption that
//!   the integration went with the team while its webhook key kept working.
//! - **Made by this object** (ADR 0013): a team is looked up and deleted only when the
//!   operator's records say it sent a create call for this object (or the object is older than
//!   the records, ADR 0007's rule). A TerdutTeam that never had one created (a self-added
//!   finalizer, a reused name whose team was declined) holds nothing on the server: its
//!   finalizer is released without any call, and a team with its `external_id` is left alone.
//! - With no confirmed id (lost status, a crash between the finalizer and the create, a forged
//!   id) the team is found with the idempotent POST. The contract has no lookup by
//!   `external_id`; if no team of ours exists the POST creates one, which the DELETE right
//!   after removes again, and a 409 `team_name_taken` proves none exists (a known
//!   `external_id` is answered 200 before names are compared). That POST is a create call: a
//!   server that does not (or no longer) accepts the namespace never gets one (a tenant could
//!   otherwise create rows on it, and learn which display names exist there, by deleting a
//!   refused TerdutTeam carrying a self-added finalizer), and neither does a team the server
//!   owner's policy does not admit (its display name is never created, not even to be deleted
//!   again). Then the finalizer is released with a `TeamLeftOnServer` Warning saying what may
//!   be left there.

use std::sync::Arc;

use terdut_crds::v1alpha1::{DeletionPolicy, TerdutTeam};

use super::TeamMemory;
use super::plan::external_id;
use super::status::{DesiredStatus, Outcome, StatusInputs, desired_status};
use crate::api::{ApiError, Deletion as Removed, Id, TerdutClient};
use crate::consent::Consent;
use crate::key::ObjectKey;
use crate::pipeline::{Next, Note, Step, Then};
use crate::server::observe::team_server_key;
use crate::team::observe::Uncached;
use crate::tenancy::decide::Admission;
use crate::write::finalizer;

/// What a deletion pass asks, in the order [`step`] asks it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Question {
    /// The deletion policy in force, and which server policy overrode the spec's, if one did
    /// (the caches).
    Policy,
    /// The alert sources of this team that will still delete their integration (a list).
    Sources,
    /// Whether the caches show the server, and if not what a live look finds.
    Server,
    /// The server's client and its consent for this namespace (the parent).
    Access,
    /// Whether the object still exists, same uid, with the finalizer (read live).
    StillOurs,
    /// Whether the server owner's policy admits the team (the caches).
    Admission,
    /// Whether the records say a create call was made for this object (ADR 0013).
    Made,
    /// The id of the team on the server: `known` confirmed by a GET, else found by the
    /// create-or-find POST when `accepted`.
    Lookup { known: Option<Id>, accepted: bool },
    /// DELETE the team on the server.
    Delete(Id),
}

/// What a deletion pass has learnt so far (`None`: not asked yet).
#[derive(Default)]
pub struct Facts {
    pub policy: Option<(DeletionPolicy, Option<String>)>,
    /// [`deleting_their_integrations`].
    pub sources: Option<Vec<String>>,
    /// `Some(None)`: the caches show the server.
    pub server: Option<Option<Uncached>>,
    pub access: Option<Result<(Arc<TerdutClient>, Consent), Outcome>>,
    pub still_ours: Option<bool>,
    pub admission: Option<Admission>,
    pub made: Option<bool>,
    /// The lookup, or why it failed.
    pub lookup: Option<Result<Ours, String>>,
    pub deleted: Option<Result<Removed, ApiError>>,
}

impl std::fmt::Debug for Facts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Facts")
            .field("policy", &self.policy)
            .field("sources", &self.sources)
            .field("server", &self.server)
            .field("still_ours", &self.still_ours)
            .field("made", &self.made)
            .field("lookup", &self.lookup)
            .field("deleted", &self.deleted)
            .finish_non_exhaustive()
    }
}

/// PURE: the next step of deleting `team` (which carries the finalizer), given `facts`.
pub fn step(
    team: &TerdutTeam,
    memory: &TeamMemory,
    facts: &Facts,
) -> Step<Question, DesiredStatus> {
    let mut notes = Vec::new();
    let then = then(team, memory, facts, &mut notes);
    Step { notes, then }
}

fn then(
    team: &TerdutTeam,
    memory: &TeamMemory,
    f: &Facts,
    notes: &mut Vec<Note>,
) -> Then<Question, DesiredStatus> {
    let key = ObjectKey::of(team);
    let server = team_server_key(team);
    let recorded = || {
        team.status
            .as_ref()
            .and_then(|s| s.team_id)
            .map(|id| format!(" (recorded as team {id})"))
            .unwrap_or_default()
    };
    // docs/design.md §5 "Deletion policy": no call to the server at all, unless the server
    // owner's policy forbids leaving the team behind (§4.6 "Policies"): then it is deleted.
    let Some((policy, decided_by)) = &f.policy else {
        return Then::Ask(Question::Policy);
    };
    if let Some(by) = decided_by {
        notes.push(Note::warn_once(
            "OrphanNotAllowed",
            format!(
                "spec.deletionPolicy is Orphan, which policy {by:?} of TerdutServer {server} \
                 (spec.allowedTeams.policies) does not allow: the team is deleted on the server"
            ),
        ));
    }
    if *policy == DeletionPolicy::Orphan {
        let Some(waiting) = &f.sources else {
            return Then::Ask(Question::Sources);
        };
        if !waiting.is_empty() {
            let why = orphan_waits(&server, waiting);
            notes.push(Note::warn_once("DeletionBlocked", why.clone()));
            return Then::Wait {
                desired: Some(desired_status(
                    &Outcome::DeletionBlocked(why),
                    &StatusInputs {
                        server: &server,
                        display_name: &team.spec.display_name,
                        generation: team.metadata.generation,
                        team_id: team.status.as_ref().and_then(|s| s.team_id),
                    },
                )),
                next: Next::Wait,
            };
        }
        return Then::Release {
            after: vec![Note::normal(
                "Orphaned",
                format!(
                    "spec.deletionPolicy is Orphan: the team on TerdutServer {server}{} was \
                     left as it is, with its ladder, switches and history; released the finalizer",
                    recorded()
                ),
            )],
            log: Some("orphaned on the server (deletionPolicy Orphan)".into()),
        };
    }
    let Some(uncached) = &f.server else {
        return Then::Ask(Question::Server);
    };
    match uncached {
        Some(Uncached::Absent) => {
            notes.push(Note::warning(
                "ServerGone",
                format!(
                    "TerdutServer {server} no longer exists: released the finalizer without \
                     deleting the team on it (with the server gone there is no API to call, \
                     and the operator never touches a server's database)"
                ),
            ));
            return Then::release(vec![]);
        }
        // Exists, but another instance's (or none's): nobody could delete the team from
        // here, and waiting would keep the object (and its namespace) for good.
        Some(Uncached::NotMine(why)) => {
            let Some(made) = f.made else {
                return Then::Ask(Question::Made);
            };
            if !made {
                return Then::Release {
                    after: vec![],
                    log: Some(format!(
                        "server not reconciled here ({why}), and no team was ever created for \
                         this object"
                    )),
                };
            }
            notes.push(Note::warning(
                "TeamLeftOnServer",
                format!(
                    "TerdutServer {server} is not reconciled by this operator instance \
                     ({why}), so its team{} cannot be deleted from here, and an \
                     instance that reconciles that server does not select this \
                     TerdutTeam; released the finalizer so the deletion can finish. \
                     Delete the team on the server by hand if it should go (next time, \
                     label the TerdutTeam as its TerdutServer is labelled first)",
                    recorded()
                ),
            ));
            return Then::release(vec![]);
        }
        // The cache lags behind a server created a moment ago.
        Some(Uncached::NotYetSeen) => return Then::wait(),
        None => {}
    }
    let failed = |why: String| {
        Note::warn_once(
            "TeamDeleteFailed",
            format!(
                "could not delete the team on TerdutServer {server} yet: {why}; the finalizer \
                 stays and the delete is retried with backoff"
            ),
        )
    };
    let Some(access) = &f.access else {
        return Then::Ask(Question::Access);
    };
    let consent = match access {
        Ok((_, consent)) => consent,
        Err(outcome) => {
            notes.push(failed(refusal(outcome, team, &server)));
            return Then::wait();
        }
    };
    let Some(still_ours) = f.still_ours else {
        return Then::Ask(Question::StillOurs);
    };
    if !still_ours {
        return Then::Gone;
    }
    let known = team
        .status
        .as_ref()
        .and_then(|s| s.team_id)
        .or(memory.team_id);
    // The lookup by external_id is a create call: made only for a team the server accepts
    // and its owner's policy admits, so a refused display name is never created on the server,
    // not even to be deleted again (docs/design.md §4.6 "Policies").
    let refused = if *consent != Consent::Allowed {
        Some(format!(
            "TerdutServer {server} does not accept TerdutTeams from namespace {}",
            key.namespace
        ))
    } else {
        let Some(admission) = &f.admission else {
            return Then::Ask(Question::Admission);
        };
        match admission {
            Admission::Admitted => None,
            Admission::NotAllowed(why) | Admission::OverLimit(why) => Some(why.clone()),
            // Still counting: which teams the limit admits is known in a moment.
            Admission::Uncounted => return Then::wait(),
        }
    };
    let accepted = refused.is_none();
    let Some(made) = f.made else {
        return Then::Ask(Question::Made);
    };
    let looked_up = if made {
        let Some(lookup) = &f.lookup else {
            return Then::Ask(Question::Lookup { known, accepted });
        };
        lookup.clone()
    } else if accepted {
        return Then::Release {
            after: vec![],
            log: Some(
                "no create call was ever recorded for this object; nothing of it on the server"
                    .into(),
            ),
        };
    } else {
        Ok(Ours::NotLookedUp)
    };
    let id = match looked_up {
        Ok(Ours::Id(id)) => id,
        Ok(Ours::NoneExists) => return Then::release(vec![]),
        Ok(Ours::NotLookedUp) => {
            notes.push(Note::warning(
                "TeamLeftOnServer",
                format!(
                    "{} and no team id it confirms as {} is known, so nothing was looked up or \
                     deleted there (the only lookup by external_id is a create call, which a \
                     team the server does not accept never makes); released the finalizer. If \
                     such a team exists on the server, delete it there by hand",
                    refused.unwrap_or_default(),
                    external_id(&key)
                ),
            ));
            return Then::release(vec![]);
        }
        Err(why) => {
            notes.push(failed(why));
            return Then::wait();
        }
    };
    let Some(deleted) = &f.deleted else {
        return Then::Ask(Question::Delete(id));
    };
    match deleted {
        Ok(Removed::Deleted) => notes.push(Note::normal(
            "TeamDeleted",
            format!("deleted team {id} on TerdutServer {server}"),
        )),
        Ok(Removed::AlreadyGone) => {}
        Err(ApiError::OpenIncidents) => {
            notes.push(Note::warn_once(
                "TeamDeleteRefused",
                format!(
                    "TerdutServer {server} refuses to delete team {id} while it has open \
                     incidents; the finalizer stays and the delete is retried with backoff \
                     until they are resolved"
                ),
            ));
            return Then::wait();
        }
        Err(e) => {
            notes.push(failed(e.to_string()));
            return Then::wait();
        }
    }
    Then::release(vec![])
}

/// PURE: the alert sources (of `sources`, one namespace's) of the team `team` that still hold
/// their finalizer and will delete their integration: their names, sorted.
pub fn deleting_their_integrations(
    team: &str,
    sources: &[terdut_crds::v1alpha1::TerdutAlertSource],
) -> Vec<String> {
    let mut names: Vec<String> = sources
        .iter()
        .filter(|s| s.spec.team_ref.name == team)
        .filter(|s| s.spec.deletion_policy == DeletionPolicy::Delete)
        .filter(|s| finalizer::has(*s, crate::source::names::FINALIZER))
        .map(kube::ResourceExt::name_any)
        .collect();
    names.sort();
    names
}

/// The message of an orphaned team waiting for `sources`.
fn orphan_waits(server: &ObjectKey, sources: &[String]) -> String {
    format!(
        "spec.deletionPolicy is Orphan, so the team stays on TerdutServer {server}, but deleting \
         it there is what would delete the integrations of its alert sources: TerdutAlertSource \
         {} still {} a live integration with a working webhook key on it. The finalizer stays \
         until {} deleted (each deletes its integration first) or set to deletionPolicy: Orphan",
        sources.join(", "),
        if sources.len() == 1 { "has" } else { "have" },
        if sources.len() == 1 {
            "it is"
        } else {
            "they are"
        },
    )
}

/// What the lookup of the team by its identity found (`cleanup::ours`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ours {
    /// The server confirms this id is the team's `external_id`.
    Id(Id),
    /// No team with this `external_id` exists (the POST met the name of another team).
    NoneExists,
    /// No known id is confirmed, and the server does not accept this namespace, so the POST
    /// that would find the team by `external_id` was not made.
    NotLookedUp,
}

/// The Ready message an access refusal would have, for the Warning's note.
fn refusal(outcome: &Outcome, team: &TerdutTeam, server: &ObjectKey) -> String {
    let status = desired_status(
        outcome,
        &StatusInputs {
            server,
            display_name: &team.spec.display_name,
            generation: team.metadata.generation,
            team_id: None,
        },
    );
    status.ready.map(|c| c.message).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(name: &str, team: &str, policy: &str, finalizers: &[&str]) -> TerdutAlertSource {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutAlertSource",
            "metadata": {"name": name, "namespace": "ns", "finalizers": finalizers},
            "spec": {"teamRef": {"name": team}, "kind": "generic", "name": name,
                     "deletionPolicy": policy},
        }))
        .unwrap()
    }

    use crate::api::{ClientConfig, OperatorKey};
    use terdut_crds::v1alpha1::TerdutAlertSource;

    fn team(policy: &str) -> TerdutTeam {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutTeam",
            "metadata": {"name": "platform", "namespace": "ns", "uid": "u1",
                         "finalizers": [super::super::FINALIZER]},
            "spec": {"serverRef": {"name": "terdut", "namespace": "oncall"},
                     "displayName": "Platform", "deletionPolicy": policy},
            "status": {"teamID": 7},
        }))
        .unwrap()
    }

    fn client() -> Arc<TerdutClient> {
        let config = ClientConfig::new("https://terdut.example", OperatorKey::from("k"));
        Arc::new(TerdutClient::new(config).unwrap())
    }

    /// Answers `facts` until the plan stops asking; the questions, in order, and the end.
    fn run(
        team: &TerdutTeam,
        memory: &TeamMemory,
        mut answer: impl FnMut(&Question, &mut Facts),
    ) -> (Vec<Question>, Step<Question, DesiredStatus>) {
        let mut facts = Facts::default();
        let mut asked = vec![];
        loop {
            let s = step(team, memory, &facts);
            match &s.then {
                Then::Ask(q) => {
                    asked.push(q.clone());
                    answer(q, &mut facts);
                }
                _ => return (asked, s),
            }
        }
    }

    /// The answers of a reachable server that accepts the team and its namespace.
    fn reachable(q: &Question, f: &mut Facts, deleted: fn() -> Result<Removed, ApiError>) {
        match q {
            Question::Policy => f.policy = Some((DeletionPolicy::Delete, None)),
            Question::Server => f.server = Some(None),
            Question::Access => f.access = Some(Ok((client(), Consent::Allowed))),
            Question::StillOurs => f.still_ours = Some(true),
            Question::Admission => f.admission = Some(Admission::Admitted),
            Question::Made => f.made = Some(true),
            Question::Lookup { .. } => f.lookup = Some(Ok(Ours::Id(7))),
            Question::Delete(_) => f.deleted = Some(deleted()),
            Question::Sources => f.sources = Some(vec![]),
        }
    }

    fn reasons(notes: &[Note]) -> Vec<&str> {
        notes.iter().map(|n| n.reason).collect()
    }

    #[test]
    fn a_team_of_ours_is_looked_up_by_its_known_id_then_deleted_then_released() {
        let memory = TeamMemory::default();
        let (asked, s) = run(&team("Delete"), &memory, |q, f| {
            reachable(q, f, || Ok(Removed::Deleted))
        });
        assert_eq!(
            asked,
            [
                Question::Policy,
                Question::Server,
                Question::Access,
                Question::StillOurs,
                Question::Admission,
                Question::Made,
                Question::Lookup {
                    known: Some(7),
                    accepted: true
                },
                Question::Delete(7),
            ]
        );
        assert_eq!(reasons(&s.notes), ["TeamDeleted"]);
        assert!(matches!(s.then, Then::Release { .. }));
    }

    #[test]
    fn open_incidents_keep_the_finalizer_with_one_warning_per_streak() {
        let (_, s) = run(&team("Delete"), &TeamMemory::default(), |q, f| {
            reachable(q, f, || Err(ApiError::OpenIncidents))
        });
        assert_eq!(reasons(&s.notes), ["TeamDeleteRefused"]);
        assert!(s.notes[0].once);
        assert_eq!(s.then, Then::wait());
    }

    #[test]
    fn an_orphaned_team_is_released_without_a_server_call_unless_sources_wait() {
        let orphan = |sources: Vec<String>| {
            move |q: &Question, f: &mut Facts| match q {
                Question::Policy => f.policy = Some((DeletionPolicy::Orphan, None)),
                Question::Sources => f.sources = Some(sources.clone()),
                other => panic!("asked {other:?}"),
            }
        };
        let (asked, s) = run(&team("Orphan"), &TeamMemory::default(), orphan(vec![]));
        assert_eq!(asked, [Question::Policy, Question::Sources]);
        let Then::Release { after, .. } = &s.then else {
            panic!("{:?}", s.then)
        };
        assert_eq!(reasons(after), ["Orphaned"]);
        let (_, s) = run(
            &team("Orphan"),
            &TeamMemory::default(),
            orphan(vec!["a".into()]),
        );
        assert_eq!(reasons(&s.notes), ["DeletionBlocked"]);
        assert!(matches!(
            s.then,
            Then::Wait {
                desired: Some(_),
                next: Next::Wait
            }
        ));
    }

    #[test]
    fn an_orphan_the_server_policy_forbids_is_deleted_and_says_so_first() {
        let (asked, s) = run(&team("Orphan"), &TeamMemory::default(), |q, f| match q {
            Question::Policy => {
                f.policy = Some((DeletionPolicy::Delete, Some("strict".into())));
            }
            q => reachable(q, f, || Ok(Removed::AlreadyGone)),
        });
        assert!(!asked.contains(&Question::Sources));
        assert_eq!(reasons(&s.notes), ["OrphanNotAllowed"]);
        assert!(matches!(s.then, Then::Release { .. }));
    }

    #[test]
    fn a_gone_server_releases_with_a_warning_before_the_release() {
        let (asked, s) = run(&team("Delete"), &TeamMemory::default(), |q, f| match q {
            Question::Server => f.server = Some(Some(Uncached::Absent)),
            q => reachable(q, f, || Ok(Removed::Deleted)),
        });
        assert_eq!(asked, [Question::Policy, Question::Server]);
        assert_eq!(reasons(&s.notes), ["ServerGone"]);
        assert_eq!(s.then, Then::release(vec![]));
    }

    #[test]
    fn a_team_never_made_is_released_without_a_lookup_and_a_refused_one_says_what_may_be_left() {
        let (asked, s) = run(&team("Delete"), &TeamMemory::default(), |q, f| match q {
            Question::Made => f.made = Some(false),
            q => reachable(q, f, || Ok(Removed::Deleted)),
        });
        assert!(!asked.iter().any(|q| matches!(q, Question::Lookup { .. })));
        assert!(s.notes.is_empty());
        assert!(matches!(s.then, Then::Release { log: Some(_), .. }));
        // Refused consent: no admission asked, no lookup made, a TeamLeftOnServer Warning.
        let (asked, s) = run(&team("Delete"), &TeamMemory::default(), |q, f| match q {
            Question::Access => {
                f.access = Some(Ok((client(), Consent::Refused("no".into()))));
            }
            Question::Made => f.made = Some(false),
            q => reachable(q, f, || Ok(Removed::Deleted)),
        });
        assert!(!asked.contains(&Question::Admission));
        assert_eq!(reasons(&s.notes), ["TeamLeftOnServer"]);
        assert!(
            s.notes[0]
                .message
                .contains("does not accept TerdutTeams from namespace ns")
        );
    }

    #[test]
    fn a_stale_copy_holds_nothing_and_an_unreachable_server_waits() {
        let (_, s) = run(&team("Delete"), &TeamMemory::default(), |q, f| match q {
            Question::StillOurs => f.still_ours = Some(false),
            q => reachable(q, f, || Ok(Removed::Deleted)),
        });
        assert_eq!(s.then, Then::Gone);
        let (_, s) = run(&team("Delete"), &TeamMemory::default(), |q, f| match q {
            Question::Access => {
                f.access = Some(Err(Outcome::WaitingForServer("no key yet".into())));
            }
            q => reachable(q, f, || Ok(Removed::Deleted)),
        });
        assert_eq!(reasons(&s.notes), ["TeamDeleteFailed"]);
        assert!(
            s.notes[0].message.contains("no key yet"),
            "{}",
            s.notes[0].message
        );
        assert_eq!(s.then, Then::wait());
    }

    #[test]
    fn the_remembered_id_is_looked_up_when_the_status_has_none() {
        let mut t = team("Delete");
        t.status = None;
        let memory = TeamMemory {
            team_id: Some(9),
            ..TeamMemory::default()
        };
        let (asked, _) = run(&t, &memory, |q, f| reachable(q, f, || Ok(Removed::Deleted)));
        assert!(asked.contains(&Question::Lookup {
            known: Some(9),
            accepted: true
        }));
    }

    #[test]
    fn an_orphaned_team_waits_for_the_sources_that_delete_their_integration() {
        let f = crate::source::names::FINALIZER;
        let sources = [
            source("b", "payments", "Delete", &[f]),
            source("a", "payments", "Delete", &[f, "other.io/x"]),
            // Leaves its integration on purpose.
            source("kept", "payments", "Orphan", &[f]),
            // Already released (or never had one): nothing of it left to delete.
            source("done", "payments", "Delete", &[]),
            // Another team's.
            source("other", "billing", "Delete", &[f]),
        ];
        assert_eq!(
            deleting_their_integrations("payments", &sources),
            ["a", "b"]
        );
        assert!(deleting_their_integrations("nobody", &sources).is_empty());
        let m = orphan_waits(&ObjectKey::new("oncall", "terdut"), &["a".into()]);
        assert!(
            m.contains("TerdutAlertSource a still has") && m.contains("oncall/terdut"),
            "{m}"
        );
    }
}
