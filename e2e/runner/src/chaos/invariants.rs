//! What must hold after every storm (docs/reliability.md, promises 1, 2, 3 and 5): no
//! duplicate and no orphan on the server, everything converged and Ready, every webhook key
//! live and its integration's own, no key rotated that no spec change asked for.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use terdut_crds::GoDuration;
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutTeam};
pub use terdut_e2e::server_invariants::Verdict;
use terdut_e2e::server_invariants::ready_at_generation;
use terdut_standin::AdminClient;
use terdut_standin::wire::{Level, Target};

use crate::workload::{Model, NS};
use crate::world::World;

/// What readiness is judged on, for either kind.
struct Progress<'a> {
    meta: &'a ObjectMeta,
    observed: Option<i64>,
    conditions: &'a [Condition],
}

fn team_progress(t: &TerdutTeam) -> Progress<'_> {
    let st = t.status.as_ref();
    Progress {
        meta: &t.metadata,
        observed: st.and_then(|s| s.observed_generation),
        conditions: st.map_or(&[], |s| &s.conditions),
    }
}

fn source_progress(s: &TerdutAlertSource) -> Progress<'_> {
    let st = s.status.as_ref();
    Progress {
        meta: &s.metadata,
        observed: st.and_then(|s| s.observed_generation),
        conditions: st.map_or(&[], |s| &s.conditions),
    }
}

/// Ready, at the object's current generation.
fn ready(p: &Progress<'_>) -> bool {
    ready_at_generation(p.meta, p.observed, p.conditions)
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "None".to_owned(), |v| v.to_string())
}

/// What a not-Ready CR shows: generation, observed generation, its Ready condition.
fn why(p: Option<&Progress<'_>>) -> String {
    let Some(p) = p else {
        return " (missing)".into();
    };
    let c = p.conditions.iter().find(|c| c.type_ == "Ready");
    let message: String = c
        .map_or("", |c| c.message.as_str())
        .chars()
        .take(120)
        .collect();
    format!(
        " (generation {}, observed {}, Ready={} {} at {}: {message})",
        opt(p.meta.generation),
        opt(p.observed),
        opt(c.map(|c| &c.status)),
        opt(c.map(|c| &c.reason)),
        opt(c.and_then(|c| c.observed_generation)),
    )
}

/// The ladder the server must hold for a model team.
fn expected_levels(levels: &[(&str, Option<&str>)]) -> Vec<Level> {
    levels
        .iter()
        .map(|(timeout, user)| Level {
            timeout_seconds: GoDuration::from(*timeout).to_seconds().unwrap_or_default(),
            targets: std::iter::once(Target::Oncall)
                .chain(user.map(|u| Target::User {
                    username: u.to_owned(),
                }))
                .collect(),
        })
        .collect()
}

/// Why the system has not converged yet (empty when it has).
pub fn pending(model: &Model, w: &World) -> Vec<String> {
    let mut out = vec![];
    let teams: BTreeMap<&str, Progress<'_>> = w
        .teams
        .iter()
        .map(|(n, t)| (n.as_str(), team_progress(t)))
        .collect();
    let sources: BTreeMap<&str, Progress<'_>> = w
        .sources
        .iter()
        .map(|(n, s)| (n.as_str(), source_progress(s)))
        .collect();
    let want_teams: BTreeSet<&str> = model.teams.keys().map(String::as_str).collect();
    let want_sources: BTreeSet<&str> = model.sources.keys().map(String::as_str).collect();
    for (kind, crs, want) in [
        ("team", &teams, &want_teams),
        ("source", &sources, &want_sources),
    ] {
        for name in crs.keys().filter(|n| !want.contains(*n)) {
            out.push(format!("deleted {kind} {name} still exists"));
        }
        for name in want {
            let cr = crs.get(name);
            if !cr.is_some_and(ready) {
                out.push(format!(
                    "{kind} {name} not Ready at its generation{}",
                    why(cr)
                ));
            }
        }
    }
    for (t, spec) in &model.teams {
        let Some(st) = w.server_team(t) else {
            out.push(format!("team {t} missing on the server"));
            continue;
        };
        let levels = st
            .ladder
            .as_ref()
            .map(|l| l.levels.clone())
            .unwrap_or_default();
        let mut switches: Vec<&str> = st.switches.iter().map(|s| s.name.as_str()).collect();
        switches.sort_unstable();
        if st.name != model.display(t)
            || levels != expected_levels(&spec.levels)
            || switches != spec.switches
        {
            out.push(format!("team {t} differs on the server"));
        }
    }
    for (s, src) in &model.sources {
        let same = w
            .integration(model, s)
            .is_some_and(|i| i.kind.as_str() == src.kind.as_str() && i.name == src.name);
        if !same {
            out.push(format!("source {s} missing or different on the server"));
        }
    }
    out
}

