//! The routing rules, one per test, as a user would state them.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use terdut_crds::v1alpha1::server::{AllowedNamespaces, AllowedTeams, FromNamespaces};

use super::*;

fn key(s: &str) -> ObjectKey {
    let (ns, name) = s.split_once('/').expect("ns/name");
    ObjectKey::new(ns, name)
}

const SERVER: &str = "platform/terdut";

/// A server in `platform` accepting namespaces labelled `oncall=yes`.
fn server(generation: i64) -> ServerFacts {
    ServerFacts {
        uid: Some("u1".into()),
        generation: Some(generation),
        deleting: false,
        allowed: AllowedTeams {
            namespaces: AllowedNamespaces {
                from: FromNamespaces::Selector,
                selector: Some(LabelSelector {
                    match_labels: Some(BTreeMap::from([("oncall".into(), "yes".into())])),
                    ..Default::default()
                }),
            },
            ..Default::default()
        },
    }
}

fn team(rv: &str) -> TeamFacts {
    TeamFacts {
        server: key(SERVER),
        ready: false,
        team_id: None,
        deleting: false,
        paused: false,
        resource_version: Some(rv.into()),
    }
}

fn ready(rv: &str, id: i64) -> TeamFacts {
    TeamFacts {
        ready: true,
        team_id: Some(id),
        ..team(rv)
    }
}

fn source(team: &str, rv: &str) -> SourceFacts {
    SourceFacts {
        team: team.into(),
        resource_version: Some(rv.into()),
    }
}

fn on(host: &Host, kind: ChildKind, k: &str) -> Command {
    Command::Ensure {
        kind,
        key: key(k),
        host: host.clone(),
    }
}

fn off(host: &Host, kind: ChildKind, k: &str) -> Command {
    Command::Remove {
        kind,
        key: key(k),
        host: host.clone(),
    }
}

fn at_server() -> Host {
    Host::Server(key(SERVER))
}

use ChildKind::{Source as S, Team as T};

fn labelled(index: &mut Index, ns: &str, yes: bool) -> Vec<Command> {
    let labels = if yes {
        BTreeMap::from([("oncall".into(), "yes".into())])
    } else {
        BTreeMap::new()
    };
    index.namespace(ns, Some(labels))
}

#[test]
fn the_teams_of_one_server_share_its_key_instead_of_holding_a_copy_each() {
    let mut index = Index::default();
    index.server(key(SERVER), Some(server(1)));
    index.team(key("platform/a"), Some(team("1")), false);
    index.team(key("platform/b"), Some(team("1")), false);
    let (a, b) = (held_in(&index, "platform/a"), held_in(&index, "platform/b"));
    assert_eq!(a, key(SERVER));
    assert!(
        a.shares_allocation(&b),
        "one allocation for the server's key"
    );
    let (server_key, _) = index
        .servers
        .get_key_value(&key(SERVER))
        .expect("the server");
    assert!(a.shares_allocation(server_key));
    // A team seen before its server shares the fan-out's key with the teams after it.
    let mut index = Index::default();
    index.team(key("platform/a"), Some(team("1")), false);
    index.team(key("platform/b"), Some(team("1")), false);
    assert!(held_in(&index, "platform/a").shares_allocation(&held_in(&index, "platform/b")));
}

#[test]
fn a_new_event_for_a_known_team_reuses_its_key_in_the_commands_it_sends() {
    let mut index = Index::default();
    index.server(key(SERVER), Some(server(1)));
    labelled(&mut index, "platform", true);
    let first = key("platform/a");
    index.team(first.clone(), Some(team("1")), false);
    let out = index.team(key("platform/a"), Some(team("2")), false);
    let Some(Command::Ensure { key: sent, .. }) = out.first() else {
        panic!("a changed team is ensured: {out:?}");
    };
    assert!(sent.shares_allocation(&first));
    let (held, _) = index.teams.get_key_value(&first).expect("the team");
    assert!(held.shares_allocation(&first));
}

fn held_in(index: &Index, team: &str) -> ObjectKey {
    index.teams[&key(team)].facts.server.clone()
}

#[test]
fn a_team_whose_server_does_not_exist_is_held_and_moves_under_it_when_it_appears() {
    let mut index = Index::default();
    assert_eq!(
        index.team(key("platform/a"), Some(team("1")), false),
        [on(&Host::Holding, T, "platform/a")]
    );
    assert_eq!(
        index.server(key(SERVER), Some(server(1))),
        [
            Command::EnsureServer(key(SERVER)),
            off(&Host::Holding, T, "platform/a"),
            on(&at_server(), T, "platform/a"),
        ]
    );
    // Gone again: back to holding, where its pass says the server does not exist.
    assert_eq!(
        index.server(key(SERVER), None),
        [
            Command::RemoveServer(key(SERVER)),
            off(&at_server(), T, "platform/a"),
            on(&Host::Holding, T, "platform/a"),
        ]
    );
}

