//! `kubectl terdut why KIND/NAME`: everything that says why an object is in the state it is,
//! in one place: its conditions, its last Events, the operator's plan when it publishes one,
//! and the runbook rows for its reasons.

use anyhow::Context as _;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DynamicObject, ListParams};
use kube::{Api, Client};
use serde_json::Value;
use terdut_crds::v1alpha1::conditions::{READY, paused};

use crate::age::age;
use crate::escape::field;
use crate::kinds::{Kind, KindName};
use crate::runbook;
use crate::table::layout;
use crate::view::{Common, ServerView, SourceView, TeamView};

/// What `why` shows, read once.
#[derive(Clone, Debug)]
pub struct Why {
    pub object: DynamicObject,
    pub events: Vec<Event>,
}

pub async fn collect(client: &Client, namespace: &str, target: &KindName) -> anyhow::Result<Why> {
    let object = target
        .kind
        .api(client, Some(namespace))
        .get(&target.name)
        .await
        .with_context(|| format!("reading {} {namespace}/{}", target.kind, target.name))?;
    let uid = object.metadata.uid.clone().unwrap_or_default();
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let mut events = events
        .list(&ListParams::default().fields(&format!("regarding.uid={uid}")))
        .await
        .context("listing the object's Events")?
        .items;
    events.sort_by_key(last_seen);
    Ok(Why { object, events })
}

