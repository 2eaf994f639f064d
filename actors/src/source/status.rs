//! The TerdutAlertSource's status, pure: what a pass ended with -> the `Ready` condition, and
//! `integrationID`/`webhookURLSecretRef` (docs/design.md §4.5: the Secret reference, never the
//! values).
//!
//! [`status_patch`] returns `None` when nothing a user can see would change, so steady state
//! writes nothing (no hot loops). `Reconciling` and `Stalled` follow from the reason
//! (`reasons::PROGRESS`, docs/design.md §7).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;
use terdut_crds::v1alpha1::alert_source::reasons;
use terdut_crds::v1alpha1::conditions::{DesiredCondition, progress_of, set_ready};
use terdut_crds::v1alpha1::{LocalObjectRef, TerdutAlertSourceStatus};

use super::names::ANNOTATION_ROTATE;
use crate::api::{Id, IntegrationKind};

/// How a pass ended, as far as the user is concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The Secret holds the key of integration `id`, which matches the spec.
    Ready {
        id: Id,
        kind: IntegrationKind,
        team: String,
    },
    TeamNotFound {
        team: String,
    },
    WaitingForTeam {
        team: String,
        detail: String,
    },
    /// The team says Ready, but the server does not confirm its `teamID` (stale after a data
    /// loss, or forged): waiting for the team's next pass, which may not change anything a
    /// watch would carry here (a recreated team can get its old id back), so it is looked at
    /// again with backoff. Same reason as [`Outcome::WaitingForTeam`].
    TeamUnverified {
        team: String,
        detail: String,
    },
    WaitingForServer {
        detail: String,
    },
    /// The team's server does not accept this namespace (docs/design.md §4.6), whatever the team's
    /// status says.
    RefNotPermitted(String),
    /// Fails closed (docs/design.md §5).
    SecretLost {
        id: Id,
    },
    SecretConflict,
    InvalidSpec(String),
    /// A call failed; `reason` is one of the error reasons.
    Failed {
        reason: &'static str,
        message: String,
    },
    /// Being deleted; the integration could not be deleted yet.
    DeletionBlocked(String),
    /// `spec.management: ObserveOnly`: this many changes are planned, none made.
    ObserveOnly {
        changes: usize,
    },
}

/// What the status should say, without timestamps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredStatus {
    pub ready: DesiredCondition,
    pub observed_generation: Option<i64>,
    /// `None`: keep what the status says (the pass learned nothing about the integration).
    pub integration: Option<IntegrationStatus>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntegrationStatus {
    pub id: Option<Id>,
    pub secret_ref: Option<LocalObjectRef>,
}

/// The status for `outcome`. `secret` is the webhook Secret's name.
pub fn desired_status(outcome: &Outcome, generation: Option<i64>, secret: &str) -> DesiredStatus {
    use reasons::*;
    let (ready, reason, message, integration) = match outcome {
        Outcome::Ready { id, kind, team } => (
            true,
            READY,
            format!(
                "integration {id} ({kind}) on TerdutTeam {team}; its webhook URL and key are in \
                 Secret {secret} (data keys url and key)"
            ),
            Some(IntegrationStatus {
                id: Some(*id),
                secret_ref: Some(LocalObjectRef {
                    name: secret.to_owned(),
                }),
            }),
        ),
        Outcome::TeamNotFound { team } => (
            false,
            TEAM_NOT_FOUND,
            format!("TerdutTeam {team} does not exist in this namespace"),
            None,
        ),
        Outcome::WaitingForTeam { team, detail } => (
            false,
            WAITING_FOR_TEAM,
            format!("TerdutTeam {team} is not Ready yet: {detail}"),
            None,
        ),
        Outcome::TeamUnverified { team, detail } => (
            false,
            WAITING_FOR_TEAM,
            format!("TerdutTeam {team} is not usable yet: {detail}"),
            None,
        ),
        Outcome::WaitingForServer { detail } => (false, WAITING_FOR_SERVER, detail.clone(), None),
        Outcome::RefNotPermitted(why) => (
            false,
            REF_NOT_PERMITTED,
            format!("{why}; no integration is created on it for this namespace"),
            None,
        ),
        Outcome::SecretLost { id } => (
            false,
            WEBHOOK_SECRET_LOST,
            format!(
                "integration {id} exists on the server but Secret {secret} no longer holds its \
                 webhook key, which the server never shows again; the operator does not mint a \
                 replacement for a key that consumers may still use. To get a new key (the old \
                 one stops working): delete and recreate this TerdutAlertSource, or set the \
                 annotation {ANNOTATION_ROTATE} to a new value such as the current time"
            ),
            Some(IntegrationStatus {
                id: Some(*id),
                secret_ref: None,
            }),
        ),
        Outcome::SecretConflict => (
            false,
            WEBHOOK_SECRET_CONFLICT,
            format!(
                "Secret {secret} exists and is not controlled by this TerdutAlertSource; the \
                 operator never overwrites it and creates no integration while it cannot store \
                 the key: delete or rename that Secret (one left by a deleted TerdutAlertSource \
                 of the same name is garbage-collected shortly)"
            ),
            None,
        ),
        Outcome::InvalidSpec(m) => (false, INVALID_SPEC, m.clone(), None),
        Outcome::Failed { reason, message } => (false, *reason, message.clone(), None),
        Outcome::DeletionBlocked(m) => (false, DELETION_BLOCKED, m.clone(), None),
        Outcome::ObserveOnly { changes } => (
            false,
            OBSERVE_ONLY,
            crate::write::shared::observe_only_message(*changes, "integration"),
            None,
        ),
    };
    DesiredStatus {
        ready: DesiredCondition::ready(ready, reason, message).at_generation(generation),
        observed_generation: generation,
        integration,
    }
}

