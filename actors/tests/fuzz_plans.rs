//! Property tests of the three plan functions, through their public API only:
//!
//! - TerdutTeam (`team::plan`): `desired` rejects exactly the specs an independent check finds
//!   invalid, with an `InvalidSpec` naming the field; `plan(d, None)` is the create-or-find
//!   alone; `plan(d, observed == d)` is empty whatever the server's switch ids and order; for
//!   any observed server state, executing the plan on a model of the server yields a state
//!   whose plan is empty, with the calls in docs/design.md §4.2's order and each switch touched
//!   once.
//! - TerdutAlertSource (`source::plan`): a foreign Secret always blocks; a key held by its
//!   Secret is never replaced unless the kind changed or a rotation is pending; a crash-window
//!   recreate only for an integration found by `external_id` whose key no Secret ever held;
//!   executing any decision on a model (the actor's writes: Secret with `rotated_for`, status
//!   id, rotated-for annotation) reaches `Noop` in one step, or stays blocked.
//! - TerdutServer (`server::plan`): any spec plans without panic; applying the first pass's
//!   steps and planning again makes no writes and mints no key; an invalid name plans nothing;
//!   nothing but the key Secret carries the key (the Deployment references it by
//!   `secretKeyRef`), and no step's `Debug` shows it.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use proptest::prelude::*;
use serde_json::{Value, json};
use terdut_actors::api::{Id, Integration, IntegrationKind, Ladder, Switch, Team};
use terdut_actors::key::ObjectKey;
use terdut_actors::server::database::{ClusterObservation, MasterService};
use terdut_actors::server::key::{KeyGenError, OperatorKeyValue};
use terdut_actors::server::plan::{self as server_plan, Step};
use terdut_actors::source::plan::{
    self as source_plan, Blocker, Decision, Desired as SourceDesired, Inputs, OwnedSecret,
    RecreateReason, SecretView, ServerView,
};
use terdut_actors::team::plan::{self as team_plan, Call, Desired, Observed};
use terdut_crds::GoDuration;
use terdut_crds::v1alpha1::{TerdutServer, TerdutTeamSpec};

/// `n` cases, times `TERDUT_FUZZ_SCALE` when set (`just fuzz` runs them longer, with random
/// seeds; `just test` pins `PROPTEST_RNG_SEED` so CI is reproducible: docs/adr/0006).
fn fuzz_cases(n: u32) -> u32 {
    std::env::var("TERDUT_FUZZ_SCALE")
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .map_or(n, |k| n.saturating_mul(k.max(1)))
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases: fuzz_cases(cases),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---- TerdutTeam ------------------------------------------------------------------------------

/// Durations: mostly valid, some zero, some not Go durations, some too large.
fn duration() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => ("[1-9][0-9]{0,3}", prop::sample::select(vec!["ms", "s", "m", "h"]))
            .prop_map(|(n, u)| format!("{n}{u}")),
        2 => prop::sample::select(vec!["1h30m", "1500ms", "1.5h", "90s", "2h0m0s"])
            .prop_map(str::to_owned),
        1 => prop::sample::select(vec!["0", "0s", "0m0s", "1ns", "999ms"]).prop_map(str::to_owned),
        1 => prop::sample::select(vec!["", "5", "5x", "-5m", "m", "1h 5m", "abc", "99999999999999999999h"])
            .prop_map(str::to_owned),
    ]
}

fn target() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => Just(json!({"kind": "oncall"})),
        4 => "[a-z]{1,8}".prop_map(|u| json!({"kind": "user", "username": u})),
        1 => Just(json!({"kind": "user"})),
        1 => "[a-z]{1,8}".prop_map(|u| json!({"kind": "oncall", "username": u})),
    ]
}

fn level() -> impl Strategy<Value = Value> {
    (duration(), prop::collection::vec(target(), 0..3))
        .prop_map(|(t, targets)| json!({"timeout": t, "targets": targets}))
}

fn switch() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec!["watchdog", "beat", "heartbeat", "cron"]),
        "[a-z]{1,6}=[A-Za-z]{1,8}",
        duration(),
        prop::option::of(prop::sample::select(vec!["critical", "warning", "info"])),
    )
        .prop_map(|(name, matcher, timeout, severity)| {
            let mut s = json!({"name": name, "matcher": matcher, "timeout": timeout});
            if let Some(sev) = severity {
                s["severity"] = json!(sev);
            }
            s
        })
}

