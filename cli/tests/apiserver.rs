//! `kubectl terdut` against a real kube-apiserver (terdut-testenv): the objects, statuses and
//! Events an operator writes, then the plugin's own functions, as `main` calls them.
//!
//! The `status` output is pinned in tests/golden/status.txt; `UPDATE_GOLDEN=1 cargo test -p
//! kubectl-terdut --test apiserver` rewrites it after an intended change.

mod common;

use std::path::PathBuf;

use common::{annotations, cond};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::DynamicObject;
use kube::{Api, Client, ResourceExt as _};
use kubectl_terdut::kinds::Kind;
use kubectl_terdut::{Cli, Scope, collect, status, tree};
use serde_json::json;
use terdut_crds::v1alpha1::server::TeamCounts;
use terdut_crds::v1alpha1::{
    LocalObjectRef, SecretKeyRef, TerdutAlertSourceStatus, TerdutServerStatus, TerdutTeamStatus,
};
use terdut_testenv::ControlPlane;

const KEY: &str = "tdsa_golden_key_never_printed";

async fn setup() -> (&'static ControlPlane, Client) {
    let cp = ControlPlane::shared().await.expect("control plane");
    let client = cp.client().await.expect("client");
    (cp, client)
}

fn cli(args: &[&str]) -> Cli {
    use clap::Parser as _;
    Cli::try_parse_from(std::iter::once("kubectl-terdut").chain(args.iter().copied()))
        .expect("valid command line")
}

async fn run(client: &Client, args: &[&str], answer: bool) -> anyhow::Result<String> {
    let mut asked = |_: &str| answer;
    kubectl_terdut::run(client, &cli(args), Timestamp::now(), &mut asked).await
}

