//! The contract suite: every row of docs/terdut-api.md through the operator's client, against
//! the in-process stand-in by default or a real terdut-server when `TERDUT_CONTRACT_URL` and
//! `TERDUT_CONTRACT_KEY` are set. Each error is classified by the client from a real answer
//! of the server under test, not from hand-written JSON.
//!
//! Fault injection, call counting and key liveness need the stand-in's admin surface; those
//! tests (or parts) print `SKIP` with the reason against a real server.

mod support;

use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use support::{Target, unique};
use terdut_actors::api::{
    ApiError, ApiMetrics, Deletion, Endpoint, IntegrationCreate, IntegrationKind, IntegrationPatch,
    Ladder, Level, NewIntegration, OidcGroups, OperatorKey, SwitchSpec, Target as LadderTarget,
    Team, TransientCause,
};
use terdut_standin::FaultRule;

async fn fresh_team(t: &Target) -> Team {
    let name = unique("contract");
    t.client
        .create_team(&name, &format!("contract/{name}"))
        .await
        .expect("create team")
        .into_team()
}

/// The PATCH body that renames an integration to `name`.
fn patch(name: &str) -> IntegrationPatch {
    IntegrationPatch { name: name.into() }
}

async fn cleanup(t: &Target, team: &Team) {
    let _ = t.client.delete_escalation(team.id).await;
    let _ = t.client.delete_team(team.id).await;
}

fn oncall_ladder() -> Ladder {
    Ladder {
        repeat_count: 2,
        fallback_topic: Some("platform-oncall".into()),
        levels: vec![Level {
            timeout_seconds: 300,
            targets: vec![LadderTarget::Oncall],
        }],
    }
}

fn switch(name: &str, timeout_seconds: u64) -> SwitchSpec {
    SwitchSpec {
        name: name.into(),
        matcher: "alertname=Watchdog,cluster=prod".into(),
        timeout_seconds,
        severity: "critical".into(),
    }
}

fn new_integration(kind: IntegrationKind, name: &str) -> NewIntegration {
    NewIntegration {
        kind,
        name: name.into(),
        external_id: format!("contract/{name}"),
    }
}