fn team_spec() -> impl Strategy<Value = TerdutTeamSpec> {
    (
        "[A-Za-z][A-Za-z0-9 ]{0,15}",
        prop::option::of("[a-z-]{1,10}"),
        prop::option::of("[a-z-]{1,10}"),
        prop::option::of((
            -2i32..4,
            prop::option::of("[a-z-]{1,10}"),
            prop::collection::vec(level(), 0..4),
        )),
        prop::collection::vec(switch(), 0..4),
    )
        .prop_map(|(display, member, owner, escalation, switches)| {
            let mut spec = json!({
                "serverRef": {"name": "terdut"},
                "displayName": display,
                "oidc": {"memberGroup": member, "ownerGroup": owner},
                "deadmanSwitches": switches,
            });
            if let Some((repeat, fallback, levels)) = escalation {
                spec["escalation"] =
                    json!({"repeatCount": repeat, "fallbackTopic": fallback, "levels": levels});
            }
            serde_json::from_value(spec).expect("spec deserializes")
        })
}

/// An independent statement of what `desired` must refuse.
fn should_be_valid(spec: &TerdutTeamSpec) -> bool {
    let timeout_ok = |d: &GoDuration| matches!(d.to_seconds(), Ok(s) if s > 0);
    let ladder_ok = spec.escalation.as_ref().is_none_or(|e| {
        e.repeat_count >= 0
            && !e.levels.is_empty()
            && e.levels.iter().all(|l| {
                timeout_ok(&l.timeout)
                    && l.targets.iter().all(|t| {
                        let user = serde_json::to_value(t.kind).unwrap() == json!("user");
                        user == t.username.is_some()
                    })
            })
    });
    let mut names = std::collections::BTreeSet::new();
    let switches_ok = spec
        .deadman_switches
        .iter()
        .all(|s| names.insert(s.name.clone()) && timeout_ok(&s.timeout));
    ladder_ok && switches_ok
}

fn key() -> ObjectKey {
    ObjectKey::new("team-ns", "platform")
}

/// The server state that matches `d`, switch ids from `ids`, in the server's (reversed) order.
fn observed_equal(d: &Desired, team_id: Id, first_switch: Id) -> Observed {
    let mut switches: Vec<Switch> = d
        .switches
        .iter()
        .enumerate()
        .map(|(i, s)| Switch {
            id: first_switch + i as Id,
            name: s.name.clone(),
            matcher: s.matcher.clone(),
            timeout_seconds: s.timeout_seconds,
            severity: s.severity.clone(),
        })
        .collect();
    switches.reverse();
    Observed {
        team: Team {
            id: team_id,
            name: d.name.clone(),
            external_id: d.external_id.clone(),
            oidc: d.oidc.clone(),
        },
        ladder: d.ladder.clone(),
        switches,
    }
}

/// A server state: a team with random name, groups, ladder and uniquely named switches.
fn observed_state() -> impl Strategy<Value = Observed> {
    let ladder = prop::option::of(
        (
            0u32..3,
            prop::option::of("[a-z]{1,5}"),
            prop::collection::vec(
                (
                    1u64..4000,
                    prop::collection::vec(
                        prop_oneof![
                            Just(json!({"kind": "oncall"})),
                            "[a-z]{1,8}".prop_map(|u| json!({"kind": "user", "username": u})),
                        ],
                        0..3,
                    ),
                ),
                0..3,
            ),
        )
            .prop_map(|(repeat, fallback, levels)| {
                serde_json::from_value::<Ladder>(json!({
                    "repeat_count": repeat, "fallback_topic": fallback,
                    "levels": levels.into_iter().map(|(t, targets)| json!({
                        "timeout_seconds": t, "targets": targets})).collect::<Vec<_>>(),
                }))
                .unwrap()
            }),
    );
    let switches = prop::collection::btree_map(
        prop::sample::select(vec!["watchdog", "beat", "heartbeat", "cron", "old"]),
        (
            "[a-z]{1,6}=[A-Za-z]{1,8}",
            1u64..100_000,
            prop::sample::select(vec!["critical", "warning", "info"]),
        ),
        0..5,
    );
    (
        1i64..1_000_000,
        "[A-Za-z][A-Za-z0-9 ]{0,15}",
        prop::option::of("[a-z-]{1,10}"),
        prop::option::of("[a-z-]{1,10}"),
        ladder,
        switches,
    )
        .prop_map(|(id, name, member, owner, ladder, switches)| Observed {
            team: serde_json::from_value(json!({
                "id": id, "name": name, "external_id": "team-ns/platform",
                "oidc": {"member_group": member, "owner_group": owner},
            }))
            .unwrap(),
            ladder,
            switches: switches
                .into_iter()
                .enumerate()
                .map(|(i, (name, (matcher, timeout, severity)))| Switch {
                    id: 1000 + i as Id,
                    name: name.to_owned(),
                    matcher,
                    timeout_seconds: timeout,
                    severity: severity.to_owned(),
                })
                .collect(),
        })
}