/// The golden tree: one shared server with teams beside it and from another namespace (one
/// refused, one paused), alert sources, a team whose server is gone and a source whose team is.
async fn golden_objects(cp: &ControlPlane, client: &Client) {
    let (platform, payments, strays) = ("golden-platform", "golden-payments", "golden-strays");
    for ns in [platform, payments, strays] {
        cp.create_namespace(client, ns, Default::default())
            .await
            .expect("namespace");
    }
    let server = common::server(
        client,
        platform,
        "terdut",
        json!({"allowedTeams": {"namespaces": {"from": "Selector",
            "selector": {"matchLabels": {"terdut.ryuvia.com/allowed-server": "golden-platform.terdut"}}}}}),
        TerdutServerStatus {
            conditions: vec![
                cond("Ready", false, "Progressing", "0 of 2 pods available"),
                cond("KeyAccepted", true, "Accepted", "the server answers as terdut-operator"),
                cond("PodSecurity", true, "Restricted", "the pods meet the restricted level"),
            ],
            observed_generation: Some(1),
            credentials_secret_ref: Some(SecretKeyRef {
                name: "terdut-operator-key".into(),
                key: "token".into(),
            }),
            teams: Some(TeamCounts {
                accepted: 2,
                refused: 1,
            }),
            // What the operator writes: the first 12 hex of the hash in the pod annotation.
            key_fingerprint: Some("3f2a9c0d1e4b".into()),
            url: Some("http://terdut.golden-platform.svc.cluster.local.:8080".into()),
            available_replicas: Some(0),
            ..Default::default()
        },
    )
    .await;
    common::deployment(client, &server, "3f2a9c0d1e4b5a69").await;
    common::key_secret(client, platform, "terdut", Some(&server), KEY).await;

    let team_status =
        |ready: bool, reason: &str, message: &str, id: Option<i64>| TerdutTeamStatus {
            conditions: vec![cond("Ready", ready, reason, message)],
            observed_generation: Some(1),
            team_id: id,
            ..Default::default()
        };
    let on = (platform, "terdut");
    common::team(
        client,
        platform,
        "platform",
        on,
        annotations(&[]),
        team_status(true, "Ready", "team 1", Some(1)),
    )
    .await;
    let mut paused = team_status(
        false,
        "UnknownUser",
        "the ladder names unknown user \"bob\"",
        Some(2),
    );
    paused.conditions.push(cond(
        "Paused",
        true,
        "PausedByAnnotation",
        "terdut.ryuvia.com/paused is true",
    ));
    common::team(
        client,
        payments,
        "payments",
        on,
        annotations(&[("terdut.ryuvia.com/paused", "true")]),
        paused,
    )
    .await;
    common::team(
        client,
        payments,
        "checkout",
        on,
        annotations(&[]),
        team_status(
            false,
            "RefNotPermitted",
            "golden-platform/terdut does not admit golden-payments",
            None,
        ),
    )
    .await;
    common::team(
        client,
        strays,
        "ghost",
        (strays, "gone"),
        annotations(&[]),
        team_status(
            false,
            "ServerRefNotFound",
            "no TerdutServer golden-strays/gone",
            None,
        ),
    )
    .await;

    let source_status = |ready: bool, reason: &str, id: Option<i64>, secret: Option<&str>| {
        TerdutAlertSourceStatus {
            conditions: vec![cond("Ready", ready, reason, reason)],
            observed_generation: Some(1),
            integration_id: id,
            webhook_url_secret_ref: secret.map(|s| LocalObjectRef { name: s.into() }),
            ..Default::default()
        }
    };
    common::source(
        client,
        platform,
        "prod-alertmanager",
        "platform",
        "alertmanager",
        source_status(
            true,
            "Ready",
            Some(3),
            Some("prod-alertmanager-terdut-webhook"),
        ),
    )
    .await;
    common::source(
        client,
        platform,
        "grafana",
        "platform",
        "grafana",
        source_status(true, "Ready", Some(4), Some("grafana-terdut-webhook")),
    )
    .await;
    common::source(
        client,
        payments,
        "payments-alertmanager",
        "payments",
        "alertmanager",
        source_status(false, "WaitingForTeam", None, None),
    )
    .await;
    common::source(
        client,
        strays,
        "stray",
        "nobody",
        "generic",
        source_status(false, "TeamNotFound", None, None),
    )
    .await;
}

/// Ages pinned so the golden text does not depend on when the test ran.
fn pin_ages(inv: &mut collect::Inventory, now: Timestamp) {
    let ago = |h: i64, m: i64| Some(now - SignedDuration::from_mins(h * 60 + m));
    for s in &mut inv.servers {
        s.common.created = ago(49, 0);
    }
    for t in &mut inv.teams {
        t.common.created = ago(3, 5);
    }
    for s in &mut inv.sources {
        s.common.created = ago(0, 42);
    }
}

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/status.txt")
}

#[tokio::test]
async fn status_renders_the_tree_golden() {
    let (cp, client) = setup().await;
    golden_objects(cp, &client).await;

    let mut inv = collect::inventory(&client, &Scope::All)
        .await
        .expect("inventory");
    // Other tests of this binary share the control plane: keep the golden namespaces only.
    inv.servers
        .retain(|s| s.common.namespace.starts_with("golden-"));
    inv.teams
        .retain(|s| s.common.namespace.starts_with("golden-"));
    inv.sources
        .retain(|s| s.common.namespace.starts_with("golden-"));
    let now: Timestamp = "2026-11-29T12:00:00Z".parse().unwrap();
    pin_ages(&mut inv, now);
    let text = status::render(&tree::build(inv), now);

    assert!(
        !text.contains(KEY),
        "the key itself is never shown:\n{text}"
    );
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(golden_path(), &text).expect("golden written");
    }
    let want = std::fs::read_to_string(golden_path()).expect("golden file");
    assert_eq!(
        text, want,
        "status output differs from tests/golden/status.txt:\n{text}"
    );

    // One namespace: its own objects, plus the server its teams name elsewhere.
    let one = run(&client, &["status", "-n", "golden-payments"], false)
        .await
        .unwrap();
    assert!(one.contains("server golden-platform/terdut"), "{one}");
    assert!(one.contains("team golden-payments/payments"), "{one}");
    assert!(!one.contains("team platform"), "{one}");

    // `why` of the server names its key by fingerprint, its API URL and its pods.
    let why = run(
        &client,
        &["why", "server/terdut", "-n", "golden-platform"],
        false,
    )
    .await
    .unwrap();
    for line in [
        "key fingerprint: 3f2a9c0d1e4b",
        "API: http://terdut.golden-platform.svc.cluster.local.:8080",
        "pods available: 0",
    ] {
        assert!(why.contains(line), "{line:?} missing in\n{why}");
    }
    assert!(!why.contains(KEY), "the key itself is never shown:\n{why}");
}