/// When an Event last happened: its series' last time, else its own.
fn last_seen(e: &Event) -> Option<Timestamp> {
    e.series
        .as_ref()
        .map(|s| s.last_observed_time.0)
        .or_else(|| e.event_time.as_ref().map(|t| t.0))
        .or_else(|| e.deprecated_last_timestamp.as_ref().map(|t| t.0))
        .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

pub fn render(kind: Kind, why: &Why, max_events: usize, now: Timestamp) -> String {
    let c = Common::of(kind, &why.object);
    let mut out = format!("{} {}/{}\n", kind, c.namespace, c.name);
    for line in summary(kind, &why.object, &c) {
        out.push_str(&format!("  {}\n", field(&line)));
    }

    out.push_str("\nConditions:\n");
    if c.conditions.is_empty() {
        out.push_str("  none yet: the operator has not written a status (is it running?)\n");
    } else {
        let mut rows = vec![
            ["TYPE", "STATUS", "REASON", "SINCE", "MESSAGE"]
                .map(String::from)
                .to_vec(),
        ];
        for cond in &c.conditions {
            rows.push(vec![
                cond.type_.clone(),
                cond.status.clone(),
                cond.reason.clone(),
                age(cond.last_transition_time, now),
                cond.message.clone(),
            ]);
        }
        out.push_str(&indent(&layout(&rows)));
    }

    let shown = why.events.len().saturating_sub(max_events);
    out.push_str(&format!(
        "\nEvents (last {} of {}, newest last):\n",
        why.events.len() - shown,
        why.events.len()
    ));
    if why.events.is_empty() {
        out.push_str("  none\n");
    } else {
        let mut rows = vec![
            ["LAST", "TYPE", "REASON", "ACTION", "COUNT", "NOTE"]
                .map(String::from)
                .to_vec(),
        ];
        for e in &why.events[shown..] {
            rows.push(vec![
                age(last_seen(e), now),
                e.type_.clone().unwrap_or_default(),
                e.reason.clone().unwrap_or_default(),
                e.action.clone().unwrap_or_default(),
                e.series.as_ref().map_or(1, |s| s.count).to_string(),
                e.note.clone().unwrap_or_default(),
            ]);
        }
        out.push_str(&indent(&layout(&rows)));
    }

    out.push_str("\nPlan:\n");
    match why
        .object
        .data
        .pointer("/status/plan")
        .and_then(Value::as_array)
    {
        Some(steps) if !steps.is_empty() => {
            for s in steps {
                let step = s.as_str().map_or_else(|| s.to_string(), str::to_owned);
                out.push_str(&format!("  - {}\n", field(&step)));
            }
        }
        Some(_) => out.push_str("  nothing to do\n"),
        None => out.push_str(
            "  none published: the operator writes status.plan for spec.management: ObserveOnly\n",
        ),
    }
    if let Some(last) = why.object.data.pointer("/status/lastApplied") {
        let time = last.get("time").and_then(Value::as_str).unwrap_or("?");
        out.push_str(&format!("\nLast applied ({}):\n", field(time)));
        for c in last
            .get("changes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            out.push_str(&format!("  - {}\n", field(c.as_str().unwrap_or_default())));
        }
    }

    out.push_str("\nRunbook:\n");
    out.push_str(&runbook_section(kind, &c));
    out
}

/// Lines under the title: what the object is attached to, its ids, and what is pending.
fn summary(kind: Kind, obj: &DynamicObject, c: &Common) -> Vec<String> {
    let mut lines = vec![];
    match kind {
        Kind::Server => {
            let s = ServerView::of(obj);
            lines.push(format!("consent: from {}", s.consent));
            if let (Some(a), Some(r)) = (s.teams_accepted, s.teams_refused) {
                lines.push(format!("teams: {a} accepted, {r} refused"));
            }
            if let Some(k) = &s.key_fingerprint {
                lines.push(format!("key fingerprint: {k}"));
            }
            if let Some(u) = &s.url {
                lines.push(format!("API: {u}"));
            }
            if let Some(n) = s.available_replicas {
                lines.push(format!("pods available: {n}"));
            }
        }
        Kind::Team => {
            let t = TeamView::of(obj);
            lines.push(format!("server: {}/{}", t.server.0, t.server.1));
            lines.push(format!(
                "team id: {}",
                t.team_id.map_or_else(|| "-".into(), |i| i.to_string())
            ));
        }
        Kind::Source => {
            let s = SourceView::of(obj);
            lines.push(format!("team: {}/{}", c.namespace, s.team));
            lines.push(format!(
                "integration id: {}",
                s.integration_id
                    .map_or_else(|| "-".into(), |i| i.to_string())
            ));
            if let Some(secret) = s.webhook_secret {
                lines.push(format!("webhook Secret: {secret} (data keys url and key)"));
            }
        }
    }
    if let (Some(g), Some(o)) = (c.generation, c.observed_generation)
        && o < g
    {
        lines.push(format!(
            "generation {g}, observed {o}: the last spec change is not applied yet"
        ));
    }
    if c.paused {
        lines.push(
            "paused (terdut.ryuvia.com/paused=true): `kubectl terdut resume` lifts it".into(),
        );
    }
    if c.deleting {
        lines.push("being deleted: the operator cleans up on the server first".into());
    }
    lines
}

/// The rows for the Ready reason and for every other condition that is not True.
fn runbook_section(kind: Kind, c: &Common) -> String {
    let mut out = String::new();
    let wanted: Vec<_> = c
        .conditions
        .iter()
        .filter(|cond| cond.type_ == READY || (cond.status != "True" && cond.type_ != paused::TYPE))
        .collect();
    if wanted.is_empty() {
        let (file, anchor) = kind.runbook();
        out.push_str(&format!("  {file}{anchor}\n"));
    }
    for cond in wanted {
        match runbook::lookup(kind, &cond.type_, &cond.reason) {
            Some(e) => {
                out.push_str(&format!(
                    "  {}={} ({})   {}\n",
                    field(&cond.type_),
                    e.status,
                    e.reason,
                    e.link
                ));
                out.push_str(&format!("    What it means: {}\n", e.meaning));
                out.push_str(&format!("    What to do: {}\n", e.todo));
            }
            None => {
                let (file, anchor) = kind.runbook();
                out.push_str(&format!(
                    "  {}={} ({}): not in the runbook; see {file}{anchor}\n",
                    field(&cond.type_),
                    field(&cond.status),
                    field(&cond.reason)
                ));
            }
        }
    }
    out
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}\n")).collect()
}