#[test]
fn a_refused_team_is_held_until_its_namespace_is_accepted_and_held_again_when_it_is_not() {
    let mut index = Index::default();
    index.server(key(SERVER), Some(server(1)));
    labelled(&mut index, "payments", false);
    assert_eq!(
        index.team(key("payments/p"), Some(team("1")), false),
        [
            on(&Host::Holding, T, "payments/p"),
            Command::EnsureServer(key(SERVER)),
        ],
        "the server recounts its refused teams"
    );
    assert_eq!(
        labelled(&mut index, "payments", true),
        [
            off(&Host::Holding, T, "payments/p"),
            on(&at_server(), T, "payments/p"),
        ]
    );
    // A label change nobody's consent depends on still re-places (and nudges) the team, but
    // an event with the same labels does nothing.
    assert_eq!(labelled(&mut index, "payments", true), []);
    assert_eq!(
        labelled(&mut index, "payments", false),
        [
            off(&at_server(), T, "payments/p"),
            on(&Host::Holding, T, "payments/p"),
        ]
    );
}

#[test]
fn a_team_in_the_servers_own_namespace_needs_no_consent_and_a_deleted_one_none_either() {
    let mut index = Index::default();
    index.server(key(SERVER), Some(server(1)));
    index.team(key("platform/own"), Some(team("1")), false);
    assert_eq!(index.host_of(T, &key("platform/own")), Some(&at_server()));

    labelled(&mut index, "payments", false);
    index.team(key("payments/p"), Some(team("1")), false);
    assert_eq!(index.host_of(T, &key("payments/p")), Some(&Host::Holding));
    // Cleaning up after itself needs no consent (§4.6): a deleted team goes to its server.
    let deleting = TeamFacts {
        deleting: true,
        ..team("2")
    };
    let out = index.team(key("payments/p"), Some(deleting), false);
    assert!(out.contains(&on(&at_server(), T, "payments/p")), "{out:?}");
}

#[test]
fn a_source_lives_with_its_team_and_moves_with_it() {
    let mut index = Index::default();
    assert_eq!(
        index.source(key("platform/am"), Some(source("a", "1")), false),
        [on(&Host::Holding, S, "platform/am")],
        "no team yet"
    );
    index.team(key("platform/a"), Some(team("1")), false);
    assert_eq!(index.host_of(S, &key("platform/am")), Some(&Host::Holding));
    let out = index.server(key(SERVER), Some(server(1)));
    assert!(
        out.contains(&off(&Host::Holding, S, "platform/am")),
        "{out:?}"
    );
    assert!(out.contains(&on(&at_server(), S, "platform/am")), "{out:?}");
    assert_eq!(
        index.children_of(&at_server()),
        (vec![key("platform/a")], vec![key("platform/am")]),
        "what a restarted server actor adopts"
    );
    assert_eq!(index.children_of(&Host::Holding), (vec![], vec![]));

    // Its team goes: the source waits under holding.
    let out = index.team(key("platform/a"), None, false);
    assert_eq!(
        out,
        [
            off(&at_server(), T, "platform/a"),
            Command::EnsureServer(key(SERVER)),
            off(&at_server(), S, "platform/am"),
            on(&Host::Holding, S, "platform/am"),
        ]
    );
}

#[test]
fn the_operators_own_writes_nudge_nobody_and_anyone_elses_do() {
    let mut index = Index::default();
    index.server(key(SERVER), Some(server(1)));
    index.team(key("platform/a"), Some(team("1")), false);
    // Its own status write, same gate for the sources, same Ready for the server: nothing.
    assert_eq!(index.team(key("platform/a"), Some(team("2")), true), []);
    // The same version again (a dependency's re-nudge carries it): not a new own write.
    assert_eq!(
        index.team(key("platform/a"), Some(team("2")), true),
        [on(&at_server(), T, "platform/a")]
    );
    // Someone else's write.
    assert_eq!(
        index.team(key("platform/a"), Some(team("3")), false),
        [on(&at_server(), T, "platform/a")]
    );
}

