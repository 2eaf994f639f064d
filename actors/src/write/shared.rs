//! The parts of a status every kind writes the same way (docs/design.md §5 "Pause",
//! "Management"): the `Paused` condition, `status.plan` and `status.lastApplied`. PURE: the
//! driver says what they should be, [`overlay`] puts them on the status JSON the kind made.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::{Map, Value, json};
use terdut_crds::v1alpha1::conditions::{DesiredCondition, paused, set_condition};

/// The `Paused` condition type.
pub const PAUSED: &str = paused::TYPE;

/// At most this many lines of a plan or of the last applied changes; one more says how many
/// were left out.
pub const MAX_CHANGES: usize = 20;

/// Why an object is paused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PausedBy {
    /// Its own `terdut.ryuvia.com/paused: "true"` annotation.
    Annotation,
    /// An alert source whose TerdutTeam is paused (named).
    Team(String),
}

impl PausedBy {
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Annotation => paused::BY_ANNOTATION,
            Self::Team(_) => paused::BY_TEAM,
        }
    }

    pub fn message(&self, kind: &str) -> String {
        match self {
            Self::Annotation => format!(
                "reconciliation is paused by the annotation {}=\"true\": nothing is written to \
                 the server or to Kubernetes for this {kind}; remove it to resume (deleting the \
                 {kind} still cleans up, unless spec.deletionPolicy is Orphan)",
                crate::names::PAUSE_ANNOTATION
            ),
            Self::Team(team) => format!(
                "its TerdutTeam {team} is paused, so nothing is written to the server for this \
                 {kind} either; resume the team to resume it"
            ),
        }
    }
}

/// What the driver sets this pass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shared {
    /// `Some`: `Paused=True`; `None`: no `Paused` condition.
    pub paused: Option<PausedBy>,
    /// `Some(lines)`: `status.plan` becomes them (removed when empty); `None`: left alone.
    pub plan: Option<Vec<String>>,
    /// `Some(lines)`, not empty: `status.lastApplied` becomes them, stamped now.
    pub applied: Option<Vec<String>>,
}

/// The Ready message of an `ObserveOnly` object with `changes` planned (every kind's).
pub fn observe_only_message(changes: usize, what: &str) -> String {
    format!(
        "spec.management is ObserveOnly: {changes} change(s) to the {what} planned (status.plan), \
         none made; set it to Full to apply exactly those"
    )
}

/// `lines`, cut to [`MAX_CHANGES`] with a last line saying how many more there were.
pub fn bounded(mut lines: Vec<String>) -> Vec<String> {
    if lines.len() > MAX_CHANGES {
        let more = lines.len() - MAX_CHANGES;
        lines.truncate(MAX_CHANGES);
        lines.push(format!("… and {more} more"));
    }
    lines
}

/// Puts `shared` on `status` (a JSON object: the status as the kind would write it).
/// `kind` names the object in the Paused message.
pub fn overlay(
    status: &mut Map<String, Value>,
    shared: &Shared,
    kind: &str,
    generation: Option<i64>,
    now: &Time,
) {
    let mut conditions: Vec<Condition> = status
        .get("conditions")
        .cloned()
        .and_then(|c| serde_json::from_value(c).ok())
        .unwrap_or_default();
    match &shared.paused {
        Some(by) => {
            set_condition(
                &mut conditions,
                DesiredCondition {
                    type_: PAUSED.into(),
                    status: true,
                    reason: by.reason().into(),
                    message: by.message(kind),
                    observed_generation: generation,
                },
                now.clone(),
            );
        }
        None => conditions.retain(|c| c.type_ != PAUSED),
    }
    if conditions.is_empty() {
        status.remove("conditions");
    } else {
        status.insert("conditions".into(), json!(conditions));
    }
    match &shared.plan {
        Some(lines) if lines.is_empty() => {
            status.remove("plan");
        }
        Some(lines) => {
            status.insert("plan".into(), json!(bounded(lines.clone())));
        }
        None => {}
    }
    if let Some(lines) = shared.applied.as_ref().filter(|l| !l.is_empty()) {
        let lines = bounded(lines.clone());
        let same = status
            .get("lastApplied")
            .and_then(|a| a.get("changes"))
            .is_some_and(|c| *c == json!(lines));
        // The same changes again (drift put back twice) keep their first time: no write for it.
        if !same {
            status.insert("lastApplied".into(), json!({"time": now, "changes": lines}));
        }
    }
}

