//! Pure helpers over `metav1.Condition` lists (docs/design.md §7: every kind has a `Ready`
//! condition).
//!
//! Status is written only when it changes (no hot loops): [`set_condition`] reports whether
//! anything a user could see changed, and keeps `lastTransitionTime` unless the condition's
//! status flipped, as the Kubernetes API conventions ask.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// The one condition type every kind carries.
pub const READY: &str = "Ready";

/// What a controller wants a condition to say; the timestamp is filled in by [`set_condition`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredCondition {
    pub type_: String,
    pub status: bool,
    pub reason: String,
    pub message: String,
    pub observed_generation: Option<i64>,
}

impl DesiredCondition {
    pub fn ready(status: bool, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            type_: READY.into(),
            status,
            reason: reason.into(),
            message: message.into(),
            observed_generation: None,
        }
    }

    pub fn at_generation(mut self, generation: Option<i64>) -> Self {
        self.observed_generation = generation;
        self
    }
}

fn status_str(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// Upserts `want` into `conditions`. Returns true when the list changed.
pub fn set_condition(conditions: &mut Vec<Condition>, want: DesiredCondition, now: Time) -> bool {
    let status = status_str(want.status);
    match conditions.iter_mut().find(|c| c.type_ == want.type_) {
        Some(c) => {
            let same = c.status == status
                && c.reason == want.reason
                && c.message == want.message
                && c.observed_generation == want.observed_generation;
            if same {
                return false;
            }
            if c.status != status {
                c.last_transition_time = now;
            }
            c.status = status.into();
            c.reason = want.reason;
            c.message = want.message;
            c.observed_generation = want.observed_generation;
            true
        }
        None => {
            conditions.push(Condition {
                type_: want.type_,
                status: status.into(),
                reason: want.reason,
                message: want.message,
                observed_generation: want.observed_generation,
                last_transition_time: now,
            });
            true
        }
    }
}

/// The condition of `type_`, if present.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// True when `Ready` is `True`.
pub fn is_ready(conditions: &[Condition]) -> bool {
    find(conditions, READY).is_some_and(|c| c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn t(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    #[test]
    fn adds_a_missing_condition() {
        let mut cs = vec![];
        assert!(set_condition(
            &mut cs,
            DesiredCondition::ready(true, "Ready", "ok"),
            t(10)
        ));
        assert_eq!(cs.len(), 1);
        assert_eq!(cs[0].status, "True");
        assert_eq!(cs[0].last_transition_time, t(10));
    }

    #[test]
    fn unchanged_condition_is_not_a_change() {
        let mut cs = vec![];
        set_condition(&mut cs, DesiredCondition::ready(true, "Ready", "ok"), t(10));
        assert!(!set_condition(
            &mut cs,
            DesiredCondition::ready(true, "Ready", "ok"),
            t(20)
        ));
        assert_eq!(cs[0].last_transition_time, t(10));
    }

    #[test]
    fn message_change_keeps_transition_time() {
        let mut cs = vec![];
        set_condition(
            &mut cs,
            DesiredCondition::ready(false, "WaitingForServer", "a"),
            t(10),
        );
        assert!(set_condition(
            &mut cs,
            DesiredCondition::ready(false, "UnknownUser", "b"),
            t(20)
        ));
        assert_eq!(cs[0].last_transition_time, t(10));
        assert_eq!(cs[0].reason, "UnknownUser");
    }

    #[test]
    fn status_flip_moves_transition_time() {
        let mut cs = vec![];
        set_condition(
            &mut cs,
            DesiredCondition::ready(false, "WaitingForServer", "a"),
            t(10),
        );
        assert!(set_condition(
            &mut cs,
            DesiredCondition::ready(true, "Ready", "a"),
            t(20)
        ));
        assert_eq!(cs[0].last_transition_time, t(20));
        assert!(is_ready(&cs));
    }
}