fn is_hex48(s: &str) -> bool {
    s.len() == 48 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

// ---- transport and account -------------------------------------------------------------

#[tokio::test]
async fn probes_and_whoami() {
    let t = Target::new().await;
    t.client.healthz().await.expect("healthz");
    t.client.readyz().await.expect("readyz");
    let me = t.client.whoami().await.expect("whoami");
    assert_eq!(me.account, "terdut-operator");
    assert_eq!(me.scope, "instance");
    t.stop().await;
}

#[tokio::test]
async fn a_wrong_or_missing_key_is_unauthorized_on_every_api_call() {
    let t = Target::new().await;
    let wrong = OperatorKey::new(terdut_standin::generate_operator_key());
    let bad = t.client_with_key(wrong);
    let empty = t.client_with_key(OperatorKey::new(""));
    for client in [&bad, &empty] {
        // The probes need no key.
        client.healthz().await.expect("healthz without key");
        let errors = [
            client.whoami().await.err(),
            client.create_team("x", "contract/x").await.err(),
            client.get_team(1).await.err(),
            client.rename_team(1, "x").await.err(),
            client
                .set_oidc_groups(1, &OidcGroups::default())
                .await
                .err(),
            client.delete_team(1).await.err(),
            client.get_escalation(1).await.err(),
            client.put_escalation(1, &oncall_ladder()).await.err(),
            client.delete_escalation(1).await.err(),
            client.list_switches(1).await.err(),
            client.create_switch(1, &switch("s", 60)).await.err(),
            client.update_switch(1, 2, &switch("s", 60)).await.err(),
            client.delete_switch(1, 2).await.err(),
            client
                .create_integration(1, &new_integration(IntegrationKind::Generic, "x"))
                .await
                .err(),
            client.get_integration(1, 2).await.err(),
            client.rename_integration(1, 2, &patch("x")).await.err(),
            client.delete_integration(1, 2).await.err(),
        ];
        for (i, e) in errors.into_iter().enumerate() {
            let e = e.unwrap_or_else(|| panic!("call {i} succeeded without a valid key"));
            assert_eq!(e, ApiError::Unauthorized, "call {i}");
            assert_eq!(e.category(), "unauthorized");
            // A replaced key Secret rolls the pods; until then a retry can help (docs/design.md
            // §6).
            assert!(e.is_retryable());
        }
    }
    t.stop().await;
}

// ---- teams -------------------------------------------------------------------------------

#[tokio::test]
async fn team_create_is_idempotent_by_external_id() {
    let t = Target::new().await;
    let name = unique("team");
    let ext = format!("contract/{name}");
    let created = t.client.create_team(&name, &ext).await.expect("create");
    assert!(created.was_created(), "first create is 201");
    let team = created.team().clone();
    assert_eq!(team.name, name);
    assert_eq!(team.external_id, ext);
    assert_eq!(team.oidc, OidcGroups::default());

    // Same external_id, another name: 200 with the team as is, name untouched.
    let again = t
        .client
        .create_team(&unique("other"), &ext)
        .await
        .expect("create again");
    assert!(!again.was_created(), "second create is 200");
    assert_eq!(again.team(), &team);

    assert_eq!(t.client.get_team(team.id).await.expect("get"), team);
    cleanup(&t, &team).await;
    t.stop().await;
}

#[tokio::test]
async fn team_rename_groups_get_and_delete() {
    let t = Target::new().await;
    let team = fresh_team(&t).await;

    let new_name = unique("renamed");
    let renamed = t
        .client
        .rename_team(team.id, &new_name)
        .await
        .expect("rename");
    assert_eq!(renamed.name, new_name);
    // Renaming to its own name is not a conflict.
    t.client
        .rename_team(team.id, &new_name)
        .await
        .expect("rename to same name");

    let groups = OidcGroups {
        member_group: Some("terdut-members".into()),
        owner_group: None,
    };
    let with_groups = t
        .client
        .set_oidc_groups(team.id, &groups)
        .await
        .expect("set groups");
    assert_eq!(with_groups.oidc, groups);
    let cleared = t
        .client
        .set_oidc_groups(team.id, &OidcGroups::default())
        .await
        .expect("clear groups");
    assert_eq!(cleared.oidc, OidcGroups::default());

    assert_eq!(
        t.client.delete_team(team.id).await.expect("delete"),
        Deletion::Deleted
    );
    assert_eq!(t.client.get_team(team.id).await, Err(ApiError::NotFound));
    assert_eq!(
        t.client.delete_team(team.id).await.expect("delete again"),
        Deletion::AlreadyGone,
        "a 404 on delete is success for a finalizer"
    );
    assert_eq!(
        t.client.rename_team(team.id, "x").await,
        Err(ApiError::NotFound)
    );
    assert_eq!(
        t.client
            .set_oidc_groups(team.id, &OidcGroups::default())
            .await,
        Err(ApiError::NotFound)
    );
    t.stop().await;
}

#[tokio::test]
async fn a_name_of_another_team_is_taken_on_create_and_rename() {
    let t = Target::new().await;
    let a = fresh_team(&t).await;
    let err = t
        .client
        .create_team(&a.name, &format!("contract/{}", unique("b")))
        .await
        .unwrap_err();
    assert_eq!(err, ApiError::TeamNameTaken);
    assert_eq!(err.category(), "team_name_taken");
    assert!(!err.is_retryable());

    let b = fresh_team(&t).await;
    assert_eq!(
        t.client.rename_team(b.id, &a.name).await,
        Err(ApiError::TeamNameTaken)
    );
    cleanup(&t, &a).await;
    cleanup(&t, &b).await;
    t.stop().await;
}

#[tokio::test]
async fn malformed_bodies_are_invalid() {
    let t = Target::new().await;
    let team = fresh_team(&t).await;
    let cases = [
        (
            "create team with empty name",
            t.client.create_team("", "contract/empty").await.err(),
        ),
        (
            "rename to empty",
            t.client.rename_team(team.id, "").await.err(),
        ),
        (
            "ladder without levels",
            t.client
                .put_escalation(
                    team.id,
                    &Ladder {
                        repeat_count: 0,
                        fallback_topic: None,
                        levels: vec![],
                    },
                )
                .await
                .err(),
        ),
        (
            "switch with empty name",
            t.client.create_switch(team.id, &switch("", 60)).await.err(),
        ),
        (
            "integration with empty name",
            t.client
                .create_integration(team.id, &new_integration(IntegrationKind::Generic, ""))
                .await
                .err(),
        ),
    ];
    for (what, err) in cases {
        match err {
            Some(ApiError::Invalid { message }) => assert!(!message.is_empty(), "{what}"),
            other => panic!("{what}: expected Invalid, got {other:?}"),
        }
    }
    cleanup(&t, &team).await;
    t.stop().await;
}

#[tokio::test]
async fn delete_is_refused_while_the_team_has_open_incidents() {
    let t = Target::new().await;
    let Some(admin) = t.admin("delete_is_refused_while_the_team_has_open_incidents") else {
        return;
    };
    let team = fresh_team(&t).await;
    admin
        .set_open_incidents(team.id, 2)
        .await
        .expect("seed incidents");
    let err = t.client.delete_team(team.id).await.unwrap_err();
    assert_eq!(err, ApiError::OpenIncidents);
    assert!(err.is_retryable(), "the contract says: retry later");
    assert_eq!(err.category(), "open_incidents");
    assert!(t.client.get_team(team.id).await.is_ok(), "still there");

    admin.set_open_incidents(team.id, 0).await.expect("resolve");
    assert_eq!(t.client.delete_team(team.id).await, Ok(Deletion::Deleted));
    t.stop().await;
}

// ---- escalation ladder -------------------------------------------------------------------

#[tokio::test]
async fn escalation_ladder_is_replaced_whole_and_resolves_usernames() {
    let t = Target::new().await;
    let team = fresh_team(&t).await;
    assert_eq!(t.client.get_escalation(team.id).await, Ok(None), "none yet");

    let ladder = oncall_ladder();
    assert_eq!(
        t.client.put_escalation(team.id, &ladder).await,
        Ok(ladder.clone())
    );
    assert_eq!(
        t.client.get_escalation(team.id).await,
        Ok(Some(ladder.clone()))
    );

    let nobody = unique("nobody");
    let mut with_unknown = ladder.clone();
    with_unknown.levels.push(Level {
        timeout_seconds: 900,
        targets: vec![LadderTarget::User {
            username: nobody.clone(),
        }],
    });
    let err = t
        .client
        .put_escalation(team.id, &with_unknown)
        .await
        .unwrap_err();
    assert_eq!(err, ApiError::UnknownUser { username: nobody });
    assert_eq!(err.category(), "unknown_user");
    assert!(!err.is_retryable());
    assert_eq!(
        t.client.get_escalation(team.id).await,
        Ok(Some(ladder.clone())),
        "a refused PUT changes nothing"
    );

    if let Some(user) = t.known_user("escalation ladder").await {
        let mut with_user = ladder.clone();
        with_user.fallback_topic = None;
        with_user.levels[0]
            .targets
            .push(LadderTarget::User { username: user });
        assert_eq!(
            t.client.put_escalation(team.id, &with_user).await,
            Ok(with_user.clone())
        );
        assert_eq!(t.client.get_escalation(team.id).await, Ok(Some(with_user)));
    }

    t.client.delete_escalation(team.id).await.expect("delete");
    t.client
        .delete_escalation(team.id)
        .await
        .expect("delete is idempotent");
    assert_eq!(t.client.get_escalation(team.id).await, Ok(None));
    cleanup(&t, &team).await;
    assert_eq!(
        t.client.put_escalation(team.id, &ladder).await,
        Err(ApiError::NotFound),
        "PUT on a missing team"
    );
    t.stop().await;
}

// ---- dead man's switches -----------------------------------------------------------------

#[tokio::test]
async fn switches_have_unique_names_and_update_in_place() {
    let t = Target::new().await;
    let team = fresh_team(&t).await;
    assert_eq!(t.client.list_switches(team.id).await, Ok(vec![]));

    let watchdog = t
        .client
        .create_switch(team.id, &switch("watchdog", 900))
        .await
        .expect("create");
    assert_eq!(watchdog.spec(), switch("watchdog", 900));
    let err = t
        .client
        .create_switch(team.id, &switch("watchdog", 60))
        .await
        .unwrap_err();
    assert_eq!(err, ApiError::SwitchNameTaken);
    assert_eq!(err.category(), "switch_name_taken");

    let heartbeat = t
        .client
        .create_switch(team.id, &switch("heartbeat", 600))
        .await
        .expect("create second");
    assert_eq!(
        t.client
            .update_switch(team.id, heartbeat.id, &switch("watchdog", 600))
            .await,
        Err(ApiError::SwitchNameTaken),
        "rename-by-update onto a taken name"
    );
    let updated = t
        .client
        .update_switch(team.id, heartbeat.id, &switch("heartbeat", 1200))
        .await
        .expect("update");
    assert_eq!(updated.id, heartbeat.id, "updated in place");
    assert_eq!(updated.timeout_seconds, 1200);

    let mut listed = t.client.list_switches(team.id).await.expect("list");
    listed.sort_by_key(|s| s.id);
    assert_eq!(listed, vec![watchdog.clone(), updated]);

    assert_eq!(
        t.client.delete_switch(team.id, watchdog.id).await,
        Ok(Deletion::Deleted)
    );
    assert_eq!(
        t.client.delete_switch(team.id, watchdog.id).await,
        Ok(Deletion::AlreadyGone)
    );
    assert_eq!(
        t.client
            .update_switch(team.id, watchdog.id, &switch("watchdog", 60))
            .await,
        Err(ApiError::NotFound)
    );
    cleanup(&t, &team).await;
    assert_eq!(
        t.client.list_switches(team.id).await,
        Err(ApiError::NotFound)
    );
    t.stop().await;
}

// ---- integrations ------------------------------------------------------------------------

#[tokio::test]
async fn integration_url_and_key_are_shown_once() {
    let t = Target::new().await;
    let team = fresh_team(&t).await;
    let new = new_integration(IntegrationKind::Alertmanager, &unique("am"));
    let IntegrationCreate::Created(created) = t
        .client
        .create_integration(team.id, &new)
        .await
        .expect("create")
    else {
        panic!("first create must be 201 with url and key");
    };
    let integration = created.integration.clone();
    assert_eq!(integration.kind, IntegrationKind::Alertmanager);
    assert_eq!(integration.name, new.name);
    assert_eq!(integration.external_id, new.external_id);
    let key = created.key.expose();
    assert!(
        key.strip_prefix("tdik_").is_some_and(is_hex48),
        "key format tdik_ + 48 hex"
    );
    let url = created.url.expose();
    let token = url
        .strip_prefix(&format!("{}/api/v1/ingest/alertmanager/", t.base_url))
        .filter(|_| t.is_standin());
    if t.is_standin() {
        assert!(token.is_some_and(|t| !t.is_empty()), "url shape");
    } else {
        assert!(url.contains("/api/v1/ingest/alertmanager/"), "url shape");
    }

    // The same external_id again: 200, the integration without url or key.
    assert_eq!(
        t.client.create_integration(team.id, &new).await,
        Ok(IntegrationCreate::Existing(integration.clone()))
    );
    assert_eq!(
        t.client.get_integration(team.id, integration.id).await,
        Ok(integration.clone())
    );
    let renamed = t
        .client
        .rename_integration(team.id, integration.id, &patch("renamed"))
        .await
        .expect("rename");
    assert_eq!(renamed.name, "renamed");
    assert_eq!(renamed.id, integration.id);

    if let Some(admin) = t.admin("integration key liveness") {
        let check = admin.key_check(key).await.expect("key check");
        assert!(check.live);
        assert_eq!(check.integration_id, Some(integration.id));
        assert_eq!(check.team_id, Some(team.id));
        // The webhook accepts a payload with the key, and refuses another key (assumption).
        let http = reqwest::Client::new();
        let ok = http
            .post(url)
            .bearer_auth(key)
            .body(r#"{"alerts":[]}"#)
            .send()
            .await
            .expect("ingest");
        assert_eq!(ok.status().as_u16(), 202);
        let refused = http
            .post(url)
            .header("X-Terdut-Key", "tdik_wrong")
            .send()
            .await
            .expect("ingest");
        assert_eq!(refused.status().as_u16(), 401);
    }

    assert_eq!(
        t.client.delete_integration(team.id, integration.id).await,
        Ok(Deletion::Deleted)
    );
    assert_eq!(
        t.client.get_integration(team.id, integration.id).await,
        Err(ApiError::NotFound)
    );
    assert_eq!(
        t.client.delete_integration(team.id, integration.id).await,
        Ok(Deletion::AlreadyGone)
    );
    assert_eq!(
        t.client
            .rename_integration(team.id, integration.id, &patch("x"))
            .await,
        Err(ApiError::NotFound)
    );
    if let Some(admin) = t.admin("integration key dies with it") {
        assert!(!admin.key_check(key).await.expect("key check").live);
    }

    // A recreate is a new integration with a new key (docs/design.md §5: a kind change rotates it).
    let IntegrationCreate::Created(again) = t
        .client
        .create_integration(team.id, &new)
        .await
        .expect("recreate")
    else {
        panic!("recreate after delete must be 201");
    };
    assert_ne!(again.integration.id, integration.id);
    assert_ne!(again.key.expose(), key);
    cleanup(&t, &team).await;
    t.stop().await;
}

#[tokio::test]
async fn deleting_a_team_takes_its_ladder_switches_and_integrations() {
    let t = Target::new().await;
    let team = fresh_team(&t).await;
    t.client
        .put_escalation(team.id, &oncall_ladder())
        .await
        .expect("ladder");
    let sw = t
        .client
        .create_switch(team.id, &switch("watchdog", 900))
        .await
        .expect("switch");
    let IntegrationCreate::Created(created) = t
        .client
        .create_integration(
            team.id,
            &new_integration(IntegrationKind::Grafana, &unique("g")),
        )
        .await
        .expect("integration")
    else {
        panic!("201 expected");
    };
    let iid = created.integration.id;
    assert_eq!(t.client.delete_team(team.id).await, Ok(Deletion::Deleted));
    assert_eq!(t.client.get_escalation(team.id).await, Ok(None));
    assert_eq!(
        t.client.delete_switch(team.id, sw.id).await,
        Ok(Deletion::AlreadyGone)
    );
    assert_eq!(
        t.client.get_integration(team.id, iid).await,
        Err(ApiError::NotFound)
    );
    if let Some(admin) = t.admin("children gone") {
        let state = admin.state().await.expect("state");
        assert!(state.team(team.id).is_none());
        assert!(!admin.key_check(created.key.expose()).await.unwrap().live);
    }
    t.stop().await;
}

// ---- faults --------------------------------------------------------------------------------

#[tokio::test]
async fn a_500_then_200_is_transient_then_succeeds() {
    let t = Target::new().await;
    let Some(admin) = t.admin("a_500_then_200_is_transient_then_succeeds") else {
        return;
    };
    let mut registry = Registry::default();
    let metrics = ApiMetrics::register(&mut registry);
    let client = t.client_with(|c| c.metrics(metrics.clone()));
    admin
        .add_fault(&FaultRule::new("GET /api/v1/whoami").fail_next(1, 500))
        .await
        .expect("fault");

    let err = client.whoami().await.unwrap_err();
    assert!(
        matches!(
            err,
            ApiError::Transient {
                cause: TransientCause::Status(500),
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.is_retryable());
    assert_eq!(err.category(), "transient");
    client.whoami().await.expect("the retry succeeds");

    assert_eq!(metrics.count("GET /api/v1/whoami", "transient"), 1);
    assert_eq!(metrics.count("GET /api/v1/whoami", "ok"), 1);
    let mut text = String::new();
    encode(&mut text, &registry).expect("encode");
    assert!(text.contains(
        r#"terdut_api_requests_total{endpoint="GET /api/v1/whoami",outcome="transient"} 1"#
    ));
    t.stop().await;
}

#[tokio::test]
async fn server_errors_and_rate_limits_are_transient_other_statuses_unexpected() {
    let t = Target::new().await;
    let Some(admin) = t.admin("server_errors_and_rate_limits_are_transient") else {
        return;
    };
    for status in [500u16, 502, 503, 504, 429] {
        admin
            .add_fault(&FaultRule::new("POST /api/v1/teams").fail_next(1, status))
            .await
            .expect("fault");
        let err = t.client.create_team("x", "contract/x").await.unwrap_err();
        assert_eq!(
            err,
            ApiError::Transient {
                cause: TransientCause::Status(status),
                detail: "fault injected by the stand-in admin surface".into()
            }
        );
    }
    admin
        .add_fault(&FaultRule::new("*").fail_next(1, 418))
        .await
        .expect("fault");
    let err = t.client.get_team(1).await.unwrap_err();
    assert_eq!(
        err,
        ApiError::Unexpected {
            status: 418,
            code: Some("injected_fault".into())
        }
    );
    assert!(!err.is_retryable());
    let state = admin.state().await.expect("state");
    assert!(state.teams.is_empty(), "faulted calls changed nothing");
    t.stop().await;
}

#[tokio::test]
async fn latency_beyond_the_request_timeout_is_transient() {
    let t = Target::new().await;
    let Some(admin) = t.admin("latency_beyond_the_request_timeout_is_transient") else {
        return;
    };
    admin
        .add_fault(&FaultRule::new("GET /api/v1/whoami").latency_ms(400))
        .await
        .expect("fault");
    let impatient = t.client_with(|c| c.request_timeout(Duration::from_millis(100)));
    let err = impatient.whoami().await.unwrap_err();
    assert!(
        matches!(
            err,
            ApiError::Transient {
                cause: TransientCause::Timeout,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.is_retryable());
    // A patient client gets through the same delay.
    t.client.whoami().await.expect("patient client");
    t.stop().await;
}

#[tokio::test]
async fn a_reset_connection_is_transient() {
    let t = Target::new().await;
    let Some(admin) = t.admin("a_reset_connection_is_transient") else {
        return;
    };
    admin
        .add_fault(&FaultRule::new("* /api/v1/teams*").reset_next(1))
        .await
        .expect("fault");
    let err = t.client.create_team("x", "contract/x").await.unwrap_err();
    assert!(
        matches!(
            err,
            ApiError::Transient {
                cause: TransientCause::Connection,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.is_retryable());
    t.client
        .create_team("x", "contract/x")
        .await
        .expect("next call gets through");
    t.stop().await;
}

#[tokio::test]
async fn a_hundred_mib_answer_is_refused_at_the_limit() {
    let t = Target::new().await;
    let Some(admin) = t.admin("a_hundred_mib_answer_is_refused_at_the_limit") else {
        return;
    };
    let team = fresh_team(&t).await;
    admin
        .add_fault(&FaultRule::new("GET /api/v1/teams/{id}").oversize_bytes(100 << 20))
        .await
        .expect("fault");
    let err = t.client.get_team(team.id).await.unwrap_err();
    assert_eq!(
        err,
        ApiError::TooLarge {
            limit: terdut_actors::api::MAX_RESPONSE_BYTES
        }
    );
    assert_eq!(err.category(), "too_large");
    assert!(err.to_string().contains("exceeded 1048576 bytes"), "{err}");
    // Only that endpoint answers that way: the client is not poisoned for the others.
    admin.clear_faults().await.expect("faults cleared");
    assert_eq!(t.client.get_team(team.id).await.unwrap().id, team.id);
    cleanup(&t, &team).await;
    t.stop().await;
}

#[tokio::test]
async fn a_refused_connection_is_transient() {
    let t = Target::new().await;
    // A port nothing listens on: bind one, then free it.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port");
    let client = terdut_actors::api::TerdutClient::new(terdut_actors::api::ClientConfig::new(
        format!("http://{free}"),
        t.key.clone(),
    ))
    .expect("client");
    let err = client.whoami().await.unwrap_err();
    assert!(
        matches!(
            err,
            ApiError::Transient {
                cause: TransientCause::Connect,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.is_retryable());
    t.stop().await;
}

// ---- labels --------------------------------------------------------------------------------

#[tokio::test]
async fn client_and_standin_count_calls_under_the_same_route_templates() {
    let t = Target::new().await;
    let Some(admin) = t.admin("client_and_standin_count_calls_under_the_same_route_templates")
    else {
        return;
    };
    let metrics = ApiMetrics::default();
    let client = t.client_with(|c| c.metrics(metrics.clone()));
    admin.seed_users(["alice"]).await.expect("seed");
    let team = client
        .create_team("labels", "contract/labels")
        .await
        .expect("create")
        .into_team();
    let id = team.id;
    let _ = client.healthz().await;
    let _ = client.readyz().await;
    let _ = client.whoami().await;
    let _ = client.get_team(id).await;
    let _ = client.rename_team(id, "labels2").await;
    let _ = client.set_oidc_groups(id, &OidcGroups::default()).await;
    let _ = client.get_escalation(id).await;
    let _ = client.put_escalation(id, &oncall_ladder()).await;
    let _ = client.delete_escalation(id).await;
    let _ = client.list_switches(id).await;
    let sw = client
        .create_switch(id, &switch("s", 60))
        .await
        .expect("sw");
    let _ = client.update_switch(id, sw.id, &switch("s", 61)).await;
    let _ = client.delete_switch(id, sw.id).await;
    let created = client
        .create_integration(id, &new_integration(IntegrationKind::Generic, "g"))
        .await
        .expect("integration");
    let iid = created.integration().id;
    let _ = client.get_integration(id, iid).await;
    let _ = client.rename_integration(id, iid, &patch("g2")).await;
    let _ = client.delete_integration(id, iid).await;
    let _ = client.delete_team(id).await;

    let calls = admin.calls().await.expect("calls");
    for endpoint in Endpoint::ALL {
        assert_eq!(
            calls.get(endpoint.template()),
            1,
            "stand-in count for {}",
            endpoint.template()
        );
        assert_eq!(
            metrics.count(endpoint.template(), "ok"),
            1,
            "client count for {}",
            endpoint.template()
        );
    }
    t.stop().await;
}

// ---- secrets -------------------------------------------------------------------------------

#[tokio::test]
async fn no_secret_appears_in_any_debug_or_display_output() {
    let t = Target::new().await;
    let team = fresh_team(&t).await;
    let result = t
        .client
        .create_integration(
            team.id,
            &new_integration(IntegrationKind::Generic, &unique("secret")),
        )
        .await
        .expect("create");
    let IntegrationCreate::Created(created) = &result else {
        panic!("201 expected");
    };
    let operator_key = t.key.expose().to_owned();
    let integration_key = created.key.expose().to_owned();
    let url = created.url.expose().to_owned();
    let token = url.rsplit('/').next().unwrap_or_default().to_owned();
    assert!(!token.is_empty());

    // Errors the client produced against this server, plus every variant constructed.
    let mut errors: Vec<ApiError> = vec![
        t.client.get_team(i64::MAX).await.unwrap_err(),
        t.client.create_team("", "contract/x").await.unwrap_err(),
        t.client
            .create_team(&team.name, &format!("contract/{}", unique("y")))
            .await
            .unwrap_err(),
        t.client_with_key(OperatorKey::new("tdsa_wrong"))
            .whoami()
            .await
            .unwrap_err(),
        terdut_actors::api::TerdutClient::new(terdut_actors::api::ClientConfig::new(
            "http://127.0.0.1:1",
            t.key.clone(),
        ))
        .expect("client")
        .whoami()
        .await
        .unwrap_err(),
        ApiError::OpenIncidents,
        ApiError::SwitchNameTaken,
        ApiError::UnknownUser {
            username: "alice".into(),
        },
        ApiError::Decode {
            detail: "Syntax error at line 1 column 2".into(),
        },
        ApiError::Config {
            message: "x".into(),
        },
        ApiError::Unexpected {
            status: 418,
            code: Some("teapot".into()),
        },
    ];
    if let Some(admin) = t.admin("secrets in transport errors") {
        admin
            .add_fault(&FaultRule::new("GET /api/v1/whoami").reset_next(1))
            .await
            .expect("fault");
        errors.push(t.client.whoami().await.unwrap_err());
        admin
            .add_fault(&FaultRule::new("GET /api/v1/whoami").fail_next(1, 503))
            .await
            .expect("fault");
        errors.push(t.client.whoami().await.unwrap_err());
    }
    let mut outputs = vec![
        format!("{:?}", t.client),
        format!("{:#?}", t.client),
        format!("{:?}", t.key),
        format!("{}", t.key),
        format!("{result:?}"),
        format!("{result:#?}"),
        format!("{created:?}"),
        format!("{}", created.key),
        format!("{}", created.url),
        format!(
            "{:?}",
            terdut_actors::api::ClientConfig::new(t.base_url.clone(), t.key.clone())
        ),
    ];
    for e in &errors {
        outputs.push(format!("{e:?}"));
        outputs.push(format!("{e}"));
    }
    for out in outputs {
        for secret in [&operator_key, &integration_key, &url, &token] {
            assert!(
                !out.contains(secret.as_str()),
                "secret leaked into output: {out}"
            );
        }
    }
    cleanup(&t, &team).await;
    t.stop().await;
}
