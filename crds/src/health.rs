//! The Argo CD health checks of deploy/argocd (docs/gitops.md), rendered from one template
//! (`health.lua.tmpl`) and each kind's typed reasons ([`crate::v1alpha1::reason`]): the three
//! scripts differ only in the kind's name and its parking reasons, so those are all the
//! template leaves open. `just health` writes them (the `healthgen` bin); crds/tests/health.rs
//! fails when a committed script differs from its rendering.
//!
//! Pure: strings in, strings out.

use crate::v1alpha1::conditions::paused;
use crate::v1alpha1::reason::Reason;
use crate::v1alpha1::{alert_source, server, team};

const TEMPLATE: &str = include_str!("health.lua.tmpl");

/// Where the scripts live under deploy/argocd/resource_customizations: Argo CD's
/// `GROUP/KIND/health.lua` layout.
pub const GROUP: &str = "terdut.ryuvia.com";

/// Each kind with its `Ready` reasons, in the order the scripts are documented.
pub const KINDS: [(&str, &[Reason]); 3] = [
    ("TerdutAlertSource", alert_source::reasons::ALL),
    ("TerdutServer", server::reasons::ALL),
    ("TerdutTeam", team::reasons::ALL),
];

/// `(path under resource_customizations, script)` for every kind.
pub fn rendered() -> Vec<(String, String)> {
    KINDS
        .iter()
        .map(|(kind, reasons)| (format!("{GROUP}/{kind}/health.lua"), render(kind, reasons)))
        .collect()
}

/// The health check of `kind`, whose `Ready` reasons are `reasons`: those that park
/// ([`Reason::parked_by`]) read as Suspended.
pub fn render(kind: &str, reasons: &[Reason]) -> String {
    let parked: Vec<Reason> = reasons
        .iter()
        .copied()
        .filter(|r| r.parked_by().is_some())
        .collect();
    let table = parked
        .iter()
        .map(|r| format!("{r} = true"))
        .collect::<Vec<_>>()
        .join(", ");
    let why: Vec<&str> = parked.iter().filter_map(|r| r.parked_by()).collect();
    TEMPLATE
        .replace("{{KIND}}", kind)
        .replace("{{PARKED_BY}}", &and_list(&why))
        .replace("{{PARKED}}", &table)
        .replace("{{PAUSED_BY_ANNOTATION}}", paused::BY_ANNOTATION)
}

/// "a", "a and b", "a, b, and c": how the script's comment lists the parking causes.
fn and_list(items: &[&str]) -> String {
    match items {
        [] => "none".into(),
        [one] => (*one).into(),
        [rest @ .., last] => format!("{}, and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_placeholder_is_filled() {
        for (path, script) in rendered() {
            assert!(!script.contains("{{"), "{path}");
        }
    }

    #[test]
    fn a_server_parks_on_scaled_to_zero_and_observe_only() {
        let server = render("TerdutServer", server::reasons::ALL);
        assert!(server.contains("local PARKED = { ScaledToZero = true, ObserveOnly = true }\n"));
        assert!(server.contains(
            "-- spec.replicas 0, and spec.management ObserveOnly with changes planned (status.plan).\n"
        ));
        let team = render("TerdutTeam", team::reasons::ALL);
        assert!(team.contains("local PARKED = { ObserveOnly = true }\n"));
        assert!(team.starts_with("-- Argo CD health of a TerdutTeam "));
    }

    #[test]
    fn every_reason_belongs_to_a_kind_and_each_kind_lists_it_once() {
        let kinds = [
            team::reasons::ALL,
            alert_source::reasons::ALL,
            server::reasons::ALL,
        ];
        for r in Reason::ALL {
            assert!(kinds.iter().any(|k| k.contains(&r)), "{r} is no kind's");
        }
        for kind in kinds {
            let unique: std::collections::BTreeSet<_> = kind.iter().collect();
            assert_eq!(unique.len(), kind.len(), "{kind:?}");
            assert!(kind.contains(&Reason::Ready) && kind.contains(&Reason::CrashLooping));
        }
    }

    #[test]
    fn lists_read_as_prose() {
        assert_eq!(and_list(&["a"]), "a");
        assert_eq!(and_list(&["a", "b"]), "a, and b");
        assert_eq!(and_list(&["a", "b", "c"]), "a, b, and c");
    }
}