/// The model of the server: each call's effect on its state.
fn execute(o: &mut Observed, calls: &[Call], next_id: &mut Id) {
    for c in calls {
        match c {
            Call::CreateTeam { .. } => panic!("create planned for a known team"),
            Call::RenameTeam { team, to, .. } => {
                assert_eq!(*team, o.team.id);
                o.team.name = to.clone();
            }
            Call::SetOidcGroups { team, groups } => {
                assert_eq!(*team, o.team.id);
                o.team.oidc = groups.clone();
            }
            Call::PutEscalation { team, ladder } => {
                assert_eq!(*team, o.team.id);
                o.ladder = Some(ladder.clone());
            }
            Call::DeleteEscalation { team } => {
                assert_eq!(*team, o.team.id);
                assert!(o.ladder.is_some(), "deleting a ladder that is not there");
                o.ladder = None;
            }
            Call::CreateSwitch { team, spec } => {
                assert_eq!(*team, o.team.id);
                assert!(
                    !o.switches.iter().any(|s| s.name == spec.name),
                    "switch_name_taken: {}",
                    spec.name
                );
                *next_id += 1;
                o.switches.push(Switch {
                    id: *next_id,
                    name: spec.name.clone(),
                    matcher: spec.matcher.clone(),
                    timeout_seconds: spec.timeout_seconds,
                    severity: spec.severity.clone(),
                });
            }
            Call::UpdateSwitch { team, switch, spec } => {
                assert_eq!(*team, o.team.id);
                let s = o
                    .switches
                    .iter_mut()
                    .find(|s| s.id == *switch)
                    .expect("updating a switch that exists");
                assert_eq!(s.name, spec.name, "an update keeps the name");
                s.matcher = spec.matcher.clone();
                s.timeout_seconds = spec.timeout_seconds;
                s.severity = spec.severity.clone();
            }
            Call::DeleteSwitch { team, switch, name } => {
                assert_eq!(*team, o.team.id);
                let before = o.switches.len();
                o.switches.retain(|s| !(s.id == *switch && s.name == *name));
                assert_eq!(
                    o.switches.len() + 1,
                    before,
                    "deleting a switch that exists"
                );
            }
        }
    }
}

/// docs/design.md §4.2's order: rename, groups, ladder, then switches.
fn rank(c: &Call) -> u8 {
    match c {
        Call::CreateTeam { .. } => 0,
        Call::RenameTeam { .. } => 1,
        Call::SetOidcGroups { .. } => 2,
        Call::PutEscalation { .. } | Call::DeleteEscalation { .. } => 3,
        Call::CreateSwitch { .. } | Call::UpdateSwitch { .. } | Call::DeleteSwitch { .. } => 4,
    }
}

