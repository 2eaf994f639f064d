//! The health docs say what the code does (docs/gitops.md, docs/design.md §7): each kind's
//! `PROGRESS` table (the one place a Ready reason is classified) against the reason table of
//! docs/gitops.md, the "Reconciling / Stalled" column of the runbooks and the parking reasons
//! of the Argo CD health checks. Pure: no API server.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use terdut_crds::v1alpha1::conditions::Progress;

const KINDS: [&str; 3] = ["TerdutServer", "TerdutTeam", "TerdutAlertSource"];

fn table(kind: &str) -> &'static [(&'static str, Progress)] {
    match kind {
        "TerdutServer" => terdut_actors::server::status::reasons::PROGRESS,
        "TerdutTeam" => terdut_crds::v1alpha1::team::reasons::PROGRESS,
        "TerdutAlertSource" => terdut_crds::v1alpha1::alert_source::reasons::PROGRESS,
        _ => unreachable!("{kind}"),
    }
}

fn read(path: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The cells of the Markdown table rows of `text` (the separator row left out).
fn rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .filter(|l| l.starts_with('|') && !l.starts_with("|---"))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect()
}

fn unquote(cell: &str) -> Option<&str> {
    cell.strip_prefix('`')?.strip_suffix('`')
}

/// What kstatus (sigs.k8s.io/cli-utils) and the Argo CD checks read of an object at its
/// observed generation: Stalled and Reconciling first, then Ready (kstatus reads Ready=False
/// as in progress); actors/tests/gitops_health.rs proves these rules on live objects.
fn readers(ready: bool, progress: Progress) -> (&'static str, &'static str) {
    match (progress, ready) {
        (Progress::Stalled, _) => ("Failed", "Degraded"),
        (Progress::Reconciling, _) => ("InProgress", "Progressing"),
        (Progress::Settled, true) => ("Current", "Healthy"),
        (Progress::Settled, false) => ("InProgress", "Suspended"),
    }
}

#[test]
fn the_gitops_table_lists_every_reason_as_the_code_classifies_it() {
    let doc = read("docs/gitops.md");
    let mut listed: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for row in rows(&doc) {
        let [kind, reason, ready, progress, kstatus, argo] = &row[..] else {
            continue;
        };
        let Some(reason) = unquote(reason) else {
            continue;
        };
        let Some(kind) = KINDS.iter().find(|k| *k == kind) else {
            continue;
        };
        let code = table(kind)
            .iter()
            .find(|(r, _)| *r == reason)
            .unwrap_or_else(|| panic!("docs/gitops.md: {kind} {reason} is not in its PROGRESS"))
            .1;
        assert_eq!(progress, code.as_str(), "docs/gitops.md: {kind} {reason}");
        let ready = match ready.as_str() {
            "True" => true,
            "False" => false,
            other => panic!("docs/gitops.md: {kind} {reason}: Ready {other:?}"),
        };
        assert_eq!(
            (kstatus.as_str(), argo.as_str()),
            readers(ready, code),
            "docs/gitops.md: {kind} {reason}"
        );
        assert!(
            listed.entry(kind).or_default().insert(reason.to_owned()),
            "docs/gitops.md: {kind} {reason} twice"
        );
    }
    for kind in KINDS {
        let code: BTreeSet<String> = table(kind).iter().map(|(r, _)| r.to_string()).collect();
        assert_eq!(
            listed.get(kind).cloned().unwrap_or_default(),
            code,
            "docs/gitops.md lists {kind}'s reasons"
        );
    }
}

#[test]
fn a_reason_shared_by_kinds_is_classified_alike() {
    let mut seen: BTreeMap<&str, (&str, Progress)> = BTreeMap::new();
    for kind in KINDS {
        for (reason, progress) in table(kind) {
            if let Some((other, p)) = seen.insert(reason, (kind, *progress)) {
                assert_eq!(*progress, p, "{reason}: {kind} and {other} disagree");
            }
        }
    }
}

#[test]
fn the_runbooks_column_says_what_the_code_does() {
    // docs/runbook.md has a section per kind; docs/runbook-server.md is the server's.
    let team_doc = read("docs/runbook.md");
    let (teams, sources) = team_doc
        .split_once("\n## TerdutAlertSource")
        .expect("docs/runbook.md has a TerdutAlertSource section");
    for (kind, text, doc) in [
        ("TerdutTeam", teams.to_owned(), "docs/runbook.md"),
        ("TerdutAlertSource", sources.to_owned(), "docs/runbook.md"),
        (
            "TerdutServer",
            read("docs/runbook-server.md"),
            "docs/runbook-server.md",
        ),
    ] {
        let mut found = BTreeSet::new();
        for row in rows(&text) {
            let (Some(reason), Some(column)) = (row.first().and_then(|c| unquote(c)), row.get(2))
            else {
                continue;
            };
            let said = match column.as_str() {
                "neither" => Progress::Settled,
                "Reconciling" => Progress::Reconciling,
                "Stalled" => Progress::Stalled,
                _ => continue,
            };
            let code = table(kind)
                .iter()
                .find(|(r, _)| *r == reason)
                .unwrap_or_else(|| panic!("{doc}: {kind} {reason} is not in its PROGRESS"))
                .1;
            assert_eq!(said, code, "{doc}: {kind} {reason}");
            found.insert(reason.to_owned());
        }
        let code: BTreeSet<String> = table(kind).iter().map(|(r, _)| r.to_string()).collect();
        assert_eq!(found, code, "{doc} has a row per {kind} reason");
    }
}

#[test]
fn the_argo_cd_checks_park_exactly_the_settled_reasons_that_are_not_ready() {
    for kind in KINDS {
        let script = read(&format!(
            "deploy/argocd/resource_customizations/terdut.ryuvia.com/{kind}/health.lua"
        ));
        let line = script
            .lines()
            .find(|l| l.starts_with("local PARKED = {"))
            .unwrap_or_else(|| panic!("{kind}/health.lua has no PARKED"));
        let parked: BTreeSet<&str> = line
            .trim_start_matches("local PARKED = {")
            .trim_end_matches('}')
            .split(',')
            .filter_map(|e| e.split_once('=').map(|(k, _)| k.trim()))
            .collect();
        let settled: BTreeSet<&str> = table(kind)
            .iter()
            .filter(|(r, p)| *p == Progress::Settled && *r != "Ready")
            .map(|(r, _)| *r)
            .collect();
        assert_eq!(parked, settled, "{kind}/health.lua PARKED");
    }
}
