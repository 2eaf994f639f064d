//! Deleting a TerdutAlertSource (docs/design.md §5 "Finalizers"): DELETE the integration on the
//! server (404 counts as done), then release the finalizer. The webhook Secret is owned, so garbage
//! collection removes it (docs/design.md §7). PURE: [`step`] is the plan, from what the pass
//! has learnt so far ([`Facts`]); `cleanup.rs` answers its [`Question`]s and the pipeline
//! driver carries it out (`pipeline::deletion`).
//!
//! What deletion does when the integration cannot be reached (engineering-notes: finalizer
//! deadlocks when the server or the team is gone first):
//! - **TerdutTeam gone** (absent from the cache and from a live read), or being deleted with
//!   `deletionPolicy: Delete` without a way to reach the server: released with a Warning. The
//!   team's own finalizer deletes the team on the server, which deletes its integrations, so
//!   nothing is orphaned. A team being deleted with `deletionPolicy: Orphan` stays on the
//!   server with its integrations, so this source deletes its own first (the team waits for
//!   it, `team/finalize.rs`) and stays blocked, saying what is still live, while it cannot. A
//!   team gone for good while it was orphaned is the one case left: the Warning says the
//!   integration may still be live.
//! - **TerdutServer gone** (confirmed live too; e.g. the whole namespace is being deleted):
//!   released with a Warning naming the integration; nothing can delete it any more, and a
//!   server reusing that database keeps the row until someone deletes it by hand.
//! - **`spec.deletionPolicy: Orphan`**: nothing is called on the server; the integration and
//!   its webhook Secret are left (the Secret detached from the source, see [`detached`]).
//! - **Everything else** (the server answers 5xx, is not reachable, has no key yet, the team has
//!   no `teamID` yet): removal stays blocked, with a Warning Event and `DeletionBlocked`, and is
//!   retried with backoff. Removing the finalizer by hand is the documented way out.
//!
//! Nothing a tenant can write is authority (docs/security.md): the team's `status.teamID` is
//! confirmed with the server before anything is deleted on it, and a recorded integration id
//! (the webhook Secret's annotation, `status.integrationID`) is deleted only when the server
//! says its `external_id` is this source's. Otherwise, with no id known (the operator stopped
//! between a POST and recording anything, or a hint was someone else's), the POST is repeated:
//! it answers the existing integration by `external_id` (or creates one whose key is dropped
//! unread) and that id is deleted, so even the crash window leaves no orphan. That POST is a
//! create call, so it is made only while the team's server accepts this namespace; otherwise
//! the finalizer is released with a Warning saying what may be left.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use terdut_crds::v1alpha1::{DeletionPolicy, TerdutAlertSource, TerdutTeam};

use super::names::{external_id, secret_labels, secret_name};
use super::observe::{SecretObservation, TeamCheck};
use super::plan::lookup_id;
use super::secret::controlled_by;
use super::status::{DesiredStatus, Outcome, desired_status};
use crate::api::{Deletion as Removed, Id};
use crate::consent::Consent;
use crate::error::ReconcileError;
use crate::key::ObjectKey;
use crate::pipeline::{Next, Note, Step, Then};
use crate::server::observe::team_server_key;
use crate::team::observe::Uncached;
use crate::tree::{Access, Credentials};

/// What a deletion pass asks, in the order [`step`] asks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Question {
    /// `Orphan`: the webhook Secret as it is now (read live).
    SecretLive,
    /// `Orphan`: replace the webhook Secret with it [`detached`] from this source.
    Detach,
    /// The TerdutTeam (the cache, else read live).
    Team,
    /// Whether the caches show the team's server, and if not what a live look finds.
    Server,
    /// The webhook Secret (the cache; its data live).
    Secret,
    /// The server's client and its consent for this namespace (the parent).
    Access,
    /// Whether the server says team `0` is this source's team.
    VerifyTeam(Id),
    /// Whether integration `id` on team `team_id` is this source's (a GET).
    Integration { team_id: Id, id: Id },
    /// This source's integration on `team_id` found by its external_id: the idempotent POST,
    /// made only for the object still holding the finalizer (read live).
    ByExternalId { team_id: Id },
    /// DELETE integration `id` on team `team_id`.
    Delete { team_id: Id, id: Id },
}