#[test]
fn a_team_turning_ready_wakes_its_server_and_its_sources_and_nothing_else() {
    let mut index = Index::default();
    index.server(key(SERVER), Some(server(1)));
    index.team(key("platform/a"), Some(team("1")), false);
    index.team(key("platform/b"), Some(team("1")), false);
    index.source(key("platform/am"), Some(source("a", "1")), false);
    index.source(key("platform/bm"), Some(source("b", "1")), false);
    assert_eq!(
        index.team(key("platform/a"), Some(ready("2", 7)), true),
        [
            Command::EnsureServer(key(SERVER)),
            on(&at_server(), S, "platform/am"),
        ]
    );
}

#[test]
fn pausing_or_resuming_a_team_wakes_its_sources_but_not_its_server() {
    let mut index = Index::default();
    index.server(key(SERVER), Some(server(1)));
    index.team(key("platform/a"), Some(ready("1", 7)), false);
    index.source(key("platform/am"), Some(source("a", "1")), false);
    let paused = TeamFacts {
        paused: true,
        ..ready("2", 7)
    };
    let woken = index.team(key("platform/a"), Some(paused), false);
    assert!(
        woken.contains(&on(&at_server(), S, "platform/am")),
        "{woken:?}"
    );
    assert!(
        !woken.contains(&Command::EnsureServer(key(SERVER))),
        "{woken:?}"
    );
    let woken = index.team(key("platform/a"), Some(ready("3", 7)), false);
    assert!(
        woken.contains(&on(&at_server(), S, "platform/am")),
        "{woken:?}"
    );
}

#[test]
fn a_servers_status_write_wakes_no_team_and_a_spec_change_wakes_each() {
    let mut index = Index::default();
    index.server(key(SERVER), Some(server(1)));
    index.team(key("platform/a"), Some(team("1")), false);
    assert_eq!(
        index.server(key(SERVER), Some(server(1))),
        [Command::EnsureServer(key(SERVER))]
    );
    assert_eq!(
        index.server(key(SERVER), Some(server(2))),
        [
            Command::EnsureServer(key(SERVER)),
            on(&at_server(), T, "platform/a"),
        ]
    );
    assert_eq!(
        index.server_owned(&key(SERVER)),
        [Command::EnsureServer(key(SERVER))]
    );
    assert_eq!(index.server_owned(&key("other/x")), []);
}

#[test]
fn a_webhook_secret_written_by_anyone_else_or_deleted_wakes_its_source() {
    let mut index = Index::default();
    index.team(key("platform/a"), Some(team("1")), false);
    index.source(key("platform/am"), Some(source("a", "1")), false);
    let secret = key("platform/am-webhook");
    let source = key("platform/am");
    let woken = [on(&Host::Holding, S, "platform/am")];
    assert_eq!(
        index.webhook_secret(secret.clone(), &source, Some("5".into()), false, true),
        []
    );
    assert_eq!(
        index.webhook_secret(secret.clone(), &source, Some("6".into()), false, false),
        woken
    );
    assert_eq!(
        index.webhook_secret(secret.clone(), &source, None, true, true),
        woken
    );
    assert_eq!(
        index.webhook_secret(secret, &key("platform/unknown"), None, true, false),
        []
    );
}

#[test]
fn a_list_removes_what_was_deleted_unseen_and_wakes_every_team_and_source() {
    let mut index = Index::default();
    index.server(key(SERVER), Some(server(1)));
    index.team(key("platform/a"), Some(team("1")), false);
    index.team(key("other/b"), Some(team("1")), false);
    index.source(key("platform/am"), Some(source("a", "1")), false);

    // platform's list lacks team a; other's watch has not listed, so b stays.
    let present = BTreeSet::new();
    let out = index.listed(Listed::Team, Some("platform"), &present);
    assert_eq!(
        out,
        [
            off(&at_server(), T, "platform/a"),
            Command::EnsureServer(key(SERVER)),
            off(&at_server(), S, "platform/am"),
            on(&Host::Holding, S, "platform/am"),
            on(&Host::Holding, T, "other/b"),
        ]
    );
    assert_eq!(index.host_of(T, &key("platform/a")), None);
    assert!(index.host_of(T, &key("other/b")).is_some());

    // A namespace list that lacks a namespace forgets its labels: its teams are refused.
    labelled(&mut index, "other", true);
    assert_eq!(index.host_of(T, &key("other/b")), Some(&at_server()));
    let out = index.listed(Listed::Namespace, None, &BTreeSet::new());
    assert!(out.contains(&on(&Host::Holding, T, "other/b")), "{out:?}");
}
