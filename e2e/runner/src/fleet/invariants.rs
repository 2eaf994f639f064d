//! What must hold after every fault and upgrade (docs/reliability.md, promises 1, 2, 3 and 5):
//! everything Ready at its generation and the server matching every spec; no duplicate and no
//! orphan on the server; every webhook key live and its own integration's; no key rotated
//! (no wave changes a source's kind). Pure, except the key check, which asks the stand-in.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
pub use terdut_e2e::server_invariants::Verdict;
use terdut_e2e::server_invariants::ready_at_generation;
use terdut_standin::AdminClient;

use super::model::{Model, NS};
use super::world::World;

fn why(cs: &[Condition]) -> String {
    cs.iter().find(|c| c.type_ == "Ready").map_or_else(
        || "no Ready condition".to_owned(),
        |c| {
            let message: String = c.message.chars().take(160).collect();
            format!("Ready={} {}: {message}", c.status, c.reason)
        },
    )
}

/// Why the fleet has not converged yet (empty when it has): a CR not Ready at its generation,
/// a team or integration missing on the server or different from its spec.
pub fn pending(model: &Model, w: &World) -> Vec<String> {
    let mut out = vec![];
    for name in model.teams.keys() {
        match w.teams.get(name) {
            None => out.push(format!("team {name} missing")),
            Some(t) => {
                let st = t.status.as_ref();
                let cs = st.map_or(&[][..], |s| &s.conditions);
                if !ready_at_generation(&t.metadata, st.and_then(|s| s.observed_generation), cs) {
                    out.push(format!(
                        "team {name} not Ready at its generation ({})",
                        why(cs)
                    ));
                }
            }
        }
    }
    for name in model.sources.keys() {
        match w.sources.get(name) {
            None => out.push(format!("source {name} missing")),
            Some(s) => {
                let st = s.status.as_ref();
                let cs = st.map_or(&[][..], |s| &s.conditions);
                if !ready_at_generation(&s.metadata, st.and_then(|s| s.observed_generation), cs) {
                    out.push(format!(
                        "source {name} not Ready at its generation ({})",
                        why(cs)
                    ));
                }
            }
        }
    }
    for (t, spec) in &model.teams {
        match w.server_team(t) {
            None => out.push(format!("team {t} missing on the server")),
            Some(st) if st.name != spec.display => {
                out.push(format!("team {t} is {:?} on the server", st.name));
            }
            Some(_) => {}
        }
    }
    for (s, spec) in &model.sources {
        let same = w
            .integration(model, s)
            .is_some_and(|i| i.kind.as_str() == spec.kind && i.name == spec.name);
        if !same {
            out.push(format!("source {s} missing or different on the server"));
        }
    }
    out
}

/// No duplicate, no orphan (promises 1 and 2; `terdut_e2e::server_invariants`).
pub fn structural(w: &World) -> Vec<Verdict> {
    terdut_e2e::server_invariants::structural(
        &w.state,
        NS,
        &w.teams,
        &w.sources,
        [
            "0 duplicate teams on the server",
            "0 duplicate integrations on the server",
            "0 server teams without a CR",
            "0 integrations without a CR",
        ],
    )
}

/// No webhook key rotated (promise 3): the fleet's waves rename, they never change a kind, so
/// every source keeps its key. `before`/`after` are `{source: fingerprint}`.
pub fn no_rotation(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> Verdict {
    let changed: Vec<&str> = before
        .iter()
        .filter(|(s, fp)| after.get(*s).is_some_and(|now| now != *fp))
        .map(|(s, _)| s.as_str())
        .collect();
    let lost: Vec<&str> = before
        .keys()
        .filter(|s| !after.contains_key(*s))
        .map(String::as_str)
        .collect();
    Verdict {
        name: "no webhook key rotated or lost",
        ok: changed.is_empty() && lost.is_empty(),
        detail: format!("rotated: {changed:?}; Secret gone: {lost:?}"),
    }
}

/// Every source's Secret holds the key of exactly its own integration, and it is live.
pub async fn keys_live(model: &Model, w: &World, admin: &AdminClient) -> anyhow::Result<Verdict> {
    let mut bad = vec![];
    for s in model.sources.keys() {
        let Some(key) = w.keys.get(s) else {
            bad.push(format!("{s}: no Secret"));
            continue;
        };
        let kc = admin.key_check(key).await?;
        let want = w.integration(model, s).map(|i| i.id);
        if !kc.live || want.is_none() || kc.integration_id != want {
            bad.push(format!(
                "{s}: live={} id={:?} want={want:?}",
                kc.live, kc.integration_id
            ));
        }
    }
    Ok(Verdict {
        name: "every webhook Secret's key is live and its own integration's",
        ok: bad.is_empty(),
        detail: bad.into_iter().take(10).collect::<Vec<_>>().join("; "),
    })
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
    fn a_changed_or_lost_key_is_a_rotation() {
        let before = fps(&[("a", "1"), ("b", "2")]);
        assert!(no_rotation(&before, &fps(&[("a", "1"), ("b", "2"), ("c", "3")])).ok);
        let v = no_rotation(&before, &fps(&[("a", "9"), ("b", "2")]));
        assert!(!v.ok && v.detail.contains(r#"rotated: ["a"]"#));
        let v = no_rotation(&before, &fps(&[("a", "1")]));
        assert!(!v.ok && v.detail.contains(r#"gone: ["b"]"#));
    }
}