/// What a deletion pass has learnt so far (`None`: not asked yet).
#[derive(Default)]
pub struct Facts {
    pub secret_live: Option<Option<Secret>>,
    pub detached: bool,
    pub team: Option<Option<Arc<TerdutTeam>>>,
    /// `Some(None)`: the caches show the server.
    pub server: Option<Option<Uncached>>,
    pub secret: Option<SecretObservation>,
    pub access: Option<Access>,
    pub team_check: Option<TeamCheck>,
    /// The recorded id, if the server confirms it is this source's.
    pub verified: Option<Option<Id>>,
    /// `Some(None)`: the object no longer holds the finalizer; nothing to do.
    pub by_external_id: Option<Option<Id>>,
    pub deleted: Option<Removed>,
}

/// Never prints the Secrets (their data is the key): only what is known.
impl std::fmt::Debug for Facts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Facts")
            .field("detached", &self.detached)
            .field("server", &self.server)
            .field("verified", &self.verified)
            .field("by_external_id", &self.by_external_id)
            .field("deleted", &self.deleted)
            .finish_non_exhaustive()
    }
}

/// PURE: the next step of deleting `source` (which carries the finalizer), given `facts`.
pub fn step(source: &TerdutAlertSource, facts: &Facts) -> Step<Question, DesiredStatus> {
    let mut notes = Vec::new();
    let then = then(source, facts, &mut notes);
    Step { notes, then }
}

/// The Warning of a deletion pass that failed with `error`.
pub fn failed(error: &ReconcileError) -> Note {
    stays(format!("deleting the integration failed: {error}"))
}

/// A `DeleteFailed` Warning on every attempt (folded into one series).
fn stays(message: String) -> Note {
    Note::warning(
        "DeleteFailed",
        format!("{message}; the TerdutAlertSource stays until the integration is deleted"),
    )
}

/// Waiting for something outside the operator's reach; `why` says what.
fn blocked(
    source: &TerdutAlertSource,
    why: String,
    notes: &mut Vec<Note>,
) -> Then<Question, DesiredStatus> {
    notes.push(stays(why.clone()));
    Then::Wait {
        desired: Some(desired_status(
            &Outcome::DeletionBlocked(why),
            source.metadata.generation,
            &secret_name(&source.name_any()),
        )),
        next: Next::Wait,
    }
}

/// Releases the finalizer without deleting anything on the server, with a Warning saying why.
fn release(why: String) -> Then<Question, DesiredStatus> {
    Then::Release {
        log: Some(format!(
            "releasing the finalizer without a server-side delete: {why}"
        )),
        after: vec![Note::warning("FinalizerReleased", why)],
    }
}

