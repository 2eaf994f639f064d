//! The TerdutServer's status, computed from what was observed (docs/design.md §6, §7).
//!
//! [`desired_status`] decides what the status should say; [`status_patch`] turns that into a
//! patch only when something a user can see changed (no hot loops: `lastTransitionTime` moves
//! only when the Ready status flips, via `terdut_crds`' `set_condition`).
//!
//! When is a server Ready? docs/design.md §7 asks for a Ready condition on every kind, and
//! docs/design.md §5 makes Ready the gate for everything attached to the server ("Children resolve
//! through the team ... requires it Ready"). What children need is a server that answers its API,
//! and one available pod does (the replicas share one database). So **Ready=True as soon as one pod
//! is available**: reason `Ready` once the rollout of the current spec is complete, `RollingOut`
//! while it is not. Demanding every replica would flip all teams to waiting on every upgrade or
//! node drain. With no pod available Ready is False with the most actionable reason: the database,
//! a stalled rollout, a refused pod, or plain `Progressing` (in a cluster without kubelets, as in
//! the project's tests, that is where a server stays). `Reconciling` and `Stalled` follow from
//! the reason (`reasons::PROGRESS`, docs/design.md §7).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;
use terdut_crds::v1alpha1::conditions::{DesiredCondition, progress_of, set_condition, set_ready};
use terdut_crds::v1alpha1::server::TeamCounts;
use terdut_crds::v1alpha1::{SecretKeyRef, TerdutServerStatus};

use super::database::DatabaseOutcome;
use super::key::KeySecretState;
use super::names::{KEY_SECRET_DATA_KEY, deployment_name, key_secret_name};
use super::summary::Summary;

/// Ready condition reasons: the TerdutServer's, from the one typed list in `terdut_crds`
/// (`Reason`), and which of them the actor polls and announces.
pub mod reasons {
    pub use terdut_crds::v1alpha1::server::reasons::*;

    /// Reasons that wait on something no watch of the operator reports (a Secret or object it
    /// does not watch, a CRD, another controller's object): the pass is retried with a
    /// growing delay while one holds, and a Warning goes out when one starts.
    pub const POLLED: [&str; 8] = [
        RESOURCE_NOT_OWNED,
        KEY_SECRET_NOT_OWNED,
        KEY_SECRET_INVALID,
        SECRET_NOT_FOUND,
        SECRET_KEY_NOT_FOUND,
        DATABASE_CLUSTER_NOT_FOUND,
        POSTGRES_OPERATOR_NOT_INSTALLED,
        DATABASE_CLUSTER_NOT_RUNNING,
    ];

    /// Not-ready reasons someone has to act on: a Warning Event goes out when the Ready
    /// reason changes to one of them (once per streak). `Progressing`, `RollingOut` and
    /// `ScaledToZero` are expected states and only show in the condition.
    pub const ANNOUNCED: [&str; 12] = [
        RESOURCE_NOT_OWNED,
        KEY_SECRET_NOT_OWNED,
        KEY_SECRET_INVALID,
        SECRET_NOT_FOUND,
        SECRET_KEY_NOT_FOUND,
        DATABASE_CLUSTER_NOT_FOUND,
        POSTGRES_OPERATOR_NOT_INSTALLED,
        DATABASE_CLUSTER_NOT_RUNNING,
        APPLY_FAILED,
        ROLLOUT_STALLED,
        REPLICA_FAILURE,
        INVALID_SPEC,
    ];
}

/// The `KeyAccepted` and `PodSecurity` conditions' types and reasons (`terdut_crds`, which the
/// CLI reads too).
pub use terdut_crds::v1alpha1::server::{key_accepted, pod_security};

/// What the Deployment's status says, as far as Ready is concerned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeploymentObservation {
    pub generation: Option<i64>,
    pub observed_generation: Option<i64>,
    /// All pods, old and new.
    pub replicas: i32,
    pub updated_replicas: i32,
    pub available_replicas: i32,
    /// Message of `Progressing=False, reason=ProgressDeadlineExceeded`.
    pub stalled: Option<String>,
    /// Message of `ReplicaFailure=True`.
    pub replica_failure: Option<String>,
}

