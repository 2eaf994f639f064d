//! `terdut_operator_objects{kind,ready,reason}` (docs/observability.md): how many objects of
//! each kind the leader's caches hold, by the status and reason of their Ready condition. The
//! alert `TerdutObjectsNotReady` and the dashboard's object panels read it.
//!
//! Counted from the informer caches every [`PERIOD`], not on every event: a pass over 10,000
//! cached objects reads one condition list each (a millisecond or so), while an update per
//! event would cost a lock and a lookup on every status write of every object. A combination
//! that empties goes to 0 (`OperatorMetrics::set_objects`), so an alert on it resolves.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::context::{Ctx, Stores};
use crate::kind::Kind;
use crate::runtime::metrics::ObjectLabels;

/// How often the caches are counted: well under a scrape interval.
pub const PERIOD: Duration = Duration::from_secs(5);

/// Adds one object of `kind` with `conditions` to `counts`.
pub fn add(counts: &mut BTreeMap<ObjectLabels, i64>, kind: Kind, conditions: &[Condition]) {
    let ready = conditions.iter().find(|c| c.type_ == "Ready");
    let (status, reason) = match ready {
        Some(c) if c.status == "True" || c.status == "False" => (c.status.as_str(), &*c.reason),
        Some(c) => ("Unknown", &*c.reason),
        None => ("Unknown", ""),
    };
    *counts
        .entry(ObjectLabels {
            kind: kind.label().to_owned(),
            ready: status.to_owned(),
            reason: reason.to_owned(),
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
        add(&mut counts, Kind::Server, &[cond("Ready", "Maybe", "Odd")]);
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
                (key("server", "Unknown", "Odd"), 1),
                (key("server", "Unknown", ""), 1),
            ])
        );
    }
}