fn then(
    source: &TerdutAlertSource,
    f: &Facts,
    notes: &mut Vec<Note>,
) -> Then<Question, DesiredStatus> {
    // docs/design.md §5 "Deletion policy": no call to the server at all.
    if source.spec.deletion_policy == DeletionPolicy::Orphan {
        return orphan(source, f);
    }
    let key = ObjectKey::of(source);
    let team_name = &source.spec.team_ref.name;
    let status_id = source.status.as_ref().and_then(|s| s.integration_id);
    let what = status_id.map_or_else(
        || "its integration".to_owned(),
        |id| format!("integration {id}"),
    );
    let Some(team) = &f.team else {
        return Then::Ask(Question::Team);
    };
    let Some(team) = team else {
        return release(format!(
            "TerdutTeam {team_name} no longer exists, so {what} cannot be looked up; deleting \
             a team on the server deletes its integrations, but if the team was left there \
             (its finalizer removed by hand), {what} and its webhook key are still live: \
             delete it on the server"
        ));
    };
    let team_deleting = team.metadata.deletion_timestamp.is_some();
    // Only a team the server deletes takes its integrations with it.
    let team_takes_it = team.spec.deletion_policy == DeletionPolicy::Delete;
    let team_gone_note = || {
        format!(
            "TerdutTeam {team_name} is being deleted and the integration cannot be reached; \
             deleting the team on the server deletes its integrations"
        )
    };
    let orphaned_team_note = |why: &str| {
        let what = status_id.map_or_else(
            || "this source's integration".to_owned(),
            |id| format!("integration {id}"),
        );
        format!(
            "TerdutTeam {team_name} is being deleted with deletionPolicy Orphan, so it stays on \
             the server and {what} with its working webhook key stays with it unless deleted \
             here; {why}"
        )
    };
    let server = team_server_key(team);
    let Some(uncached) = &f.server else {
        return Then::Ask(Question::Server);
    };
    match uncached {
        Some(Uncached::Absent) => {
            return release(format!(
                "TerdutServer {server} no longer exists, so {what} cannot be deleted; if a \
                 server reusing its database comes back, delete {what} of TerdutTeam \
                 {team_name} there by hand"
            ));
        }
        // Exists, but not this instance's to call: nobody could delete it from here.
        Some(Uncached::NotMine(why)) => {
            return release(format!(
                "TerdutServer {server} of TerdutTeam {team_name} is not reconciled by this \
                 operator instance ({why}), so {what} cannot be deleted from here; if it \
                 exists, its webhook key is still live: delete it on the server by hand"
            ));
        }
        Some(Uncached::NotYetSeen) | None => {}
    }
    let Some(secret) = &f.secret else {
        return Then::Ask(Question::Secret);
    };
    let recorded = lookup_id(&secret.view, status_id);
    let Some(team_id) = team.status.as_ref().and_then(|s| s.team_id) else {
        if team_deleting && team_takes_it {
            return release(team_gone_note());
        }
        if team_deleting && recorded.is_some() {
            // The team waits for this source, and without its id nothing can be reached:
            // released, saying what may be left.
            return release(orphaned_team_note(
                "it has no teamID, so the integration cannot be reached: delete it on the \
                 server by hand",
            ));
        }
        if recorded.is_none() {
            // An integration is only ever created on a team id the server confirmed, and its
            // id is recorded with its key: with neither, none was made for this object.
            return release(format!(
                "TerdutTeam {team_name} has no teamID and no integration was recorded for \
                 this object, so none was created; nothing to delete"
            ));
        }
        return blocked(
            source,
            format!(
                "TerdutTeam {team_name} has no teamID yet; the integration is deleted once it \
                 has one"
            ),
            notes,
        );
    };
    // One question: the credentials to delete with, and the consent that decides whether a
    // lookup by external_id (a create call) is allowed below.
    let Some(access) = &f.access else {
        return Then::Ask(Question::Access);
    };
    match &access.credentials {
        Credentials::Ready(_) => {}
        Credentials::NotReady(_) if team_deleting && team_takes_it => {
            return release(team_gone_note());
        }
        Credentials::NotReady(why) if team_deleting => {
            return blocked(
                source,
                orphaned_team_note(&format!(
                    "it is deleted once the server can be reached ({why})"
                )),
                notes,
            );
        }
        Credentials::NotReady(why) => {
            return blocked(
                source,
                format!("the integration cannot be deleted yet: {why}"),
                notes,
            );
        }
    }
    let want = external_id(&key.namespace, &key.name);
    // The team's status is a hint a tenant can write: delete nothing on a team the server does
    // not confirm is this one.
    let Some(check) = &f.team_check else {
        return Then::Ask(Question::VerifyTeam(team_id));
    };
    if let TeamCheck::NotOurs(detail) = check {
        return release(format!(
            "{detail}; nothing was deleted on the server (an integration {want} left on this \
             source's team, if any, is deleted with the team)"
        ));
    }
    let verified = match recorded {
        Some(id) => {
            let Some(verified) = f.verified else {
                return Then::Ask(Question::Integration { team_id, id });
            };
            verified
        }
        None => None,
    };
    let id = match verified {
        Some(id) => id,
        // No recorded id is this source's (none, gone, or someone else's): the only lookup by
        // external_id is the idempotent POST, and a server that does not accept this namespace
        // gets no create call (docs/security.md).
        None => {
            if let Consent::Refused(why) = &access.consent {
                return release(format!(
                    "{why}; the integration {want} on team {team_id}, if one is left there, \
                     was not looked up (the only lookup is a create call) and stays on the \
                     server until its team is deleted"
                ));
            }
            let Some(found) = f.by_external_id else {
                return Then::Ask(Question::ByExternalId { team_id });
            };
            match found {
                Some(id) => id,
                None => return Then::Gone,
            }
        }
    };
    let Some(deleted) = f.deleted else {
        return Then::Ask(Question::Delete { team_id, id });
    };
    let note = match deleted {
        Removed::Deleted if recorded == Some(id) => {
            format!("deleted integration {id}; its webhook key no longer works")
        }
        Removed::Deleted => format!(
            "deleted integration {id} (found by its external_id {want}); its webhook key no \
             longer works"
        ),
        Removed::AlreadyGone => format!("integration {id} was already gone from the server"),
    };
    Then::Release {
        after: vec![Note::normal("IntegrationDeleted", note)],
        log: Some(format!("integration {id} deleted; releasing the finalizer")),
    }
}