proptest! {
    #![proptest_config(config(1024))]

    #[test]
    fn team_desired_rejects_exactly_the_invalid_specs(spec in team_spec()) {
        let got = team_plan::desired(&key(), &spec);
        match (&got, should_be_valid(&spec)) {
            (Ok(d), true) => {
                prop_assert_eq!(&d.name, &spec.display_name);
                prop_assert_eq!(&d.external_id, "team-ns/platform");
                prop_assert_eq!(d.switches.len(), spec.deadman_switches.len());
                for (w, s) in d.switches.iter().zip(&spec.deadman_switches) {
                    prop_assert_eq!(w.timeout_seconds, s.timeout.to_seconds().unwrap());
                    prop_assert!(w.timeout_seconds > 0);
                }
                prop_assert_eq!(d.ladder.is_some(), spec.escalation.is_some());
                if let (Some(l), Some(e)) = (&d.ladder, &spec.escalation) {
                    prop_assert_eq!(l.levels.len(), e.levels.len());
                    prop_assert_eq!(i64::from(l.repeat_count), i64::from(e.repeat_count));
                }
            }
            (Err(e), false) => {
                prop_assert!(e.0.contains("spec."), "the message names the field: {}", e.0);
            }
            (got, want) => prop_assert!(false, "desired = {:?}, valid = {}", got, want),
        }
    }

    #[test]
    fn team_plan_is_create_alone_then_empty_when_converged(
        spec in team_spec(),
        team_id in 1i64..1_000_000,
        first_switch in 1i64..1_000_000,
    ) {
        let Ok(d) = team_plan::desired(&key(), &spec) else { return Ok(()) };
        prop_assert_eq!(team_plan::plan(&d, None), vec![team_plan::create_or_find(&d)]);
        prop_assert!(team_plan::create_or_find(&d).is_create());
        let o = observed_equal(&d, team_id, first_switch);
        prop_assert_eq!(team_plan::plan(&d, Some(&o)), vec![]);
    }

    #[test]
    fn team_plan_executed_on_any_server_state_converges(
        spec in team_spec(),
        observed in observed_state(),
    ) {
        let Ok(d) = team_plan::desired(&key(), &spec) else { return Ok(()) };
        let calls = team_plan::plan(&d, Some(&observed));
        // Ordered, no create, each switch touched at most once.
        prop_assert!(calls.windows(2).all(|w| rank(&w[0]) <= rank(&w[1])), "{:?}", calls);
        let mut touched = std::collections::BTreeSet::new();
        for c in &calls {
            prop_assert!(!c.is_create());
            let name = match c {
                Call::CreateSwitch { spec, .. } | Call::UpdateSwitch { spec, .. } => Some(&spec.name),
                Call::DeleteSwitch { name, .. } => Some(name),
                _ => None,
            };
            if let Some(n) = name {
                prop_assert!(touched.insert(n.clone()), "switch {} touched twice: {:?}", n, calls);
            }
        }
        let mut state = observed.clone();
        let mut next_id = 1_000_000;
        execute(&mut state, &calls, &mut next_id);
        prop_assert_eq!(team_plan::plan(&d, Some(&state)), vec![]);
        // Nothing to do means the state already was the desired one.
        if calls.is_empty() {
            prop_assert_eq!(&observed.team.name, &d.name);
            prop_assert_eq!(&observed.ladder, &d.ladder);
        }
    }
}

// ---- TerdutAlertSource -----------------------------------------------------------------------

const KINDS: [IntegrationKind; 3] = [
    IntegrationKind::Alertmanager,
    IntegrationKind::Grafana,
    IntegrationKind::Generic,
];

#[derive(Clone, Debug)]
struct SourceCase {
    kind: IntegrationKind,
    name: String,
    rotate: Option<String>,
    rotated_for: Option<String>,
    status_id: Option<Id>,
    secret: SecretView,
    server: ServerView,
}

fn opt_value() -> impl Strategy<Value = Option<String>> {
    prop::option::of(prop::sample::select(vec!["r1", "r2"]).prop_map(str::to_owned))
}

fn integration() -> impl Strategy<Value = Integration> {
    (
        1i64..4,
        prop::sample::select(KINDS.to_vec()),
        prop::sample::select(vec!["prod-am", "old"]),
    )
        .prop_map(|(id, kind, name)| Integration {
            id,
            kind,
            name: name.to_owned(),
            external_id: "ns/am".into(),
        })
}

fn source_case() -> impl Strategy<Value = SourceCase> {
    let secret = prop_oneof![
        1 => Just(SecretView::Absent),
        1 => Just(SecretView::Foreign),
        4 => (prop::option::of(1i64..4), any::<bool>(), opt_value()).prop_map(
            |(integration_id, has_credentials, rotated_for)| SecretView::Owned(OwnedSecret {
                integration_id,
                has_credentials,
                rotated_for,
            })
        ),
    ];
    let server = prop_oneof![
        1 => Just(ServerView::Unknown),
        1 => (1i64..4).prop_map(ServerView::Gone),
        3 => integration().prop_map(ServerView::Found),
        2 => integration().prop_map(ServerView::ByExternalId),
    ];
    (
        prop::sample::select(KINDS.to_vec()),
        prop::sample::select(vec!["prod-am", "renamed"]),
        opt_value(),
        opt_value(),
        prop::option::of(1i64..4),
        secret,
        server,
    )
        .prop_map(
            |(kind, name, rotate, rotated_for, status_id, secret, server)| SourceCase {
                kind,
                name: name.to_owned(),
                rotate,
                rotated_for,
                status_id,
                secret,
                server,
            },
        )
}