#[tokio::test]
async fn status_of_an_older_operator_shows_the_deployments_key_hash() {
    // An operator that writes no status.keyFingerprint: the pod annotation's hash is shown,
    // and only from the server's own Deployment.
    let (cp, client) = setup().await;
    let ns = cp.namespace(&client, "oldop").await.unwrap();
    let server = common::server(
        &client,
        &ns,
        "terdut",
        json!({}),
        TerdutServerStatus::default(),
    )
    .await;
    common::deployment(&client, &server, "0123456789abcdef").await;
    let out = run(&client, &["status", "-n", &ns], false).await.unwrap();
    assert!(out.contains("key 0123456789abcdef"), "{out}");
}

#[tokio::test]
async fn why_shows_conditions_events_and_the_runbook_row() {
    let (cp, client) = setup().await;
    let ns = cp.namespace(&client, "why").await.unwrap();
    common::server(
        &client,
        &ns,
        "terdut",
        json!({}),
        TerdutServerStatus {
            conditions: vec![
                cond("Ready", true, "Ready", "2 of 2 pods available"),
                cond(
                    "KeyAccepted",
                    false,
                    "KeyRejected",
                    "401 from /api/v1/whoami",
                ),
            ],
            ..Default::default()
        },
    )
    .await;
    let mut status = TerdutTeamStatus {
        conditions: vec![cond(
            "Ready",
            false,
            "UnknownUser",
            "the ladder names unknown user \"bob\"",
        )],
        observed_generation: Some(1),
        team_id: Some(9),
        ..Default::default()
    };
    status
        .conditions
        .push(cond("Paused", true, "PausedByAnnotation", "paused"));
    let team = common::team(
        &client,
        &ns,
        "payments",
        (&ns, "terdut"),
        annotations(&[("terdut.ryuvia.com/paused", "true")]),
        status,
    )
    .await;
    common::event(
        &client,
        &team,
        "Normal",
        "TeamCreated",
        "Create",
        "team 9 created",
        1,
    )
    .await;
    common::event(
        &client,
        &team,
        "Warning",
        "UnknownUser",
        "ApplyEscalation",
        "unknown user \"bob\"",
        3,
    )
    .await;
    // Another object's Event stays out.
    let other = common::team(
        &client,
        &ns,
        "other",
        (&ns, "terdut"),
        annotations(&[]),
        TerdutTeamStatus::default(),
    )
    .await;
    common::event(
        &client,
        &other,
        "Normal",
        "TeamCreated",
        "Create",
        "not this one",
        1,
    )
    .await;

    let out = run(&client, &["why", "team/payments", "-n", &ns], false)
        .await
        .unwrap();
    for want in [
        &format!("TerdutTeam {ns}/payments"),
        &format!("server: {ns}/terdut"),
        "team id: 9",
        "paused (terdut.ryuvia.com/paused=true)",
        "UnknownUser",
        "the ladder names unknown user \"bob\"",
        "Events (last 2 of 2, newest last):",
        "team 9 created",
        "ApplyEscalation   3",
        "none published",
        "Ready=False (UnknownUser)   docs/runbook.md#terdutteam",
        "What to do: Have the user sign up",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
    assert!(!out.contains("not this one"), "{out}");
    let tail = run(
        &client,
        &["why", "tdt", "payments", "-n", &ns, "--events", "1"],
        false,
    )
    .await
    .unwrap();
    assert!(
        tail.contains("Events (last 1 of 2") && !tail.contains("team 9 created"),
        "{tail}"
    );

    // An observe-only team publishes its plan; the last applied changes show too.
    let teams: Api<terdut_crds::v1alpha1::TerdutTeam> = Api::namespaced(client.clone(), &ns);
    teams
        .patch_status(
            "payments",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"status": {
                "plan": ["rename team 9 to \"Payments EU\""],
                "lastApplied": {"time": "2026-12-01T12:00:00Z", "changes": ["create the team x/payments"]},
            }})),
        )
        .await
        .unwrap();
    let out = run(&client, &["why", "team/payments", "-n", &ns], false)
        .await
        .unwrap();
    for want in [
        "Plan:\n  - rename team 9 to \"Payments EU\"\n",
        "Last applied (2026-12-01T12:00:00Z):\n  - create the team x/payments\n",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }

    // A server: the Ready row and the failing KeyAccepted row.
    let out = run(&client, &["why", "tds/terdut", "-n", &ns], false)
        .await
        .unwrap();
    assert!(
        out.contains("Ready=True (Ready)   docs/runbook-server.md#runbook-terdutserver-conditions"),
        "{out}"
    );
    assert!(
        out.contains("KeyAccepted=False (KeyRejected)   docs/runbook-server.md#other-conditions"),
        "{out}"
    );
    assert!(out.contains("consent: from None"), "{out}");
}

