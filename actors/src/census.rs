//! `terdut_operator_objects{kind,ready,reason}` (docs/observability.md): how many objects of
//! each kind the leader's caches hold, by the status and reason of their Ready condition. The
//! alert `TerdutObjectsNotReady` and the dashboard's object panels read it.
//!
//! Counted from the informer caches every [`PERIOD`], not on every event: a pass over 10,000
//! cached objects reads one condition list each (a millisecond or so), while an update per
//! event would cost a lock and a lookup on every status write of every object. A combination
//! that empties goes to 0 (`OperatorMetrics::set_objects`), so an alert on it resolves, and is
//! dropped once it has stayed empty for a minute.
//!
//! **A tenant cannot mint series.** A status is the tenant's to write (pause the object and
//! the operator leaves it as written), so the reason label is only ever one of the kind's own
//! reasons (its `PROGRESS` table, which every kind's tests hold complete) or [`OTHER`]; the
//! status label is `True`, `False` or `Unknown`. The label sets are therefore bounded by the
//! three tables, whatever anyone writes (docs/observability.md).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use terdut_crds::v1alpha1::conditions::Progress;

use crate::context::{Ctx, Stores};
use crate::kind::Kind;
use crate::runtime::metrics::ObjectLabels;

/// How often the caches are counted: well under a scrape interval.
pub const PERIOD: Duration = Duration::from_secs(5);

/// The reason label of a Ready reason that is not one of the kind's own.
pub const OTHER: &str = "Other";

/// The Ready reasons the operator writes for `kind`.
pub fn known_reasons(kind: Kind) -> &'static [(&'static str, Progress)] {
    match kind {
        Kind::Server => terdut_crds::v1alpha1::server::reasons::PROGRESS,
        Kind::Team => terdut_crds::v1alpha1::team::reasons::PROGRESS,
        Kind::Source => terdut_crds::v1alpha1::alert_source::reasons::PROGRESS,
    }
}

/// The reason label for `reason` on an object of `kind`: the reason itself when the operator
/// writes it for that kind, empty when there is no Ready condition, else [`OTHER`].
pub fn reason_label(kind: Kind, reason: Option<&str>) -> &'static str {
    let Some(reason) = reason else {
        return "";
    };
    known_reasons(kind)
        .iter()
        .find(|(r, _)| *r == reason)
        .map_or(OTHER, |(r, _)| *r)
}

/// Adds one object of `kind` with `conditions` to `counts`.
pub fn add(counts: &mut BTreeMap<ObjectLabels, i64>, kind: Kind, conditions: &[Condition]) {
    let ready = conditions
        .iter()
        .find(|c| c.type_ == terdut_crds::v1alpha1::conditions::READY);
    let status = match ready {
        Some(c) if c.status == "True" => "True",
        Some(c) if c.status == "False" => "False",
        _ => "Unknown",
    };
    *counts
        .entry(ObjectLabels {
            kind: kind.label().to_owned(),
            ready: status.to_owned(),
            reason: reason_label(kind, ready.map(|c| c.reason.as_str())).to_owned(),
        })
        .or_insert(0) += 1;
}

/// Counts every cached TerdutServer, TerdutTeam and TerdutAlertSource.
pub fn census(stores: &Stores) -> BTreeMap<ObjectLabels, i64> {
    let mut counts = BTreeMap::new();
    for s in stores.servers.state() {
        add(
            &mut counts,
            Kind::Server,
            conditions(s.status.as_ref().map(|s| &s.conditions)),
        );
    }
    for t in stores.teams.state() {
        add(
            &mut counts,
            Kind::Team,
            conditions(t.status.as_ref().map(|s| &s.conditions)),
        );
    }
    for a in stores.sources.state() {
        add(
            &mut counts,
            Kind::Source,
            conditions(a.status.as_ref().map(|s| &s.conditions)),
        );
    }
    counts
}

fn conditions(c: Option<&Vec<Condition>>) -> &[Condition] {
    c.map_or(&[], Vec::as_slice)
}

/// Counts every [`PERIOD`] into the gauge, for as long as the leader runs.
pub async fn run(ctx: Ctx) {
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        ctx.metrics.set_objects(&census(&ctx.stores));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(type_: &str, status: &str, reason: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ),
            observed_generation: None,
        }
    }

    fn key(kind: &str, ready: &str, reason: &str) -> ObjectLabels {
        ObjectLabels {
            kind: kind.into(),
            ready: ready.into(),
            reason: reason.into(),
        }
    }

    #[test]
    fn objects_are_counted_by_kind_ready_and_reason() {
        let mut counts = BTreeMap::new();
        let ready = [cond("Ready", "True", "Ready")];
        let refused = [
            cond("Paused", "True", "PausedByAnnotation"),
            cond("Ready", "False", "RefNotPermitted"),
        ];
        add(&mut counts, Kind::Team, &ready);
        add(&mut counts, Kind::Team, &ready);
        add(&mut counts, Kind::Team, &refused);
        add(&mut counts, Kind::Source, &[]);
        add(
            &mut counts,
            Kind::Server,
            &[cond("Ready", "Maybe", "Progressing")],
        );
        add(
            &mut counts,
            Kind::Server,
            &[cond("KeyAccepted", "True", "Accepted")],
        );
        assert_eq!(
            counts,
            BTreeMap::from([
                (key("team", "True", "Ready"), 2),
                (key("team", "False", "RefNotPermitted"), 1),
                (key("source", "Unknown", ""), 1),
                (key("server", "Unknown", "Progressing"), 1),
                (key("server", "Unknown", ""), 1),
            ])
        );
    }

    #[test]
    fn a_reason_the_kind_does_not_write_counts_as_other() {
        let mut counts = BTreeMap::new();
        // A paused team's status, written by its tenant: a new string every time.
        for i in 0..100 {
            let forged = format!("Forged{i}");
            add(&mut counts, Kind::Team, &[cond("Ready", "False", &forged)]);
            add(&mut counts, Kind::Team, &[cond("Ready", &forged, "Ready")]);
        }
        // A server's reason on a team is not a team's.
        add(
            &mut counts,
            Kind::Team,
            &[cond("Ready", "False", "RolloutStalled")],
        );
        add(
            &mut counts,
            Kind::Source,
            &[cond("Ready", "False", "WaitingForTeam")],
        );
        assert_eq!(
            counts,
            BTreeMap::from([
                (key("team", "False", OTHER), 101),
                (key("team", "Unknown", "Ready"), 100),
                (key("source", "False", "WaitingForTeam"), 1),
            ])
        );
    }

    #[test]
    fn every_label_set_comes_from_the_kinds_tables() {
        for kind in [Kind::Server, Kind::Team, Kind::Source] {
            for (reason, _) in known_reasons(kind) {
                assert_eq!(reason_label(kind, Some(reason)), *reason);
            }
            assert_eq!(reason_label(kind, Some("")), OTHER);
            assert_eq!(reason_label(kind, None), "");
        }
    }
}