impl SourceCase {
    fn decide(&self) -> Decision {
        source_plan::plan(&Inputs {
            desired: self.desired(),
            status_id: self.status_id,
            secret: &self.secret,
            server: &self.server,
        })
    }

    fn desired(&self) -> SourceDesired<'_> {
        SourceDesired {
            kind: self.kind,
            name: &self.name,
            rotate: self.rotate.as_deref(),
            rotated_for: self.rotated_for.as_deref(),
        }
    }

    fn integration(&self) -> Option<&Integration> {
        match &self.server {
            ServerView::Found(i) | ServerView::ByExternalId(i) => Some(i),
            _ => None,
        }
    }

    /// What the actor's writes make of the world after `decision` (source/execute.rs): a new
    /// integration of the spec's kind and name, its Secret with the rotate value it was written
    /// for, the status id, and the handled rotate value recorded on the object.
    fn after(&self, decision: &Decision, new_id: Id) -> Option<SourceCase> {
        let mut next = self.clone();
        match decision {
            Decision::Noop { .. } | Decision::Blocked(_) => return None,
            Decision::Rename { id, .. } => {
                let mut i = self
                    .integration()
                    .expect("rename of a known integration")
                    .clone();
                assert_eq!(i.id, *id);
                i.name = self.name.clone();
                next.server = ServerView::Found(i);
            }
            Decision::Create | Decision::Recreate { .. } => {
                next.server = ServerView::Found(Integration {
                    id: new_id,
                    kind: self.kind,
                    name: self.name.clone(),
                    external_id: "ns/am".into(),
                });
                next.secret = SecretView::Owned(OwnedSecret {
                    integration_id: Some(new_id),
                    has_credentials: true,
                    rotated_for: self.rotate.clone(),
                });
                next.status_id = Some(new_id);
                if self.rotate.is_some() {
                    next.rotated_for = self.rotate.clone();
                }
            }
        }
        Some(next)
    }
}

proptest! {
    #![proptest_config(config(4096))]

    #[test]
    fn source_plan_never_rotates_unasked_and_converges(case in source_case()) {
        let d = case.decide();
        let desired = case.desired();
        let pending = source_plan::pending_rotation(&desired, &case.secret);
        if case.secret == SecretView::Foreign {
            prop_assert_eq!(&d, &Decision::Blocked(Blocker::SecretConflict));
        }
        prop_assert_eq!(d.is_drastic(), !matches!(d, Decision::Noop { .. } | Decision::Rename { .. }));
        if let Some(i) = case.integration() {
            let holds = case.secret.holds_key_of(i.id);
            // A key its Secret holds survives unless the kind changed or a rotation is pending.
            if holds && i.kind == case.kind && pending.is_none() {
                prop_assert!(!d.is_drastic(), "{:?} -> {:?}", case, d);
            }
            match &d {
                Decision::Recreate { delete, reason } => {
                    prop_assert_eq!(*delete, Some(i.id));
                    match reason {
                        RecreateReason::KindChanged { from } => {
                            prop_assert_eq!(*from, i.kind);
                            prop_assert!(i.kind != case.kind);
                        }
                        RecreateReason::Requested { value } => {
                            prop_assert_eq!(Some(value.as_str()), pending);
                        }
                        RecreateReason::CrashWindow => {
                            prop_assert!(matches!(case.server, ServerView::ByExternalId(_)));
                            prop_assert!(!holds);
                            prop_assert!(case.status_id != Some(i.id));
                            prop_assert!(case.secret.integration_id() != Some(i.id));
                        }
                        RecreateReason::DeletedOnServer => {
                            prop_assert!(false, "deleted on server while found: {:?}", case);
                        }
                    }
                }
                Decision::Blocked(Blocker::WebhookSecretLost { id }) => {
                    prop_assert_eq!(*id, i.id);
                    prop_assert!(!holds);
                    prop_assert!(pending.is_none() && i.kind == case.kind);
                }
                Decision::Noop { id } | Decision::Rename { id, .. } => {
                    prop_assert_eq!(*id, i.id);
                    prop_assert!(holds);
                }
                Decision::Create => prop_assert!(false, "create while found: {:?}", case),
                Decision::Blocked(Blocker::SecretConflict) => {}
            }
        }
        match &case.server {
            ServerView::Unknown if case.secret != SecretView::Foreign => {
                prop_assert_eq!(&d, &Decision::Create);
            }
            ServerView::Gone(_) if case.secret != SecretView::Foreign => {
                prop_assert_eq!(&d, &Decision::Recreate {
                    delete: None,
                    reason: RecreateReason::DeletedOnServer,
                });
            }
            _ => {}
        }
        // Executing the decision reaches Noop in one step, and stays there.
        if let Some(next) = case.after(&d, 100) {
            let d2 = next.decide();
            prop_assert!(matches!(d2, Decision::Noop { .. }), "{:?} then {:?} -> {:?}", d, next, d2);
            prop_assert_eq!(next.decide(), d2);
        } else {
            // Noop and Blocked are fixpoints: planning again decides the same.
            prop_assert_eq!(case.decide(), d);
        }
    }
}