/// A JSON merge patch for the status subresource, or `None` when nothing would change.
pub fn status_patch(
    current: Option<&TerdutAlertSourceStatus>,
    desired: &DesiredStatus,
    now: Time,
) -> Option<serde_json::Value> {
    let current_or_default = current.cloned().unwrap_or_default();
    let mut next = current_or_default.clone();
    let progress = progress_of(reasons::PROGRESS, &desired.ready.reason);
    set_ready(&mut next.conditions, desired.ready.clone(), progress, now);
    next.observed_generation = desired.observed_generation;
    if let Some(i) = &desired.integration {
        next.integration_id = i.id;
        next.webhook_url_secret_ref = i.secret_ref.clone();
    }
    if current.is_some() && next == current_or_default {
        return None;
    }
    Some(json!({
        "status": {
            "conditions": next.conditions,
            "observedGeneration": next.observed_generation,
            "integrationID": next.integration_id,
            "webhookURLSecretRef": next.webhook_url_secret_ref,
        }
    }))
}

/// The status after a pass that ended in `outcome`, when to look again, and the Warning of a
/// source that starts failing closed or is blocked by a foreign Secret (once per streak).
pub fn verdict(
    source: &terdut_crds::v1alpha1::TerdutAlertSource,
    outcome: &Outcome,
) -> crate::pipeline::Verdict<DesiredStatus> {
    use crate::pipeline::{Announce, Next, Verdict};
    use crate::runtime::events::EventType;
    use kube::ResourceExt;
    let secret = super::names::secret_name(&source.name_any());
    let desired = desired_status(outcome, source.metadata.generation, &secret);
    let next = match outcome {
        Outcome::WaitingForServer { .. } | Outcome::TeamUnverified { .. } => Next::Wait,
        _ => Next::Resync,
    };
    let announce = matches!(
        outcome,
        Outcome::SecretLost { .. } | Outcome::SecretConflict
    )
    .then(|| Announce {
        type_: EventType::Warning,
        reason: desired.ready.reason.clone(),
        message: desired.ready.message.clone(),
        on_message: false,
    });
    Verdict::new(desired, next).announce(announce)
}

