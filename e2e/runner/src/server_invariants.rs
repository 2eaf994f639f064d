//! The invariants both runners check after every fault (docs/reliability.md, promises 1, 2 and
//! 5): no duplicate and no orphan on the server, and what "converged" means for one CR. The
//! fleet (`terdut-e2e`) and the chaos run (`terdut-chaos`) each read their world and model
//! their own way and call these. Pure.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use terdut_crds::v1alpha1::conditions::READY;
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutTeam};
use terdut_standin::admin::{AdminIntegration, AdminState, AdminTeam};

/// One invariant's verdict; `detail` names what broke it (names, never keys).
#[derive(Debug, Clone)]
pub struct Verdict {
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
}

/// Holds when nothing was `found`; the detail lists what was.
pub fn verdict<T: std::fmt::Debug>(name: &'static str, found: &[T]) -> Verdict {
    Verdict {
        name,
        ok: found.is_empty(),
        detail: format!("{found:?}"),
    }
}

/// Ready, at the object's current generation: what a CR shows once it has converged.
pub fn ready_at_generation(meta: &ObjectMeta, observed: Option<i64>, cs: &[Condition]) -> bool {
    cs.iter().any(|c| c.type_ == READY && c.status == "True") && observed == meta.generation
}

/// Every distinct value and the values seen more than once, both in the order first seen.
pub fn duplicates<'a>(values: impl Iterator<Item = &'a str>) -> (Vec<&'a str>, Vec<&'a str>) {
    let mut count: HashMap<&str, usize> = HashMap::new();
    let mut order = vec![];
    for v in values {
        let n = count.entry(v).or_insert(0);
        if *n == 0 {
            order.push(v);
        }
        *n += 1;
    }
    let dups = order.iter().copied().filter(|v| count[v] > 1).collect();
    (order, dups)
}

/// The one integration with `external_id` on `team`; `None` when there is none or more than
/// one (a duplicate is not "the" integration of its source).
pub fn single_integration<'a>(
    team: &'a AdminTeam,
    external_id: &str,
) -> Option<&'a AdminIntegration> {
    let mut found = team
        .integrations
        .iter()
        .filter(|i| i.external_id == external_id);
    match (found.next(), found.next()) {
        (Some(one), None) => Some(one),
        _ => None,
    }
}

/// The names a runner gives the four checks of [`structural`], in its order: duplicate teams,
/// duplicate integrations, server teams without a CR, integrations without a CR.
pub type StructuralNames = [&'static str; 4];

/// No duplicate, no orphan (promises 1 and 2): one team per external_id, one integration per
/// external_id, every team and integration on the server belonging to a CR of namespace `ns`
/// that exists (an integration: on the team its CR names).
pub fn structural(
    state: &AdminState,
    ns: &str,
    teams: &BTreeMap<String, TerdutTeam>,
    sources: &BTreeMap<String, TerdutAlertSource>,
    names: StructuralNames,
) -> Vec<Verdict> {
    let (team_ids, dup_teams) = duplicates(state.teams.iter().map(|t| t.external_id.as_str()));
    let ints: Vec<(&str, &str)> = state
        .teams
        .iter()
        .flat_map(|t| {
            t.integrations
                .iter()
                .map(|i| (t.external_id.as_str(), i.external_id.as_str()))
        })
        .collect();
    let (_, dup_ints) = duplicates(ints.iter().map(|(_, e)| *e));
    let live_teams: BTreeSet<String> = teams.keys().map(|n| format!("{ns}/{n}")).collect();
    let orphan_teams: Vec<&str> = team_ids
        .into_iter()
        .filter(|e| !live_teams.contains(*e))
        .collect();
    // An integration belongs to a CR only if that CR exists and names this team.
    let owner: HashMap<String, String> = sources
        .iter()
        .map(|(n, o)| {
            (
                format!("{ns}/{n}"),
                format!("{ns}/{}", o.spec.team_ref.name),
            )
        })
        .collect();
    let orphan_ints: Vec<String> = ints
        .iter()
        .filter(|(t, e)| owner.get(*e).map(String::as_str) != Some(*t))
        .map(|(t, e)| format!("{e} on {t}"))
        .collect();
    let [
        dup_teams_name,
        dup_ints_name,
        orphan_teams_name,
        orphan_ints_name,
    ] = names;
    vec![
        verdict(dup_teams_name, &dup_teams),
        verdict(dup_ints_name, &dup_ints),
        verdict(orphan_teams_name, &orphan_teams),
        verdict(orphan_ints_name, &orphan_ints),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_keep_first_seen_order() {
        let (all, dups) = duplicates(["x", "y", "x", "z", "y"].into_iter());
        assert_eq!((all, dups), (vec!["x", "y", "z"], vec!["x", "y"]));
        assert!(duplicates(["x", "y"].into_iter()).1.is_empty());
    }

    #[test]
    fn an_empty_finding_holds() {
        assert!(verdict::<&str>("n", &[]).ok);
        let v = verdict("n", &["a"]);
        assert!(!v.ok && v.detail == r#"["a"]"#);
    }
}