impl DeploymentObservation {
    pub fn from_deployment(d: &Deployment) -> Self {
        let status = d.status.clone().unwrap_or_default();
        let conditions = status.conditions.unwrap_or_default();
        let message = |type_: &str, want: &str, reason: Option<&str>| {
            conditions
                .iter()
                .find(|c| {
                    c.type_.as_deref() == Some(type_)
                        && c.status.as_deref() == Some(want)
                        && reason.is_none_or(|r| c.reason.as_deref() == Some(r))
                })
                .map(|c| c.message.clone().unwrap_or_default())
        };
        Self {
            generation: d.metadata.generation,
            observed_generation: status.observed_generation,
            replicas: status.replicas.unwrap_or(0),
            updated_replicas: status.updated_replicas.unwrap_or(0),
            available_replicas: status.available_replicas.unwrap_or(0),
            stalled: message("Progressing", "False", Some("ProgressDeadlineExceeded")),
            replica_failure: message("ReplicaFailure", "True", None),
        }
    }

    /// The Deployment controller has seen the latest spec and every pod runs it.
    fn rollout_complete(&self, wanted: i32) -> bool {
        self.observed_generation >= self.generation
            && self.updated_replicas == wanted
            && self.replicas == wanted
            && self.available_replicas >= wanted
    }
}

/// Everything [`desired_status`] decides from.
#[derive(Clone, Debug)]
pub struct StatusInputs<'a> {
    pub server_name: &'a str,
    /// `metadata.generation` of the TerdutServer.
    pub generation: Option<i64>,
    /// `spec.replicas`.
    pub replicas: i32,
    /// From `names::validate_server_name`.
    pub name_error: Option<&'a str>,
    /// An object in the way, e.g. `Deployment terdut` deployed by the chart (never adopted).
    pub foreign_object: Option<&'a str>,
    /// The key Secret as it is after this pass (a Secret the pass created counts as present).
    pub key: &'a KeySecretState,
    pub database: &'a DatabaseOutcome,
    /// The first Secret the spec names that is missing, as (reason, message).
    pub missing_reference: Option<(&'static str, &'a str)>,
    /// `None`: no Deployment in the cache yet.
    pub deployment: Option<&'a DeploymentObservation>,
    pub teams: TeamCounts,
}

/// The status the server should have, without timestamps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredStatus {
    pub ready: DesiredCondition,
    /// `PodSecurity`, when the pass built a Deployment; `None` leaves it as it is.
    pub pod_security: Option<DesiredCondition>,
    /// `KeyAccepted`, set by the actor after asking the server; `None` leaves it as it is.
    pub key_accepted: Option<DesiredCondition>,
    pub observed_generation: Option<i64>,
    pub credentials_secret_ref: Option<SecretKeyRef>,
    pub teams: TeamCounts,
    /// URL, available pods, key fingerprint (`summary.rs`), set by the plan.
    pub summary: Summary,
}

/// Decides the status. `credentialsSecretRef` is set only while the key Secret is present and
/// valid, so a team never goes looking for a key that is not there (docs/design.md §6 step 4).
pub fn desired_status(i: &StatusInputs<'_>) -> DesiredStatus {
    let (status, reason, message) = ready(i);
    let credentials_secret_ref =
        matches!(i.key, KeySecretState::Present(_)).then(|| SecretKeyRef {
            name: key_secret_name(i.server_name),
            key: KEY_SECRET_DATA_KEY.into(),
        });
    DesiredStatus {
        ready: DesiredCondition::ready(status, reason, message).at_generation(i.generation),
        pod_security: None,
        key_accepted: None,
        observed_generation: i.generation,
        credentials_secret_ref,
        teams: i.teams.clone(),
        summary: Summary::default(),
    }
}