// ---- TerdutServer ----------------------------------------------------------------------------

fn master() -> MasterService {
    MasterService {
        name: "pg".into(),
        port: 5432,
    }
}

fn server_spec() -> impl Strategy<Value = (String, Value, Option<ClusterObservation>)> {
    let name = prop_oneof![
        8 => Just("terdut".to_owned()),
        4 => "[a-z][a-z0-9-]{0,20}[a-z0-9]",
        1 => Just("x".repeat(64)),
        1 => Just("Bad.Name".to_owned()),
    ];
    let database = prop_oneof![
        3 => Just((json!({"dsn": "postgres://terdut@db:5432/terdut"}), None)),
        1 => Just((json!({"dsn": "postgres://terdut@db/terdut",
                          "passwordSecretRef": {"name": "pg", "key": "password"}}), None)),
        2 => prop::sample::select(vec![
            ClusterObservation::CrdAbsent,
            ClusterObservation::Missing,
            ClusterObservation::Found { phase: None, master: None },
            ClusterObservation::Found { phase: None, master: Some(master()) },
            ClusterObservation::Found { phase: Some("Running".into()), master: Some(master()) },
            ClusterObservation::Found { phase: Some("SyncFailed".into()), master: Some(master()) },
        ])
        .prop_map(|obs| (json!({"postgresClusterRef": {"name": "pg"}}), Some(obs))),
    ];
    let env_name = prop::sample::select(vec![
        "TERDUT_OPERATOR_KEY",
        "TERDUT_LOG_LEVEL",
        "PGPASSWORD",
        "FOO",
        "TERDUT_DATABASE_DSN",
    ]);
    let pod = (
        prop::option::of(prop_oneof![
            Just(json!({"minAvailable": 1})),
            Just(json!({"maxUnavailable": "50%"})),
        ]),
        prop::collection::vec((env_name, "[a-z]{0,8}"), 0..3),
        prop::collection::btree_map(
            prop::sample::select(vec!["terdut.ryuvia.com/operator-key-hash", "a/b", "c"]),
            "[a-z]{0,6}",
            0..3,
        ),
        any::<bool>(),
    )
        .prop_map(|(pdb, env, annotations, volumes)| {
            let mut pod = json!({
                "extraEnv": env.into_iter().map(|(n, v)| json!({"name": n, "value": v})).collect::<Vec<_>>(),
                "annotations": annotations,
            });
            if let Some(p) = pdb {
                pod["disruptionBudget"] = p;
            }
            if volumes {
                pod["extraVolumes"] = json!([{"name": "scratch", "emptyDir": {}}]);
                pod["extraVolumeMounts"] = json!([{"name": "scratch", "mountPath": "/scratch"}]);
            }
            pod
        });
    (
        name,
        database,
        pod,
        0i32..5,
        1i32..65535,
        "[a-z0-9.]{1,10}",
        any::<bool>(),
    )
        .prop_map(|(name, (db, obs), pod, replicas, port, tag, oidc)| {
            let mut spec = json!({
                "image": {"tag": tag},
                "replicas": replicas,
                "networking": {"hostname": "terdut.example.com", "servicePort": port},
                "database": db,
                "pod": pod,
            });
            if oidc {
                spec["oidc"] = json!({"enabled": true, "issuer": "https://idp.example",
                    "clientId": "terdut", "clientSecretRef": {"name": "oidc", "key": "secret"}});
            }
            (name, spec, obs)
        })
}