async fn annotation(
    client: &Client,
    kind: Kind,
    ns: &str,
    name: &str,
    key: &str,
) -> Option<String> {
    let obj: DynamicObject = kind.api(client, Some(ns)).get(name).await.unwrap();
    obj.annotations().get(key).cloned()
}

#[tokio::test]
async fn pause_resume_and_reconcile_write_the_annotations() {
    let (cp, client) = setup().await;
    let ns = cp.namespace(&client, "actions").await.unwrap();
    common::team(
        &client,
        &ns,
        "payments",
        (&ns, "terdut"),
        annotations(&[]),
        TerdutTeamStatus::default(),
    )
    .await;
    common::source(
        &client,
        &ns,
        "am",
        "payments",
        "alertmanager",
        TerdutAlertSourceStatus::default(),
    )
    .await;
    let paused = "terdut.ryuvia.com/paused";

    run(&client, &["pause", "team/payments", "-n", &ns], false)
        .await
        .unwrap();
    assert_eq!(
        annotation(&client, Kind::Team, &ns, "payments", paused)
            .await
            .as_deref(),
        Some("true")
    );
    run(&client, &["resume", "tdt", "payments", "-n", &ns], false)
        .await
        .unwrap();
    assert_eq!(
        annotation(&client, Kind::Team, &ns, "payments", paused).await,
        None
    );

    // Every kind honours the annotation (docs/design.md §5).
    run(&client, &["pause", "source/am", "-n", &ns], false)
        .await
        .unwrap();
    assert_eq!(
        annotation(&client, Kind::Source, &ns, "am", paused)
            .await
            .as_deref(),
        Some("true")
    );
    run(&client, &["resume", "source/am", "-n", &ns], false)
        .await
        .unwrap();
    assert_eq!(
        annotation(&client, Kind::Source, &ns, "am", paused).await,
        None
    );

    let key = "terdut.ryuvia.com/reconcile-requested-at";
    run(&client, &["reconcile", "source/am", "-n", &ns], false)
        .await
        .unwrap();
    let first = annotation(&client, Kind::Source, &ns, "am", key)
        .await
        .expect("set");
    first.parse::<Timestamp>().expect("an RFC 3339 time");
    run(&client, &["reconcile", "source/am", "-n", &ns], false)
        .await
        .unwrap();
    let second = annotation(&client, Kind::Source, &ns, "am", key)
        .await
        .expect("set");
    assert_ne!(
        first, second,
        "each request is a new value, so each is a change"
    );

    let err = run(&client, &["reconcile", "team/missing", "-n", &ns], false)
        .await
        .unwrap_err();
    assert!(format!("{err:#}").contains("missing"), "{err:#}");
}