/// The merge patch that turns `current` into `next` (both status objects): changed or new
/// keys with their value, removed keys as `null`; `None` when they are equal.
pub fn diff(current: &Map<String, Value>, next: &Map<String, Value>) -> Option<Value> {
    let mut patch = Map::new();
    for (k, v) in next {
        if current.get(k) != Some(v) {
            patch.insert(k.clone(), v.clone());
        }
    }
    for k in current.keys() {
        if !next.contains_key(k) {
            patch.insert(k.clone(), Value::Null);
        }
    }
    (!patch.is_empty()).then(|| json!({ "status": patch }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).unwrap())
    }

    fn object(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_pause_adds_its_condition_and_a_resume_removes_it_and_nothing_else() {
        let mut status = object(json!({"teamID": 3, "conditions": [
            {"type": "Ready", "status": "True", "reason": "Ready", "message": "ok",
             "lastTransitionTime": "2026-01-01T00:00:00Z"}]}));
        let before = status.clone();
        let paused = Shared {
            paused: Some(PausedBy::Team("payments".into())),
            ..Shared::default()
        };
        overlay(&mut status, &paused, "TerdutAlertSource", Some(2), &now());
        let conditions = status["conditions"].as_array().unwrap();
        assert_eq!(conditions.len(), 2);
        assert_eq!(conditions[1]["type"], "Paused");
        assert_eq!(conditions[1]["reason"], "PausedByTeam");
        assert!(
            conditions[1]["message"]
                .as_str()
                .unwrap()
                .contains("payments")
        );
        let patch = diff(&before, &status).unwrap();
        assert!(patch["status"].get("teamID").is_none(), "{patch}");

        overlay(
            &mut status,
            &Shared::default(),
            "TerdutAlertSource",
            Some(2),
            &now(),
        );
        assert_eq!(status, before);
        assert_eq!(diff(&before, &status), None, "nothing to write");
    }

    #[test]
    fn a_plan_is_set_bounded_and_cleared_and_applied_changes_keep_their_first_time() {
        let mut status = Map::new();
        let lines: Vec<String> = (0..25).map(|i| format!("change {i}")).collect();
        overlay(
            &mut status,
            &Shared {
                plan: Some(lines.clone()),
                ..Shared::default()
            },
            "TerdutTeam",
            None,
            &now(),
        );
        let plan = status["plan"].as_array().unwrap();
        assert_eq!(plan.len(), MAX_CHANGES + 1);
        assert_eq!(plan[MAX_CHANGES], "… and 5 more");

        let clear = Shared {
            plan: Some(vec![]),
            applied: Some(vec!["rename team 4 to \"B\"".into()]),
            ..Shared::default()
        };
        overlay(&mut status, &clear, "TerdutTeam", None, &now());
        assert!(!status.contains_key("plan"));
        let first = status["lastApplied"].clone();
        assert_eq!(first["changes"], json!(["rename team 4 to \"B\""]));
        let later = Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_100).unwrap());
        overlay(&mut status, &clear, "TerdutTeam", None, &later);
        assert_eq!(status["lastApplied"], first, "same changes, same time");
        // No plan line ever carries more than the kind put in it: the caller's lines.
        assert_eq!(
            diff(&Map::new(), &object(json!({"plan": ["a"]}))),
            Some(json!({"status": {"plan": ["a"]}}))
        );
        assert_eq!(
            diff(&object(json!({"plan": ["a"]})), &Map::new()),
            Some(json!({"status": {"plan": null}}))
        );
    }
}
