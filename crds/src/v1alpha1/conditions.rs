//! Pure helpers over `metav1.Condition` lists (docs/design.md §7: every kind has a `Ready`
//! condition, and the kstatus conditions `Reconciling` and `Stalled`).
//!
//! Status is written only when it changes (no hot loops): [`set_condition`] reports whether
//! anything a user could see changed, and keeps `lastTransitionTime` unless the condition's
//! status flipped, as the Kubernetes API conventions ask.
//!
//! **One rule for every kind** (docs/design.md §7): each Ready reason is classified once, as a
//! [`Progress`], in its kind's reason table, and [`set_ready`] derives `Reconciling` and
//! `Stalled` from that classification. Both are "abnormal-true" (kstatus): present, with
//! status True and Ready's reason, message and generation, while they hold, and removed
//! otherwise, so a converged object carries neither and a resync writes nothing.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// The one condition type every kind carries.
pub const READY: &str = "Ready";
/// kstatus: present (True) while the operator is working towards the spec and expects to get
/// there without anyone changing anything.
pub const RECONCILING: &str = "Reconciling";
/// kstatus: present (True) while the object cannot progress until someone changes something
/// (its spec, another object, the server's data).
pub const STALLED: &str = "Stalled";

/// The `Paused` condition (docs/design.md §5 "Pause"): present (True) while the object is paused.
pub mod paused {
    pub const TYPE: &str = "Paused";
    /// Its own `terdut.ryuvia.com/paused: "true"` annotation.
    pub const BY_ANNOTATION: &str = "PausedByAnnotation";
    /// An alert source whose TerdutTeam is paused.
    pub const BY_TEAM: &str = "PausedByTeam";
}

/// What a Ready reason says about progress: the classification `Reconciling` and `Stalled`
/// are derived from (docs/design.md §7; the table is in docs/gitops.md); each reason's is
/// `Reason::progress` (in `reason`, which names this type).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Progress {
    /// Nothing in flight and nothing to fix: converged, or parked as the spec asks
    /// (`ScaledToZero`, `ObserveOnly`). Neither condition is present; kstatus reads a parked
    /// object's `Ready=False` as in progress all the same (docs/gitops.md).
    Settled,
    /// Work in progress that ends on its own: a rollout, a server starting, a referent that
    /// may still be on its way, a retry after a failure. `Reconciling=True`.
    Reconciling,
    /// A terminal state someone has to resolve: an invalid spec, a name or object that belongs
    /// to someone else, a refused consent, a parked crash loop. `Stalled=True`.
    Stalled,
}

impl Progress {
    /// The name used in docs/gitops.md's table.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Settled => "Settled",
            Self::Reconciling => "Reconciling",
            Self::Stalled => "Stalled",
        }
    }
}

/// The [`Progress`] of `reason` in a kind's reason table. A reason missing from the table
/// (a bug: every kind's tests check that each reason is listed) counts as `Reconciling`,
/// which kstatus reads as in progress: never Current nor Failed by mistake.
pub fn progress_of(table: &[(&str, Progress)], reason: &str) -> Progress {
    table
        .iter()
        .find(|(r, _)| *r == reason)
        .map_or(Progress::Reconciling, |(_, p)| *p)
}

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

/// Removes the condition of `type_`. Returns true when there was one.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// Sets `ready` and the kstatus conditions its `progress` implies: `Reconciling` or `Stalled`
/// True, with Ready's reason, message and observed generation, and the other one removed
/// (both removed when settled). Returns true when the list changed.
pub fn set_ready(
    conditions: &mut Vec<Condition>,
    ready: DesiredCondition,
    progress: Progress,
    now: Time,
) -> bool {
    // Ready first: a new list starts with it, where `kubectl describe` and readers look first.
    let mut changed = set_condition(conditions, ready.clone(), now.clone());
    for (type_, holds) in [
        (RECONCILING, progress == Progress::Reconciling),
        (STALLED, progress == Progress::Stalled),
    ] {
        changed |= if holds {
            set_condition(
                conditions,
                DesiredCondition {
                    type_: type_.into(),
                    status: true,
                    ..ready.clone()
                },
                now.clone(),
            )
        } else {
            remove_condition(conditions, type_)
        };
    }
    changed
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

    fn types(cs: &[Condition]) -> Vec<(&str, &str)> {
        cs.iter()
            .map(|c| (c.type_.as_str(), c.status.as_str()))
            .collect()
    }

    #[test]
    fn set_ready_derives_reconciling_and_stalled_from_progress() {
        let mut cs = vec![];
        let waiting =
            DesiredCondition::ready(false, "WaitingForServer", "starting").at_generation(Some(2));
        assert!(set_ready(
            &mut cs,
            waiting.clone(),
            Progress::Reconciling,
            t(10)
        ));
        assert_eq!(types(&cs), [("Ready", "False"), ("Reconciling", "True")]);
        let r = find(&cs, RECONCILING).unwrap();
        assert_eq!(
            (r.reason.as_str(), r.message.as_str(), r.observed_generation),
            ("WaitingForServer", "starting", Some(2))
        );
        assert!(!set_ready(&mut cs, waiting, Progress::Reconciling, t(20)));

        let taken = DesiredCondition::ready(false, "TeamNameTaken", "taken").at_generation(Some(2));
        assert!(set_ready(&mut cs, taken.clone(), Progress::Stalled, t(30)));
        assert_eq!(types(&cs), [("Ready", "False"), ("Stalled", "True")]);
        assert_eq!(find(&cs, STALLED).unwrap().last_transition_time, t(30));
        // Another terminal reason keeps Stalled's transition time, like Ready's.
        let unknown = DesiredCondition::ready(false, "UnknownUser", "who").at_generation(Some(2));
        assert!(set_ready(&mut cs, unknown, Progress::Stalled, t(40)));
        assert_eq!(find(&cs, STALLED).unwrap().last_transition_time, t(30));
        assert_eq!(find(&cs, STALLED).unwrap().reason, "UnknownUser");

        let ready = DesiredCondition::ready(true, "Ready", "ok").at_generation(Some(2));
        assert!(set_ready(&mut cs, ready.clone(), Progress::Settled, t(50)));
        assert_eq!(types(&cs), [("Ready", "True")]);
        assert!(
            !set_ready(&mut cs, ready, Progress::Settled, t(60)),
            "converged: no write"
        );
    }

    #[test]
    fn set_ready_leaves_other_conditions_alone() {
        let mut cs = vec![];
        set_condition(
            &mut cs,
            DesiredCondition {
                type_: paused::TYPE.into(),
                status: true,
                reason: paused::BY_ANNOTATION.into(),
                message: "paused".into(),
                observed_generation: None,
            },
            t(1),
        );
        set_ready(
            &mut cs,
            DesiredCondition::ready(false, "InvalidSpec", "bad"),
            Progress::Stalled,
            t(2),
        );
        assert_eq!(
            types(&cs),
            [("Paused", "True"), ("Ready", "False"), ("Stalled", "True")]
        );
    }

    #[test]
    fn an_unlisted_reason_reads_as_in_progress() {
        let table = [("Ready", Progress::Settled), ("Bad", Progress::Stalled)];
        assert_eq!(progress_of(&table, "Ready"), Progress::Settled);
        assert_eq!(progress_of(&table, "Bad"), Progress::Stalled);
        assert_eq!(progress_of(&table, "New"), Progress::Reconciling);
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