#[tokio::test]
async fn rotate_source_asks_then_sets_a_new_value() {
    let (cp, client) = setup().await;
    let ns = cp.namespace(&client, "rotate").await.unwrap();
    common::source(
        &client,
        &ns,
        "am",
        "payments",
        "alertmanager",
        TerdutAlertSourceStatus::default(),
    )
    .await;
    let key = "terdut.ryuvia.com/rotate-webhook-key";

    let err = run(&client, &["rotate", "source", "am", "-n", &ns], false)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not rotated"));
    assert_eq!(
        annotation(&client, Kind::Source, &ns, "am", key).await,
        None
    );

    run(&client, &["rotate", "source", "am", "-n", &ns], true)
        .await
        .unwrap();
    let first = annotation(&client, Kind::Source, &ns, "am", key)
        .await
        .expect("set");
    // --yes needs no answer.
    run(
        &client,
        &["rotate", "source", "am", "-n", &ns, "--yes"],
        false,
    )
    .await
    .unwrap();
    let second = annotation(&client, Kind::Source, &ns, "am", key)
        .await
        .expect("set");
    assert_ne!(first, second, "every rotation is a value not used before");

    let obj: DynamicObject = Kind::Source
        .api(&client, Some(&ns))
        .get("am")
        .await
        .unwrap();
    let managers: Vec<_> = obj
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert!(
        managers.iter().any(|m| m == "kubectl-terdut"),
        "{managers:?}"
    );
}