fn ready(i: &StatusInputs<'_>) -> (bool, &'static str, String) {
    use reasons::*;
    let key_name = key_secret_name(i.server_name);
    let deploy = deployment_name(i.server_name);
    if let Some(e) = i.name_error {
        return (false, INVALID_SPEC, e.to_owned());
    }
    match i.key {
        KeySecretState::Present(_) => {}
        // The pass creates a missing key Secret (the plan then counts it as present); this is
        // only what a plan that did not get that far says.
        KeySecretState::Missing => {
            return (
                false,
                PROGRESSING,
                format!("Secret {key_name} with the operator key is being created"),
            );
        }
        KeySecretState::Invalid => {
            return (
                false,
                KEY_SECRET_INVALID,
                format!(
                    "Secret {key_name} has no valid operator key in data.token; delete the \
                     Secret and the operator creates a new key and restarts the pods"
                ),
            );
        }
        KeySecretState::NotOwned => {
            return (
                false,
                KEY_SECRET_NOT_OWNED,
                format!(
                    "Secret {key_name} exists but was not created by the operator for this \
                     TerdutServer; delete or rename it (the operator never adopts it)"
                ),
            );
        }
    }
    if let Some(what) = i.foreign_object {
        return (
            false,
            RESOURCE_NOT_OWNED,
            format!(
                "{what} exists but is not managed by this TerdutServer; the operator never \
                 adopts it (e.g. one installed by the terdut-server chart): delete it"
            ),
        );
    }
    let pending = match i.database {
        DatabaseOutcome::Blocked(issue) => return (false, issue.reason, issue.message.clone()),
        DatabaseOutcome::Wired { pending, .. } => pending.as_ref(),
    };
    if let Some((reason, message)) = i.missing_reference {
        return (false, reason, message.to_owned());
    }
    if i.replicas == 0 {
        return (
            false,
            SCALED_TO_ZERO,
            "spec.replicas is 0; set it to 1 or more to run the server".into(),
        );
    }
    let Some(d) = i.deployment else {
        return (
            false,
            PROGRESSING,
            format!("Deployment {deploy} applied; waiting for its controller to report"),
        );
    };
    let avail = format!("{} of {} pods available", d.available_replicas, i.replicas);
    if d.available_replicas >= 1 {
        return if d.rollout_complete(i.replicas) {
            (true, READY, avail)
        } else if let Some(m) = &d.stalled {
            // Still serving from the old pods, but the new spec will not roll out by itself:
            // something to act on, so not Ready (docs/runbook-server.md).
            (
                false,
                ROLLOUT_STALLED,
                format!("{avail}, but the rollout stalled: {m}"),
            )
        } else {
            (true, ROLLING_OUT, format!("{avail}; rollout in progress"))
        };
    }
    if let Some(m) = &d.replica_failure {
        return (false, REPLICA_FAILURE, format!("Deployment {deploy}: {m}"));
    }
    if let Some(issue) = pending {
        return (false, issue.reason, issue.message.clone());
    }
    if let Some(m) = &d.stalled {
        return (false, ROLLOUT_STALLED, format!("Deployment {deploy}: {m}"));
    }
    (
        false,
        PROGRESSING,
        format!(
            "Deployment {deploy} is rolling out: {avail}; a pod is available once it passes \
             its readiness probe (/readyz, ready when the database is)"
        ),
    )
}

/// A JSON merge patch for the status subresource, or `None` when nothing a user can see would
/// change. Every field is written (absent ones as `null`, which a merge patch deletes), so the
/// result does not depend on what was there before.
pub fn status_patch(
    current: Option<&TerdutServerStatus>,
    desired: &DesiredStatus,
    now: Time,
) -> Option<serde_json::Value> {
    let mut conditions = current.map(|s| s.conditions.clone()).unwrap_or_default();
    let progress = progress_of(reasons::PROGRESS, &desired.ready.reason);
    set_ready(
        &mut conditions,
        desired.ready.clone(),
        progress,
        now.clone(),
    );
    for extra in [&desired.pod_security, &desired.key_accepted]
        .into_iter()
        .flatten()
    {
        set_condition(&mut conditions, extra.clone(), now.clone());
    }
    let next = TerdutServerStatus {
        conditions,
        observed_generation: desired.observed_generation,
        credentials_secret_ref: desired.credentials_secret_ref.clone(),
        teams: Some(desired.teams.clone()),
        // The driver's, the same for every kind (`write/shared.rs`).
        plan: current.and_then(|s| s.plan.clone()),
        last_applied: current.and_then(|s| s.last_applied.clone()),
        url: desired.summary.url.clone(),
        available_replicas: desired.summary.available_replicas,
        key_fingerprint: desired.summary.key_fingerprint.clone(),
    };
    if current == Some(&next) {
        return None;
    }
    Some(json!({
        "status": {
            "conditions": next.conditions,
            "observedGeneration": next.observed_generation,
            "credentialsSecretRef": next.credentials_secret_ref,
            "teams": next.teams,
            "url": next.url,
            "availableReplicas": next.available_replicas,
            "keyFingerprint": next.key_fingerprint,
        }
    }))
}

