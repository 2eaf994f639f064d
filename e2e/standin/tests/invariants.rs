//! Property test: random sequences of contract calls (names and ids drawn from small pools so
//! they collide often) against one stand-in. Before each call the expected answer is derived
//! from the state the admin surface reports; after it the invariants are checked:
//! never two teams with one `external_id` or one name, never two switches of a team with one
//! name, never an integration key returned twice, deleted teams gone, and at the end of each
//! sequence exactly the keys of live integrations are live.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

use common::{Api, code};
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestCaseError, TestRunner};
use reqwest::Method;
use serde_json::json;
use terdut_standin::admin::AdminState;
use terdut_standin::{AdminClient, Config, spawn};

const TEAM_NAMES: [&str; 4] = ["Alpha", "Beta", "Gamma", "Delta"];
const TEAM_EXTS: [&str; 5] = ["ns/a", "ns/b", "ns/c", "ns/d", "ns/e"];
const SWITCH_NAMES: [&str; 3] = ["watchdog", "heartbeat", "canary"];
const INTEGRATION_EXTS: [&str; 3] = ["ns/am", "ns/grafana", "ns/generic"];
const KINDS: [&str; 3] = ["alertmanager", "grafana", "generic"];
/// `alice` is seeded, `bob` is not.
const USERS: [&str; 2] = ["alice", "bob"];