fn terdut_server(name: &str, spec: &Value) -> TerdutServer {
    serde_json::from_value(json!({
        "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutServer",
        "metadata": {"name": name, "namespace": "oncall", "uid": "uid-1", "generation": 3},
        "spec": spec,
    }))
    .expect("server spec deserializes")
}

#[derive(Default)]
struct World {
    secret: Option<Secret>,
    deployment: Option<Deployment>,
    service: Option<Service>,
    pdb: Option<PodDisruptionBudget>,
}

impl World {
    fn apply(&mut self, steps: &[Step]) {
        for s in steps {
            match s {
                Step::CreateKeySecret(x) => {
                    assert!(self.secret.is_none(), "a key Secret is never overwritten");
                    self.secret = Some((**x).clone());
                }
                Step::ApplyDeployment(x) => self.deployment = Some((**x).clone()),
                Step::ApplyService(x) => self.service = Some((**x).clone()),
                Step::ApplyPdb(x) => self.pdb = Some((**x).clone()),
                Step::DeletePdb { .. } => self.pdb = None,
            }
        }
    }

    fn observed<'a>(
        &'a self,
        cluster: Option<&'a ClusterObservation>,
    ) -> server_plan::Observed<'a> {
        server_plan::Observed {
            key_secret: self.secret.as_ref(),
            database_cluster: cluster,
            deployment: self.deployment.as_ref(),
            service: self.service.as_ref(),
            pdb: self.pdb.as_ref(),
            ..Default::default()
        }
    }
}

fn never() -> Result<OperatorKeyValue, KeyGenError> {
    panic!("no key should be minted")
}

fn valid_name(n: &str) -> bool {
    n.len() <= 63
        && n.starts_with(|c: char| c.is_ascii_lowercase())
        && !n.ends_with('-')
        && n.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn server_plan_converges_and_keeps_the_key_in_its_secret(
        (name, spec, cluster) in server_spec(),
        entropy in any::<[u8; 24]>(),
    ) {
        let server = terdut_server(&name, &spec);
        let key = OperatorKeyValue::from_entropy(entropy);
        let token = key.expose().to_owned();
        prop_assert!(token.starts_with("tdsa_") && token.len() == 53);
        let p = server_plan::plan(&server, &World::default().observed(cluster.as_ref()), || {
            Ok(OperatorKeyValue::from_entropy(entropy))
        })
        .expect("plans");
        if !valid_name(&name) {
            prop_assert!(p.steps.is_empty(), "{:?}", p.steps);
            prop_assert_eq!(&p.status.ready.reason, "InvalidSpec");
            return Ok(());
        }
        prop_assert!(matches!(p.steps.first(), Some(Step::CreateKeySecret(_))), "{:?}", p.steps);
        // The key is in the Secret and nowhere else.
        let b64 = serde_json::to_value(k8s_openapi::ByteString(token.as_bytes().to_vec())).unwrap();
        let needles = [token.clone(), token[5..].to_owned(), b64.as_str().unwrap().to_owned()];
        let shown = format!("{p:?}");
        for s in &p.steps {
            let (json, is_secret) = match s {
                Step::CreateKeySecret(x) => (serde_json::to_string(x).unwrap(), true),
                Step::ApplyDeployment(x) => (serde_json::to_string(x).unwrap(), false),
                Step::ApplyService(x) => (serde_json::to_string(x).unwrap(), false),
                Step::ApplyPdb(x) => (serde_json::to_string(x).unwrap(), false),
                Step::DeletePdb { name } => (name.clone(), false),
            };
            if is_secret {
                prop_assert!(json.contains(b64.as_str().unwrap()) || json.contains(&token));
            } else {
                for n in &needles {
                    prop_assert!(!json.contains(n.as_str()), "the key in {:?}", s);
                }
            }
        }
        for n in &needles {
            prop_assert!(!shown.contains(n.as_str()), "the key in the plan's Debug");
        }
        if let Some(Step::ApplyDeployment(d)) =
            p.steps.iter().find(|s| matches!(s, Step::ApplyDeployment(_)))
        {
            let c = &d.spec.template.spec.as_ref().unwrap().containers[0];
            let key_env: Vec<_> = c.env.iter().flatten()
                .filter(|e| e.name == "TERDUT_OPERATOR_KEY").collect();
            prop_assert_eq!(key_env.len(), 1, "one TERDUT_OPERATOR_KEY: {:?}", key_env);
            prop_assert!(key_env[0].value.is_none());
            let r = key_env[0].value_from.as_ref().and_then(|v| v.secret_key_ref.as_ref());
            let secret_name = format!("{name}-operator-key");
            prop_assert_eq!(
                r.map(|r| (r.name.as_str(), r.key.as_str())),
                Some((secret_name.as_str(), "token"))
            );
        }
        // Applying the pass and planning again: no writes, no key.
        let mut world = World::default();
        world.apply(&p.steps);
        let again = server_plan::plan(&server, &world.observed(cluster.as_ref()), never)
            .expect("plans");
        prop_assert_eq!(again.steps.len(), 0, "{:?}", again.steps);
        // The key Secret deleted: a new one is minted, the rest stays or rolls.
        let mut lost = World { secret: None, ..world };
        let p3 = server_plan::plan(&server, &lost.observed(cluster.as_ref()), || {
            Ok(OperatorKeyValue::from_entropy([entropy[0].wrapping_add(1); 24]))
        })
        .expect("plans");
        prop_assert!(matches!(p3.steps.first(), Some(Step::CreateKeySecret(_))));
        prop_assert!(!p3.steps.iter().any(|s| matches!(s, Step::ApplyService(_) | Step::ApplyPdb(_))));
        lost.apply(&p3.steps);
        let p4 = server_plan::plan(&server, &lost.observed(cluster.as_ref()), never)
            .expect("plans");
        prop_assert_eq!(p4.steps.len(), 0, "{:?}", p4.steps);
    }
}