/// The status after a pass that did `applied`, when to look again, and the Warning of a
/// not-Ready reason someone must act on (once per reason).
pub fn verdict(
    server: &terdut_crds::v1alpha1::TerdutServer,
    applied: &super::Applied,
) -> crate::pipeline::Verdict<DesiredStatus> {
    use crate::pipeline::{Announce, Next, Verdict};
    use crate::runtime::events::EventType;
    let generation = server.metadata.generation;
    let mut desired = applied.plan.status.clone();
    if let Some(e) = &applied.failure {
        desired.ready = DesiredCondition::ready(false, reasons::APPLY_FAILED, e.to_string())
            .at_generation(generation);
    }
    desired.key_accepted = Some(applied.published.check.condition(generation));
    let next = if applied.failure.is_some() {
        Next::Failed
    } else if applied.raced {
        Next::After(super::RACE_RETRY)
    } else if reasons::POLLED.contains(&desired.ready.reason.as_str())
        || !applied.published.check.accepted()
    {
        // Waiting on something no watch reports: look again soon, then less often.
        Next::Wait
    } else {
        Next::Resync
    };
    let ready = &desired.ready;
    let announce =
        (!ready.status && reasons::ANNOUNCED.contains(&ready.reason.as_str())).then(|| Announce {
            type_: EventType::Warning,
            reason: ready.reason.clone(),
            message: ready.message.clone(),
            on_message: false,
        });
    Verdict::new(desired, next).announce(announce)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::database::{DatabaseIssue, DatabaseWiring};
    use crate::server::key::OperatorKeyValue;
    use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use k8s_openapi::jiff::Timestamp;

    fn t(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    fn present() -> KeySecretState {
        KeySecretState::Present(OperatorKeyValue::from_entropy([1; 24]))
    }

    fn wired() -> DatabaseOutcome {
        DatabaseOutcome::Wired {
            wiring: DatabaseWiring {
                dsn: "postgres://x".into(),
                password: None,
            },
            pending: None,
        }
    }

    fn pending() -> DatabaseOutcome {
        DatabaseOutcome::Wired {
            wiring: DatabaseWiring {
                dsn: "postgres://x".into(),
                password: None,
            },
            pending: Some(DatabaseIssue {
                reason: reasons::DATABASE_CLUSTER_NOT_RUNNING,
                message: "pg is Creating".into(),
            }),
        }
    }

    fn obs(available: i32, updated: i32, total: i32) -> DeploymentObservation {
        DeploymentObservation {
            generation: Some(2),
            observed_generation: Some(2),
            replicas: total,
            updated_replicas: updated,
            available_replicas: available,
            stalled: None,
            replica_failure: None,
        }
    }

    fn decide(
        key: &KeySecretState,
        db: &DatabaseOutcome,
        d: Option<&DeploymentObservation>,
    ) -> DesiredStatus {
        desired_status(&StatusInputs {
            server_name: "terdut",
            generation: Some(3),
            replicas: 2,
            name_error: None,
            foreign_object: None,
            key,
            database: db,
            missing_reference: None,
            deployment: d,
            teams: TeamCounts {
                accepted: 2,
                refused: 1,
            },
        })
    }

    fn reason(s: &DesiredStatus) -> (bool, &str) {
        (s.ready.status, s.ready.reason.as_str())
    }

    #[test]
    fn complete_rollout_is_ready_with_credentials_ref() {
        let s = decide(&present(), &wired(), Some(&obs(2, 2, 2)));
        assert_eq!(reason(&s), (true, "Ready"));
        assert_eq!(s.observed_generation, Some(3));
        assert_eq!(s.ready.observed_generation, Some(3));
        assert_eq!(
            s.credentials_secret_ref,
            Some(SecretKeyRef {
                name: "terdut-operator-key".into(),
                key: "token".into()
            })
        );
        assert_eq!(s.teams.accepted, 2);
    }

    #[test]
    fn one_available_pod_serves_while_rolling_out() {
        let s = decide(&present(), &wired(), Some(&obs(1, 1, 3)));
        assert_eq!(reason(&s), (true, "RollingOut"));
        assert!(s.ready.message.contains("1 of 2 pods available"));
        let mut stale = obs(2, 2, 2);
        stale.observed_generation = Some(1);
        assert_eq!(
            reason(&decide(&present(), &wired(), Some(&stale))),
            (true, "RollingOut")
        );
    }

    #[test]
    fn no_available_pod_is_progressing() {
        // The steady state of a cluster without kubelets (the project's tests).
        let s = decide(&present(), &wired(), Some(&obs(0, 2, 2)));
        assert_eq!(reason(&s), (false, "Progressing"));
        assert!(s.ready.message.contains("0 of 2 pods available"));
        assert_eq!(
            reason(&decide(&present(), &wired(), None)),
            (false, "Progressing")
        );
    }

    #[test]
    fn database_reasons_explain_a_server_with_no_pods() {
        let s = decide(&present(), &pending(), Some(&obs(0, 2, 2)));
        assert_eq!(reason(&s), (false, "DatabaseClusterNotRunning"));
        // ...but do not take down a server that is serving.
        let s = decide(&present(), &pending(), Some(&obs(2, 2, 2)));
        assert_eq!(reason(&s), (true, "Ready"));
        let blocked = DatabaseOutcome::Blocked(DatabaseIssue {
            reason: reasons::POSTGRES_OPERATOR_NOT_INSTALLED,
            message: "install it".into(),
        });
        let s = decide(&present(), &blocked, Some(&obs(2, 2, 2)));
        assert_eq!(reason(&s), (false, "PostgresOperatorNotInstalled"));
        assert_eq!(s.ready.message, "install it");
    }

    #[test]
    fn key_problems_come_first_and_hide_the_credentials_ref() {
        for (key, want) in [
            (KeySecretState::Missing, "Progressing"),
            (KeySecretState::Invalid, "KeySecretInvalid"),
            (KeySecretState::NotOwned, "KeySecretNotOwned"),
        ] {
            let s = decide(&key, &wired(), Some(&obs(2, 2, 2)));
            assert_eq!(reason(&s), (false, want));
            assert!(s.ready.message.contains("terdut-operator-key"));
            assert_eq!(s.credentials_secret_ref, None);
        }
    }

    #[test]
    fn failures_and_zero_replicas() {
        let mut d = obs(0, 0, 0);
        d.replica_failure = Some("pods \"x\" is forbidden: violates PodSecurity".into());
        let s = decide(&present(), &wired(), Some(&d));
        assert_eq!(reason(&s), (false, "ReplicaFailure"));
        assert!(s.ready.message.contains("PodSecurity"));
        let mut d = obs(0, 2, 2);
        d.stalled = Some("exceeded its progress deadline".into());
        assert_eq!(
            reason(&decide(&present(), &wired(), Some(&d))),
            (false, "RolloutStalled")
        );
        // Stalled while old pods still serve: not Ready either (the runbook's reading).
        let mut serving = obs(1, 1, 3);
        serving.stalled = Some("exceeded its progress deadline".into());
        let s = decide(&present(), &wired(), Some(&serving));
        assert_eq!(reason(&s), (false, "RolloutStalled"));
        assert!(s.ready.message.contains("1 of 2 pods available"));
        let s = desired_status(&StatusInputs {
            server_name: "terdut",
            generation: Some(1),
            replicas: 0,
            name_error: None,
            foreign_object: None,
            key: &present(),
            database: &wired(),
            missing_reference: None,
            deployment: Some(&obs(0, 0, 0)),
            teams: TeamCounts::default(),
        });
        assert_eq!(reason(&s), (false, "ScaledToZero"));
        let s = desired_status(&StatusInputs {
            name_error: Some("bad name"),
            ..StatusInputs {
                server_name: "Bad",
                generation: Some(1),
                replicas: 1,
                name_error: None,
                foreign_object: None,
                key: &present(),
                database: &wired(),
                missing_reference: None,
                deployment: None,
                teams: TeamCounts::default(),
            }
        });
        assert_eq!(reason(&s), (false, "InvalidSpec"));
    }

    #[test]
    fn a_missing_referenced_secret_is_named_after_the_database() {
        let s = desired_status(&StatusInputs {
            missing_reference: Some((reasons::SECRET_NOT_FOUND, "Secret db does not exist")),
            ..StatusInputs {
                server_name: "terdut",
                generation: Some(1),
                replicas: 1,
                name_error: None,
                foreign_object: None,
                key: &present(),
                database: &wired(),
                missing_reference: None,
                deployment: None,
                teams: TeamCounts::default(),
            }
        });
        assert_eq!(reason(&s), (false, "SecretNotFound"));
        assert_eq!(s.ready.message, "Secret db does not exist");
    }

    #[test]
    fn observation_reads_deployment_status() {
        let d = Deployment {
            metadata: ObjectMeta {
                generation: Some(4),
                ..Default::default()
            },
            spec: Default::default(),
            status: Some(DeploymentStatus {
                observed_generation: Some(4),
                replicas: Some(2),
                updated_replicas: Some(2),
                available_replicas: Some(1),
                conditions: Some(vec![
                    DeploymentCondition {
                        type_: Some("Progressing".into()),
                        status: Some("False".into()),
                        reason: Some("ProgressDeadlineExceeded".into()),
                        message: Some("too slow".into()),
                        ..Default::default()
                    },
                    DeploymentCondition {
                        type_: Some("ReplicaFailure".into()),
                        status: Some("True".into()),
                        message: Some("forbidden".into()),
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            }),
        };
        let o = DeploymentObservation::from_deployment(&d);
        assert_eq!(o.generation, Some(4));
        assert_eq!(o.available_replicas, 1);
        assert_eq!(o.stalled.as_deref(), Some("too slow"));
        assert_eq!(o.replica_failure.as_deref(), Some("forbidden"));
        let empty = DeploymentObservation::from_deployment(&Deployment::default());
        assert_eq!(empty.available_replicas, 0);
        assert_eq!(empty.stalled, None);
    }

    #[test]
    fn patch_only_when_something_visible_changed() {
        let desired = decide(&present(), &wired(), Some(&obs(0, 2, 2)));
        let first = status_patch(None, &desired, t(10)).expect("first write");
        let written: TerdutServerStatus = serde_json::from_value(first["status"].clone()).unwrap();
        assert_eq!(written.observed_generation, Some(3));
        assert_eq!(written.conditions[0].last_transition_time, t(10));
        // Same decision later: nothing to write, whatever the clock says.
        assert_eq!(status_patch(Some(&written), &desired, t(99)), None);
        // Ready flips: written, with a new transition time.
        let ready = decide(&present(), &wired(), Some(&obs(2, 2, 2)));
        let p = status_patch(Some(&written), &ready, t(50)).unwrap();
        assert_eq!(p["status"]["conditions"][0]["status"], "True");
        assert_eq!(
            p["status"]["conditions"][0]["lastTransitionTime"],
            serde_json::to_value(t(50)).unwrap()
        );
    }

    fn kstatus(p: &serde_json::Value) -> Vec<(String, String, String)> {
        let st: TerdutServerStatus = serde_json::from_value(p["status"].clone()).unwrap();
        st.conditions
            .iter()
            .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
            .collect()
    }

    #[test]
    fn polled_and_announced_reasons_are_the_servers() {
        for r in reasons::POLLED.iter().chain(&reasons::ANNOUNCED) {
            assert!(reasons::PROGRESS.iter().any(|(t, _)| t == r), "{r}");
        }
    }

    #[test]
    fn reconciling_and_stalled_follow_the_ready_reason() {
        let owned = |v: &[(&str, &str, &str)]| -> Vec<(String, String, String)> {
            v.iter()
                .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
                .collect()
        };
        let p = status_patch(
            None,
            &decide(&present(), &wired(), Some(&obs(0, 2, 2))),
            t(1),
        );
        assert_eq!(
            kstatus(&p.unwrap()),
            owned(&[
                ("Ready", "False", "Progressing"),
                ("Reconciling", "True", "Progressing")
            ])
        );
        // Serving while rolling out: Ready, and still in progress.
        let p = status_patch(
            None,
            &decide(&present(), &wired(), Some(&obs(1, 1, 3))),
            t(1),
        );
        assert_eq!(
            kstatus(&p.unwrap()),
            owned(&[
                ("Ready", "True", "RollingOut"),
                ("Reconciling", "True", "RollingOut")
            ])
        );
        let p = status_patch(
            None,
            &decide(&KeySecretState::NotOwned, &wired(), None),
            t(1),
        );
        assert_eq!(
            kstatus(&p.unwrap()),
            owned(&[
                ("Ready", "False", "KeySecretNotOwned"),
                ("Stalled", "True", "KeySecretNotOwned")
            ])
        );
        let p = status_patch(
            None,
            &decide(&present(), &wired(), Some(&obs(2, 2, 2))),
            t(1),
        );
        assert_eq!(kstatus(&p.unwrap()), owned(&[("Ready", "True", "Ready")]));
        // Parked as asked: settled, neither condition.
        let mut zero = decide(&present(), &wired(), Some(&obs(0, 0, 0)));
        zero.ready = DesiredCondition::ready(false, reasons::SCALED_TO_ZERO, "0");
        let p = status_patch(None, &zero, t(1));
        assert_eq!(
            kstatus(&p.unwrap()),
            owned(&[("Ready", "False", "ScaledToZero")])
        );
    }

    #[test]
    fn patch_carries_the_summary_and_clears_it_when_gone() {
        let mut desired = decide(&present(), &wired(), Some(&obs(1, 2, 2)));
        desired.summary = Summary {
            url: Some("http://terdut.oncall.svc.cluster.local.:8080".into()),
            available_replicas: Some(1),
            key_fingerprint: Some("0123456789ab".into()),
        };
        let p = status_patch(None, &desired, t(1)).unwrap();
        assert_eq!(
            p["status"]["url"],
            "http://terdut.oncall.svc.cluster.local.:8080"
        );
        assert_eq!(p["status"]["availableReplicas"], 1);
        assert_eq!(p["status"]["keyFingerprint"], "0123456789ab");
        let written: TerdutServerStatus = serde_json::from_value(p["status"].clone()).unwrap();
        assert_eq!(status_patch(Some(&written), &desired, t(2)), None);
        desired.summary = Summary::default();
        let p = status_patch(Some(&written), &desired, t(3)).unwrap();
        assert!(p["status"]["keyFingerprint"].is_null() && p["status"]["url"].is_null());
    }

    #[test]
    fn patch_clears_what_is_gone() {
        let good = decide(&present(), &wired(), Some(&obs(2, 2, 2)));
        let written: TerdutServerStatus =
            serde_json::from_value(status_patch(None, &good, t(1)).unwrap()["status"].clone())
                .unwrap();
        let bad = decide(&KeySecretState::Invalid, &wired(), Some(&obs(2, 2, 2)));
        let p = status_patch(Some(&written), &bad, t(2)).unwrap();
        assert!(p["status"]["credentialsSecretRef"].is_null());
        assert!(
            p["status"]
                .as_object()
                .unwrap()
                .contains_key("credentialsSecretRef")
        );
    }
}