/// `Orphan`: the integration stays on the server, and so does its webhook Secret, no longer
/// the operator's (its owner reference and managed labels removed, so garbage collection
/// leaves it and the operator's watch no longer sees it): whatever reads the key keeps
/// working. A Secret this source does not control is not touched.
fn orphan(source: &TerdutAlertSource, f: &Facts) -> Then<Question, DesiredStatus> {
    let Some(live) = &f.secret_live else {
        return Then::Ask(Question::SecretLive);
    };
    let uid = source.uid().unwrap_or_default();
    let controlled = live.as_ref().is_some_and(|s| controlled_by(s, &uid));
    if controlled && !f.detached {
        return Then::Ask(Question::Detach);
    }
    // Once detached, the Secret is no longer this source's: what was done is in `detached`.
    let kept = if f.detached {
        format!(
            "; its webhook Secret {} was kept and is no longer managed by the operator (delete it when done)",
            secret_name(&source.name_any())
        )
    } else {
        String::new()
    };
    let recorded = source
        .status
        .as_ref()
        .and_then(|s| s.integration_id)
        .map(|id| format!(" (recorded as integration {id})"))
        .unwrap_or_default();
    Then::Release {
        after: vec![Note::normal(
            "Orphaned",
            format!(
                "spec.deletionPolicy is Orphan: the integration{recorded} was left on the \
                 server{kept}; released the finalizer"
            ),
        )],
        log: Some("orphaned on the server (deletionPolicy Orphan)".into()),
    }
}