/// The model and oracles can fail: a wrong desired state is not empty-planned, a rotation that
/// forgets its `rotated_for` would rotate again, and an invalid spec is seen as such.
#[test]
fn the_properties_can_fail() {
    let spec: TerdutTeamSpec = serde_json::from_value(json!({
        "serverRef": {"name": "terdut"}, "displayName": "P",
        "deadmanSwitches": [
            {"name": "a", "matcher": "x=y", "timeout": "1m"},
            {"name": "a", "matcher": "x=y", "timeout": "2m"}],
    }))
    .unwrap();
    assert!(!should_be_valid(&spec));
    assert!(team_plan::desired(&key(), &spec).is_err());
    let spec: TerdutTeamSpec = serde_json::from_value(json!({
        "serverRef": {"name": "terdut"}, "displayName": "P",
        "deadmanSwitches": [{"name": "a", "matcher": "x=y", "timeout": "1m"}],
    }))
    .unwrap();
    let d = team_plan::desired(&key(), &spec).unwrap();
    let mut o = observed_equal(&d, 1, 1);
    o.switches[0].timeout_seconds += 1;
    assert_eq!(team_plan::plan(&d, Some(&o)).len(), 1);

    // A rotation whose Secret did not record the value would be asked for again.
    let case = SourceCase {
        kind: IntegrationKind::Generic,
        name: "prod-am".into(),
        rotate: Some("r1".into()),
        rotated_for: None,
        status_id: Some(1),
        secret: SecretView::Owned(OwnedSecret {
            integration_id: Some(1),
            has_credentials: true,
            rotated_for: None,
        }),
        server: ServerView::Found(Integration {
            id: 1,
            kind: IntegrationKind::Generic,
            name: "prod-am".into(),
            external_id: "ns/am".into(),
        }),
    };
    let d = case.decide();
    assert!(matches!(d, Decision::Recreate { .. }));
    let mut forgetful = case.after(&d, 2).unwrap();
    forgetful.rotated_for = None;
    forgetful.secret = SecretView::Owned(OwnedSecret {
        integration_id: Some(2),
        has_credentials: true,
        rotated_for: None,
    });
    assert!(matches!(forgetful.decide(), Decision::Recreate { .. }));
    assert!(valid_name("terdut"));
    assert!(!valid_name("Bad.Name") && !valid_name(&"x".repeat(64)));
}