/// The duplicate and orphan invariants (promises 1 and 2; `terdut_e2e::server_invariants`).
pub fn structural(w: &World) -> Vec<Verdict> {
    terdut_e2e::server_invariants::structural(
        &w.state,
        NS,
        &w.teams,
        &w.sources,
        [
            "0 duplicate teams",
            "0 duplicate integrations",
            "0 server teams without a CR",
            "0 integrations without a CR",
        ],
    )
}

/// Every source's Secret holds the key of exactly its integration, and it is live.
pub async fn keys_live(
    model: &Model,
    w: &World,
    admin: &AdminClient,
    keys: &BTreeMap<String, String>,
) -> anyhow::Result<Verdict> {
    let mut bad = vec![];
    for s in model.sources.keys() {
        let Some(key) = keys.get(s) else {
            bad.push(format!("{s}: no Secret"));
            continue;
        };
        let kc = admin.key_check(key).await?;
        let want = w.integration(model, s).map(|i| i.id);
        if !kc.live || want.is_none() || kc.integration_id != want {
            bad.push(format!(
                "{s}: live={} id={} want={}",
                kc.live,
                opt(kc.integration_id),
                opt(want)
            ));
        }
    }
    Ok(Verdict {
        name: "every webhook Secret's key is live and its own",
        ok: bad.is_empty(),
        detail: bad.into_iter().take(10).collect::<Vec<_>>().join("; "),
    })
}

/// No key rotated unless the kind changed, and every kind change rotated (promise 3):
/// `before`/`after` are `{source: fingerprint}`; sources missing at either end are skipped.
/// Returns the verdict and how many rotations were expected.
pub fn rotations(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
    kind_changed: &BTreeSet<String>,
) -> (Verdict, usize) {
    let (mut unexpected, mut missing, mut expected) = (vec![], vec![], 0);
    for (s, fp) in before {
        let Some(now) = after.get(s) else { continue };
        if kind_changed.contains(s) {
            expected += 1;
            if now == fp {
                missing.push(s.as_str());
            }
        } else if now != fp {
            unexpected.push(s.as_str());
        }
    }
    let v = Verdict {
        name: "no key rotated without a spec change",
        ok: unexpected.is_empty() && missing.is_empty(),
        detail: format!(
            "rotated without a spec change: {unexpected:?}; kind changed but same key: {missing:?}"
        ),
    };
    (v, expected)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fps(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    #[test]
    fn only_kind_changes_rotate_and_they_must() {
        let before = fps(&[("a", "1"), ("b", "2"), ("c", "3"), ("gone", "4")]);
        let kinds: BTreeSet<String> = ["b".to_owned()].into();
        let (v, n) = rotations(&before, &fps(&[("a", "1"), ("b", "9"), ("c", "3")]), &kinds);
        assert!(v.ok && n == 1);
        let (v, _) = rotations(&before, &fps(&[("a", "7"), ("b", "2"), ("c", "3")]), &kinds);
        assert!(!v.ok);
        assert!(v.detail.contains(r#"["a"]"#) && v.detail.contains(r#"same key: ["b"]"#));
    }

    #[test]
    fn expected_ladders_page_on_call_then_the_user() {
        let l = expected_levels(&[("5m", Some("bob")), ("1m", None)]);
        assert_eq!(l[0].timeout_seconds, 300);
        assert_eq!(l[0].targets.len(), 2);
        assert_eq!(l[1].targets, vec![Target::Oncall]);
    }
}