/// PURE: the webhook Secret without this source's owner reference and the operator's labels.
pub fn detached(mut secret: Secret, source_uid: &str) -> Secret {
    if let Some(refs) = secret.metadata.owner_references.as_mut() {
        refs.retain(|o| o.uid != source_uid);
    }
    if let Some(labels) = secret.metadata.labels.as_mut() {
        for label in secret_labels("").keys() {
            labels.remove(label);
        }
    }
    secret.metadata.managed_fields = None;
    secret
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
    use std::collections::BTreeMap;

    use crate::api::{ClientConfig, OperatorKey, TerdutClient};
    use crate::source::plan::SecretView;

    fn source(policy: &str, integration: Option<Id>) -> TerdutAlertSource {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutAlertSource",
            "metadata": {"name": "am", "namespace": "ns", "uid": "source-uid",
                         "finalizers": [super::super::names::FINALIZER]},
            "spec": {"teamRef": {"name": "payments"}, "kind": "generic", "name": "am",
                     "deletionPolicy": policy},
            "status": {"integrationID": integration},
        }))
        .unwrap()
    }

    fn team(team_id: Option<Id>, deleting: bool) -> Arc<TerdutTeam> {
        let mut t: TerdutTeam = serde_json::from_value(serde_json::json!({
            "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutTeam",
            "metadata": {"name": "payments", "namespace": "ns"},
            "spec": {"serverRef": {"name": "terdut"}, "displayName": "Payments"},
            "status": {"teamID": team_id},
        }))
        .unwrap();
        if deleting {
            t.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ));
        }
        Arc::new(t)
    }

    fn ready() -> Access {
        let config = ClientConfig::new("https://terdut.example", OperatorKey::from("k"));
        Access {
            consent: Consent::Allowed,
            credentials: Credentials::Ready(Arc::new(TerdutClient::new(config).unwrap())),
        }
    }

    fn run(
        source: &TerdutAlertSource,
        mut answer: impl FnMut(&Question, &mut Facts),
    ) -> (Vec<Question>, Step<Question, DesiredStatus>) {
        let mut facts = Facts::default();
        let mut asked = vec![];
        loop {
            let s = step(source, &facts);
            match s.then {
                Then::Ask(q) => {
                    asked.push(q);
                    answer(&q, &mut facts);
                }
                _ => return (asked, s),
            }
        }
    }

    /// A team with id 4 on a reachable server that accepts the namespace.
    fn reachable(q: &Question, f: &mut Facts) {
        match q {
            Question::Team => f.team = Some(Some(team(Some(4), false))),
            Question::Server => f.server = Some(None),
            Question::Secret => {
                f.secret = Some(SecretObservation {
                    object: None,
                    view: SecretView::Absent,
                    checked: None,
                    live: true,
                });
            }
            Question::Access => f.access = Some(ready()),
            Question::VerifyTeam(_) => f.team_check = Some(TeamCheck::Ours),
            Question::Integration { id, .. } => f.verified = Some(Some(*id)),
            Question::ByExternalId { .. } => f.by_external_id = Some(Some(12)),
            Question::Delete { .. } => f.deleted = Some(Removed::Deleted),
            other => panic!("asked {other:?}"),
        }
    }

    fn release_reasons(s: &Step<Question, DesiredStatus>) -> Vec<&'static str> {
        match &s.then {
            Then::Release { after, .. } => after.iter().map(|n| n.reason).collect(),
            other => panic!("not released: {other:?}"),
        }
    }

    #[test]
    fn a_recorded_integration_is_confirmed_then_deleted_then_released() {
        let (asked, s) = run(&source("Delete", Some(9)), reachable);
        assert_eq!(
            asked,
            [
                Question::Team,
                Question::Server,
                Question::Secret,
                Question::Access,
                Question::VerifyTeam(4),
                Question::Integration { team_id: 4, id: 9 },
                Question::Delete { team_id: 4, id: 9 },
            ]
        );
        assert!(s.notes.is_empty());
        assert_eq!(release_reasons(&s), ["IntegrationDeleted"]);
    }

    #[test]
    fn with_no_id_known_it_is_found_by_external_id_unless_consent_is_refused() {
        let (asked, s) = run(&source("Delete", None), reachable);
        assert!(asked.contains(&Question::ByExternalId { team_id: 4 }));
        assert!(asked.contains(&Question::Delete { team_id: 4, id: 12 }));
        assert_eq!(release_reasons(&s), ["IntegrationDeleted"]);
        let (asked, s) = run(&source("Delete", None), |q, f| match q {
            Question::Access => {
                f.access = Some(Access {
                    consent: Consent::Refused("not accepted".into()),
                    ..ready()
                });
            }
            q => reachable(q, f),
        });
        assert!(
            !asked
                .iter()
                .any(|q| matches!(q, Question::ByExternalId { .. }))
        );
        assert_eq!(release_reasons(&s), ["FinalizerReleased"]);
        // A stale copy no longer holds the finalizer: nothing to do.
        let (_, s) = run(&source("Delete", None), |q, f| match q {
            Question::ByExternalId { .. } => f.by_external_id = Some(None),
            q => reachable(q, f),
        });
        assert_eq!(s.then, Then::Gone);
    }

    #[test]
    fn an_orphan_detaches_a_controlled_secret_and_calls_no_server() {
        let secret = || Secret {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                owner_references: Some(vec![
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                        api_version: "terdut.ryuvia.com/v1alpha1".into(),
                        kind: "TerdutAlertSource".into(),
                        name: "am".into(),
                        uid: "source-uid".into(),
                        controller: Some(true),
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            },
            ..Default::default()
        };
        let (asked, s) = run(&source("Orphan", Some(9)), |q, f| match q {
            Question::SecretLive => f.secret_live = Some(Some(secret())),
            Question::Detach => {
                // As `cleanup.rs` does: the Secret as replaced, no longer controlled.
                let live = f.secret_live.take().flatten().unwrap();
                f.secret_live = Some(Some(detached(live, "source-uid")));
                f.detached = true;
            }
            other => panic!("asked {other:?}"),
        });
        assert_eq!(asked, [Question::SecretLive, Question::Detach]);
        let Then::Release { after, .. } = &s.then else {
            panic!()
        };
        assert!(
            after[0]
                .message
                .contains("integration (recorded as integration 9)")
        );
        assert!(
            after[0].message.contains("was kept"),
            "{}",
            after[0].message
        );
        // No Secret of its own: nothing detached, nothing said of one.
        let (asked, s) = run(&source("Orphan", None), |q, f| match q {
            Question::SecretLive => f.secret_live = Some(None),
            other => panic!("asked {other:?}"),
        });
        assert_eq!(asked, [Question::SecretLive]);
        assert_eq!(release_reasons(&s), ["Orphaned"]);
    }

    #[test]
    fn what_cannot_be_reached_releases_or_blocks_by_who_else_deletes_it() {
        // The team gone: released, saying what may be left.
        let (asked, s) = run(&source("Delete", Some(9)), |q, f| match q {
            Question::Team => f.team = Some(None),
            q => reachable(q, f),
        });
        assert_eq!(asked, [Question::Team]);
        assert_eq!(release_reasons(&s), ["FinalizerReleased"]);
        // A team being deleted on the server takes its integrations along.
        let not_ready = |q: &Question, f: &mut Facts, t: Arc<TerdutTeam>| match q {
            Question::Team => f.team = Some(Some(t)),
            Question::Access => {
                f.access = Some(Access {
                    consent: Consent::Allowed,
                    credentials: Credentials::NotReady("no key".into()),
                });
            }
            q => reachable(q, f),
        };
        let (_, s) = run(&source("Delete", Some(9)), |q, f| {
            not_ready(q, f, team(Some(4), true))
        });
        assert_eq!(release_reasons(&s), ["FinalizerReleased"]);
        // A live team whose server cannot be reached: blocked, with the status saying why.
        let (_, s) = run(&source("Delete", Some(9)), |q, f| {
            not_ready(q, f, team(Some(4), false))
        });
        assert_eq!(
            s.notes.iter().map(|n| n.reason).collect::<Vec<_>>(),
            ["DeleteFailed"]
        );
        assert!(matches!(
            s.then,
            Then::Wait {
                desired: Some(_),
                next: Next::Wait
            }
        ));
        // No teamID and nothing recorded: none was ever made.
        let (asked, s) = run(&source("Delete", None), |q, f| match q {
            Question::Team => f.team = Some(Some(team(None, false))),
            q => reachable(q, f),
        });
        assert!(!asked.contains(&Question::Access));
        assert_eq!(release_reasons(&s), ["FinalizerReleased"]);
    }

    #[test]
    fn a_failed_pass_says_the_source_stays() {
        let n = failed(&ReconcileError::Invalid("boom".into()));
        assert_eq!(
            (n.reason, n.type_),
            ("DeleteFailed", crate::runtime::events::EventType::Warning)
        );
        assert!(
            n.message
                .starts_with("deleting the integration failed: boom; the TerdutAlertSource stays")
        );
    }

    #[test]
    fn a_detached_secret_keeps_its_data_and_other_owners_and_labels_only() {
        let owner = |uid: &str| OwnerReference {
            api_version: "v1".into(),
            kind: "Thing".into(),
            name: uid.into(),
            uid: uid.into(),
            controller: Some(uid == "source-uid"),
            ..Default::default()
        };
        let mut labels = secret_labels("am");
        labels.insert("team".into(), "payments".into());
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some("am-terdut-webhook".into()),
                labels: Some(labels),
                owner_references: Some(vec![owner("source-uid"), owner("other")]),
                ..Default::default()
            },
            string_data: Some(BTreeMap::from([("key".into(), "k".into())])),
            ..Default::default()
        };
        let d = detached(secret.clone(), "source-uid");
        assert_eq!(d.metadata.owner_references, Some(vec![owner("other")]));
        assert_eq!(
            d.metadata.labels,
            Some(BTreeMap::from([("team".into(), "payments".into())]))
        );
        assert_eq!(d.string_data, secret.string_data, "the key stays");
        assert!(!controlled_by(&d, "source-uid"));
    }
}