#[tokio::test]
async fn rotate_server_key_deletes_only_the_servers_own_secret() {
    let (cp, client) = setup().await;
    let ns = cp.namespace(&client, "serverkey").await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let own = common::server(
        &client,
        &ns,
        "own",
        json!({}),
        TerdutServerStatus::default(),
    )
    .await;
    common::key_secret(&client, &ns, "own", Some(&own), KEY).await;
    common::server(
        &client,
        &ns,
        "foreign",
        json!({}),
        TerdutServerStatus::default(),
    )
    .await;
    common::key_secret(&client, &ns, "foreign", None, KEY).await;

    let err = run(&client, &["rotate", "server-key", "own", "-n", &ns], false)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not rotated"));
    assert!(secrets.get_opt("own-operator-key").await.unwrap().is_some());

    let out = run(
        &client,
        &["rotate", "server-key", "own", "-n", &ns, "-y"],
        false,
    )
    .await
    .unwrap();
    assert!(!out.contains(KEY), "{out}");
    let gone = secrets.get_opt("own-operator-key").await.unwrap();
    assert!(
        gone.is_none_or(|s| s.metadata.deletion_timestamp.is_some()),
        "deleted"
    );

    let err = run(
        &client,
        &["rotate", "server-key", "foreign", "-n", &ns, "-y"],
        false,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("not controlled by"), "{err}");
    assert!(
        secrets
            .get_opt("foreign-operator-key")
            .await
            .unwrap()
            .is_some()
    );

    let err = run(
        &client,
        &["rotate", "server-key", "own", "-n", &ns, "-y"],
        false,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");
}

/// Every Ready reason the CRDs define has a runbook row that `why` can print.
#[test]
fn every_reason_of_the_crds_has_a_runbook_row() {
    use terdut_crds::v1alpha1::{alert_source, server, team};
    for (kind, reasons) in [
        (Kind::Team, team::reasons::ALL),
        (Kind::Source, alert_source::reasons::ALL),
        (Kind::Server, server::reasons::ALL),
    ] {
        for r in reasons {
            assert!(
                kubectl_terdut::runbook::lookup(kind, "Ready", r.as_str()).is_some(),
                "{kind:?} {r}"
            );
        }
    }
}

/// A character a terminal acts on, or one that hides or reorders text (`escape.rs`): none may
/// reach the admin's terminal from what a tenant wrote.
fn live_for_a_terminal(c: char) -> bool {
    (c.is_control() && c != '\n')
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[tokio::test]
async fn text_a_tenant_wrote_reaches_the_terminal_escaped() {
    let (cp, client) = setup().await;
    let ns = cp.namespace(&client, "escape").await.unwrap();
    // What a tenant with `*/status` and Event rights writes: a clear-screen, a window title,
    // a fake line, a colour that hides text, a right-to-left override.
    let clear = "\u{1b}[2J\u{1b}[H";
    let title = "\u{1b}]0;pwned\u{7}";
    let forged_line = "\r\nterdut  True  Ready";
    let hidden = "\u{1b}[8mhidden\u{1b}[0m";
    let rtl = "\u{202e}gnp.exe";
    common::server(
        &client,
        &ns,
        "terdut",
        json!({}),
        TerdutServerStatus {
            conditions: vec![cond("Ready", true, "Ready", &format!("ok{title}"))],
            url: Some(format!("http://x{hidden}")),
            ..Default::default()
        },
    )
    .await;
    let team = common::team(
        &client,
        &ns,
        "payments",
        (&ns, "terdut"),
        annotations(&[("terdut.ryuvia.com/paused", "true")]),
        TerdutTeamStatus {
            conditions: vec![cond(
                "Ready",
                false,
                &format!("Forged{clear}"),
                &format!("all fine{forged_line}{rtl}"),
            )],
            plan: Some(vec![format!("rename{hidden}")]),
            ..Default::default()
        },
    )
    .await;
    common::event(
        &client,
        &team,
        "Warning",
        &format!("Evil{title}"),
        "Reconcile",
        &format!("note{clear}{rtl}"),
        1,
    )
    .await;

    let status = run(&client, &["status", "-n", &ns], false).await.unwrap();
    let why_team = run(&client, &["why", "team/payments", "-n", &ns], false)
        .await
        .unwrap();
    let why_server = run(&client, &["why", "tds/terdut", "-n", &ns], false)
        .await
        .unwrap();
    for out in [&status, &why_team, &why_server] {
        let live: Vec<char> = out.chars().filter(|c| live_for_a_terminal(*c)).collect();
        assert!(live.is_empty(), "{live:?} reach the terminal in\n{out:?}");
    }
    // Shown, escaped, where they were written.
    for want in [
        "Forged\\e[2J\\e[H",
        "all fine\\r\\nterdut  True  Ready\\u{202e}gnp.exe",
    ] {
        assert!(why_team.contains(want), "missing {want:?} in\n{why_team}");
    }
    for want in [
        "Evil\\e]0;pwned\\x07",
        "note\\e[2J\\e[H\\u{202e}gnp.exe",
        "- rename\\e[8mhidden",
    ] {
        assert!(why_team.contains(want), "missing {want:?} in\n{why_team}");
    }
    assert!(status.contains("Forged\\e[2J\\e[H"), "{status}");
    assert!(
        why_server.contains("API: http://x\\e[8mhidden\\e[0m")
            && why_server.contains("ok\\e]0;pwned\\x07"),
        "{why_server}"
    );
    // The fake line stays inside its cell: it starts no line of its own.
    for out in [&status, &why_team] {
        assert!(
            !out.lines()
                .any(|l| l.trim_start().starts_with("terdut  True")),
            "{out}"
        );
    }
}