/// The status after a pass that failed with `error`: the object says why (a deletion, that it
/// is blocked), and the pass is retried.
pub fn failed(
    source: &terdut_crds::v1alpha1::TerdutAlertSource,
    error: &crate::error::ReconcileError,
) -> DesiredStatus {
    use crate::error::ReconcileError;
    use kube::ResourceExt;
    let outcome = if source.metadata.deletion_timestamp.is_some() {
        Outcome::DeletionBlocked(format!("deleting the integration failed: {error}"))
    } else {
        let reason = match error {
            ReconcileError::Api(_) => reasons::SERVER_ERROR,
            ReconcileError::Kube { .. }
            | ReconcileError::Invalid(_)
            | ReconcileError::Conflict(_)
            | ReconcileError::Records(_) => reasons::APPLY_FAILED,
        };
        Outcome::Failed {
            reason,
            message: error.to_string(),
        }
    };
    let secret = super::names::secret_name(&source.name_any());
    desired_status(&outcome, source.metadata.generation, &secret)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn t(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    fn ready() -> Outcome {
        Outcome::Ready {
            id: 3,
            kind: IntegrationKind::Alertmanager,
            team: "platform".into(),
        }
    }

    fn apply(
        current: Option<TerdutAlertSourceStatus>,
        patch: serde_json::Value,
    ) -> TerdutAlertSourceStatus {
        let mut base = serde_json::to_value(current.unwrap_or_default()).unwrap();
        let obj = base.as_object_mut().unwrap();
        for (k, v) in patch["status"].as_object().unwrap() {
            if v.is_null() {
                obj.remove(k);
            } else {
                obj.insert(k.clone(), v.clone());
            }
        }
        serde_json::from_value(base).unwrap()
    }

    #[test]
    fn ready_names_the_integration_and_the_secret_only() {
        let d = desired_status(&ready(), Some(2), "am-terdut-webhook");
        let patch = status_patch(None, &d, t(10)).unwrap();
        let st = apply(None, patch);
        assert_eq!(st.integration_id, Some(3));
        assert_eq!(st.webhook_url_secret_ref.unwrap().name, "am-terdut-webhook");
        assert_eq!(st.observed_generation, Some(2));
        assert_eq!(st.conditions[0].reason, "Ready");
        assert_eq!(st.conditions[0].status, "True");
    }

    #[test]
    fn unchanged_status_writes_nothing() {
        let d = desired_status(&ready(), Some(2), "am-terdut-webhook");
        let st = apply(None, status_patch(None, &d, t(10)).unwrap());
        assert_eq!(status_patch(Some(&st), &d, t(20)), None);
    }

    #[test]
    fn a_lost_secret_clears_the_reference_and_keeps_the_id() {
        let st = apply(
            None,
            status_patch(
                None,
                &desired_status(&ready(), Some(2), "am-terdut-webhook"),
                t(10),
            )
            .unwrap(),
        );
        let lost = desired_status(&Outcome::SecretLost { id: 3 }, Some(2), "am-terdut-webhook");
        let st = apply(
            Some(st.clone()),
            status_patch(Some(&st), &lost, t(20)).unwrap(),
        );
        assert_eq!(st.integration_id, Some(3));
        assert_eq!(st.webhook_url_secret_ref, None);
        let c = &st.conditions[0];
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "WebhookSecretLost")
        );
        assert!(c.message.contains("delete and recreate"), "{}", c.message);
        assert!(c.message.contains(ANNOTATION_ROTATE), "{}", c.message);
    }

    #[test]
    fn waiting_keeps_what_was_known() {
        let st = apply(
            None,
            status_patch(
                None,
                &desired_status(&ready(), Some(2), "am-terdut-webhook"),
                t(10),
            )
            .unwrap(),
        );
        let waiting = desired_status(
            &Outcome::WaitingForTeam {
                team: "platform".into(),
                detail: "no teamID".into(),
            },
            Some(2),
            "am-terdut-webhook",
        );
        let st = apply(
            Some(st.clone()),
            status_patch(Some(&st), &waiting, t(20)).unwrap(),
        );
        assert_eq!(st.integration_id, Some(3));
        assert!(st.webhook_url_secret_ref.is_some());
        assert_eq!(st.conditions[0].reason, "WaitingForTeam");
    }

    #[test]
    fn reconciling_and_stalled_follow_the_ready_reason() {
        let kstatus = |o: &Outcome| -> Vec<(String, String)> {
            let st = apply(
                None,
                status_patch(None, &desired_status(o, Some(4), "s"), t(1)).unwrap(),
            );
            assert!(
                st.conditions
                    .iter()
                    .all(|c| c.observed_generation == Some(4))
            );
            st.conditions
                .iter()
                .map(|c| (c.type_.clone(), c.reason.clone()))
                .collect()
        };
        let pair = |a: &str, b: &str| (a.to_owned(), b.to_owned());
        assert_eq!(kstatus(&ready()), [pair("Ready", "Ready")]);
        let waiting = Outcome::WaitingForTeam {
            team: "t".into(),
            detail: "d".into(),
        };
        assert_eq!(
            kstatus(&waiting),
            [
                pair("Ready", "WaitingForTeam"),
                pair("Reconciling", "WaitingForTeam")
            ]
        );
        assert_eq!(
            kstatus(&Outcome::SecretLost { id: 3 }),
            [
                pair("Ready", "WebhookSecretLost"),
                pair("Stalled", "WebhookSecretLost")
            ]
        );
        let failed = Outcome::Failed {
            reason: reasons::SERVER_ERROR,
            message: "503".into(),
        };
        assert_eq!(
            kstatus(&failed),
            [
                pair("Ready", "ServerError"),
                pair("Reconciling", "ServerError")
            ]
        );
        // Planned as the spec asks, nothing in flight: settled (docs/design.md §7).
        assert_eq!(
            kstatus(&Outcome::ObserveOnly { changes: 2 }),
            [pair("Ready", "ObserveOnly")]
        );
    }

    #[test]
    fn every_outcome_has_a_reason_and_a_message() {
        for o in [
            ready(),
            Outcome::TeamNotFound { team: "t".into() },
            Outcome::WaitingForTeam {
                team: "t".into(),
                detail: "d".into(),
            },
            Outcome::WaitingForServer { detail: "d".into() },
            Outcome::SecretLost { id: 1 },
            Outcome::SecretConflict,
            Outcome::InvalidSpec("m".into()),
            Outcome::Failed {
                reason: reasons::SERVER_ERROR,
                message: "m".into(),
            },
            Outcome::DeletionBlocked("m".into()),
        ] {
            let d = desired_status(&o, None, "s");
            assert!(
                !d.ready.reason.is_empty() && !d.ready.message.is_empty(),
                "{o:?}"
            );
        }
    }
}