#[derive(Clone, Debug)]
enum Op {
    CreateTeam(usize, usize),
    RenameTeam(usize, usize),
    DeleteTeam(usize),
    SetIncidents(usize, u32),
    PutLadder(usize, usize),
    CreateSwitch(usize, usize),
    UpdateSwitch(usize, usize, usize),
    DeleteSwitch(usize, usize),
    CreateIntegration(usize, usize, usize),
    RenameIntegration(usize, usize, usize),
    DeleteIntegration(usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    let t = 0..6usize;
    prop_oneof![
        3 => (0..TEAM_NAMES.len(), 0..TEAM_EXTS.len()).prop_map(|(n, e)| Op::CreateTeam(n, e)),
        1 => (t.clone(), 0..TEAM_NAMES.len()).prop_map(|(t, n)| Op::RenameTeam(t, n)),
        1 => t.clone().prop_map(Op::DeleteTeam),
        1 => (t.clone(), 0..2u32).prop_map(|(t, c)| Op::SetIncidents(t, c)),
        1 => (t.clone(), 0..USERS.len()).prop_map(|(t, u)| Op::PutLadder(t, u)),
        2 => (t.clone(), 0..SWITCH_NAMES.len()).prop_map(|(t, n)| Op::CreateSwitch(t, n)),
        1 => (t.clone(), 0..4usize, 0..SWITCH_NAMES.len())
            .prop_map(|(t, s, n)| Op::UpdateSwitch(t, s, n)),
        1 => (t.clone(), 0..4usize).prop_map(|(t, s)| Op::DeleteSwitch(t, s)),
        2 => (t.clone(), 0..INTEGRATION_EXTS.len(), 0..KINDS.len())
            .prop_map(|(t, e, k)| Op::CreateIntegration(t, e, k)),
        1 => (t.clone(), 0..4usize, 0..TEAM_NAMES.len())
            .prop_map(|(t, i, n)| Op::RenameIntegration(t, i, n)),
        1 => (t, 0..4usize).prop_map(|(t, i)| Op::DeleteIntegration(t, i)),
    ]
}

/// What one sequence has seen.
#[derive(Default)]
struct Seen {
    teams: Vec<i64>,
    switches: Vec<i64>,
    integrations: Vec<i64>,
    deleted_teams: HashSet<i64>,
    keys: BTreeMap<i64, String>,
}

fn pick(ids: &[i64], i: usize) -> i64 {
    if ids.is_empty() {
        424_242
    } else {
        ids[i % ids.len()]
    }
}

type Step = Result<(), TestCaseError>;

async fn apply(
    api: &Api,
    admin: &AdminClient,
    before: &AdminState,
    seen: &mut Seen,
    all_keys: &Mutex<HashSet<String>>,
    op: &Op,
) -> Step {
    match *op {
        Op::CreateTeam(n, e) => {
            let (name, ext) = (TEAM_NAMES[n], TEAM_EXTS[e]);
            let (status, body) = api
                .call(
                    Method::POST,
                    "/api/v1/teams",
                    Some(json!({"name": name, "external_id": ext})),
                )
                .await;
            if let Some(existing) = before.team_by_external_id(ext) {
                prop_assert_eq!(status, 200);
                prop_assert_eq!(&body["name"], &json!(existing.name), "name untouched");
                prop_assert_eq!(&body["id"], &json!(existing.id));
            } else if before.teams.iter().any(|t| t.name == name) {
                prop_assert_eq!((status, code(&body)), (409, "team_name_taken"));
            } else {
                prop_assert_eq!(status, 201);
                seen.teams.push(body["id"].as_i64().unwrap_or_default());
            }
        }
        Op::RenameTeam(t, n) => {
            let (id, name) = (pick(&seen.teams, t), TEAM_NAMES[n]);
            let (status, body) = api
                .call(
                    Method::PUT,
                    &format!("/api/v1/teams/{id}/name"),
                    Some(json!({"name": name})),
                )
                .await;
            if before.team(id).is_none() {
                prop_assert_eq!(status, 404);
            } else if before.teams.iter().any(|t| t.name == name && t.id != id) {
                prop_assert_eq!((status, code(&body)), (409, "team_name_taken"));
            } else {
                prop_assert_eq!((status, &body["name"]), (200, &json!(name)));
            }
        }
        Op::DeleteTeam(t) => {
            let id = pick(&seen.teams, t);
            let (status, body) = api
                .call(Method::DELETE, &format!("/api/v1/teams/{id}"), None)
                .await;
            match before.team(id) {
                None => prop_assert_eq!(status, 404),
                Some(team) if team.open_incidents > 0 => {
                    prop_assert_eq!((status, code(&body)), (409, "team_has_open_incidents"));
                }
                Some(_) => {
                    prop_assert_eq!(status, 204);
                    seen.deleted_teams.insert(id);
                }
            }
        }
        Op::SetIncidents(t, count) => {
            let id = pick(&seen.teams, t);
            let result = admin.set_open_incidents(id, count).await;
            prop_assert_eq!(result.is_ok(), before.team(id).is_some());
        }
        Op::PutLadder(t, u) => {
            let (id, user) = (pick(&seen.teams, t), USERS[u]);
            let (status, body) = api
                .call(
                    Method::PUT,
                    &format!("/api/v1/teams/{id}/escalation"),
                    Some(
                        json!({"repeat_count": 1, "fallback_topic": null, "levels": [
                            {"timeout_seconds": 60, "targets": [{"kind": "user", "username": user}]}
                        ]}),
                    ),
                )
                .await;
            if before.team(id).is_none() {
                prop_assert_eq!(status, 404);
            } else if !before.users.iter().any(|x| x == user) {
                prop_assert_eq!((status, code(&body)), (422, "unknown_user"));
                prop_assert_eq!(&body["username"], &json!(user));
            } else {
                prop_assert_eq!(status, 200);
            }
        }
        Op::CreateSwitch(t, n) => {
            let (id, name) = (pick(&seen.teams, t), SWITCH_NAMES[n]);
            let (status, body) = api
                .call(
                    Method::POST,
                    &format!("/api/v1/teams/{id}/deadman-switches"),
                    Some(json!({"name": name, "matcher": "alertname=Watchdog",
                        "timeout_seconds": 900, "severity": "critical"})),
                )
                .await;
            match before.team(id) {
                None => prop_assert_eq!(status, 404),
                Some(team) if team.switches.iter().any(|s| s.name == name) => {
                    prop_assert_eq!((status, code(&body)), (409, "switch_name_taken"));
                }
                Some(_) => {
                    prop_assert_eq!(status, 201);
                    seen.switches.push(body["id"].as_i64().unwrap_or_default());
                }
            }
        }
        Op::UpdateSwitch(t, s, n) => {
            let (id, sid, name) = (
                pick(&seen.teams, t),
                pick(&seen.switches, s),
                SWITCH_NAMES[n],
            );
            let (status, body) = api
                .call(
                    Method::PUT,
                    &format!("/api/v1/teams/{id}/deadman-switches/{sid}"),
                    Some(json!({"name": name, "matcher": "alertname=Watchdog",
                        "timeout_seconds": 600, "severity": "warning"})),
                )
                .await;
            match before.team(id) {
                Some(team) if team.switches.iter().any(|x| x.id == sid) => {
                    if team.switches.iter().any(|x| x.name == name && x.id != sid) {
                        prop_assert_eq!((status, code(&body)), (409, "switch_name_taken"));
                    } else {
                        prop_assert_eq!((status, &body["id"]), (200, &json!(sid)));
                    }
                }
                _ => prop_assert_eq!(status, 404),
            }
        }
        Op::DeleteSwitch(t, s) => {
            let (id, sid) = (pick(&seen.teams, t), pick(&seen.switches, s));
            let (status, _) = api
                .call(
                    Method::DELETE,
                    &format!("/api/v1/teams/{id}/deadman-switches/{sid}"),
                    None,
                )
                .await;
            let exists = before
                .team(id)
                .is_some_and(|t| t.switches.iter().any(|x| x.id == sid));
            prop_assert_eq!(status, if exists { 204 } else { 404 });
        }
        Op::CreateIntegration(t, e, k) => {
            let (id, ext) = (pick(&seen.teams, t), INTEGRATION_EXTS[e]);
            let (status, body) = api
                .call(
                    Method::POST,
                    &format!("/api/v1/teams/{id}/integrations"),
                    Some(json!({"kind": KINDS[k], "name": "source", "external_id": ext})),
                )
                .await;
            match before.team(id) {
                None => prop_assert_eq!(status, 404),
                Some(team) => match team.integrations.iter().find(|i| i.external_id == ext) {
                    Some(existing) => {
                        prop_assert_eq!(status, 200);
                        prop_assert_eq!(&body["id"], &json!(existing.id));
                        prop_assert!(body.get("key").is_none() && body.get("url").is_none());
                    }
                    None => {
                        prop_assert_eq!(status, 201);
                        let key = body["key"].as_str().unwrap_or_default().to_owned();
                        prop_assert!(key.starts_with("tdik_") && key.len() == 53, "{}", key);
                        let fresh = all_keys
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert(key.clone());
                        prop_assert!(fresh, "an integration key was returned twice");
                        let iid = body["id"].as_i64().unwrap_or_default();
                        seen.integrations.push(iid);
                        seen.keys.insert(iid, key);
                    }
                },
            }
        }
        Op::RenameIntegration(t, i, n) => {
            let (id, iid) = (pick(&seen.teams, t), pick(&seen.integrations, i));
            let (status, body) = api
                .call(
                    Method::PATCH,
                    &format!("/api/v1/teams/{id}/integrations/{iid}"),
                    Some(json!({"name": TEAM_NAMES[n]})),
                )
                .await;
            let exists = before
                .team(id)
                .is_some_and(|t| t.integrations.iter().any(|x| x.id == iid));
            if exists {
                prop_assert_eq!((status, &body["name"]), (200, &json!(TEAM_NAMES[n])));
                prop_assert!(body.get("key").is_none(), "never the key again");
            } else {
                prop_assert_eq!(status, 404);
            }
        }
        Op::DeleteIntegration(t, i) => {
            let (id, iid) = (pick(&seen.teams, t), pick(&seen.integrations, i));
            let (status, _) = api
                .call(
                    Method::DELETE,
                    &format!("/api/v1/teams/{id}/integrations/{iid}"),
                    None,
                )
                .await;
            let exists = before
                .team(id)
                .is_some_and(|t| t.integrations.iter().any(|x| x.id == iid));
            prop_assert_eq!(status, if exists { 204 } else { 404 });
        }
    }
    Ok(())
}

fn invariants(state: &AdminState, seen: &Seen) -> Step {
    let mut exts = HashSet::new();
    let mut names = HashSet::new();
    for team in &state.teams {
        prop_assert!(
            exts.insert(&team.external_id),
            "two teams with one external_id"
        );
        prop_assert!(names.insert(&team.name), "two teams with one name");
        prop_assert!(
            !seen.deleted_teams.contains(&team.id),
            "a deleted team is back"
        );
        let mut switch_names = HashSet::new();
        for s in &team.switches {
            prop_assert!(switch_names.insert(&s.name), "two switches with one name");
        }
        let mut integration_exts = HashSet::new();
        for i in &team.integrations {
            prop_assert!(
                integration_exts.insert(&i.external_id),
                "two integrations with one external_id"
            );
        }
    }
    Ok(())
}

async fn run_sequence(
    api: &Api,
    admin: &AdminClient,
    all_keys: &Mutex<HashSet<String>>,
    ops: &[Op],
) -> Step {
    admin.reset().await.expect("reset");
    admin.seed_users(["alice"]).await.expect("seed");
    let mut seen = Seen::default();
    for op in ops {
        let before = admin.state().await.expect("state");
        apply(api, admin, &before, &mut seen, all_keys, op).await?;
        let after = admin.state().await.expect("state");
        invariants(&after, &seen)?;
        for id in &seen.deleted_teams {
            let (status, _) = api
                .call(Method::GET, &format!("/api/v1/teams/{id}"), None)
                .await;
            prop_assert_eq!(status, 404, "deleted team {} still answers", id);
        }
    }
    let state = admin.state().await.expect("state");
    for (iid, key) in &seen.keys {
        let live = state
            .teams
            .iter()
            .any(|t| t.integrations.iter().any(|i| i.id == *iid));
        let check = admin.key_check(key).await.expect("key check");
        prop_assert_eq!(check.live, live, "key liveness of integration {}", iid);
    }
    Ok(())
}

/// `n` cases, times `TERDUT_FUZZ_SCALE` when set (`just fuzz` runs them longer, with random
/// seeds; `just test` pins `PROPTEST_RNG_SEED` so CI is reproducible: docs/adr/0006).
fn fuzz_cases(n: u32) -> u32 {
    std::env::var("TERDUT_FUZZ_SCALE")
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .map_or(n, |k| n.saturating_mul(k.max(1)))
}

#[test]
fn invariants_hold_under_random_call_sequences() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let standin = rt
        .block_on(spawn(Config::for_tests()))
        .expect("stand-in starts");
    let api = Api::new(&standin);
    let admin = standin.admin();
    let all_keys = Mutex::new(HashSet::new());
    let mut runner = TestRunner::new(ProptestConfig {
        cases: fuzz_cases(64),
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let result = runner.run(&proptest::collection::vec(op(), 1..24), |ops| {
        rt.block_on(run_sequence(&api, &admin, &all_keys, &ops))
    });
    rt.block_on(standin.shutdown());
    if let Err(e) = result {
        panic!("{e}");
    }
}
