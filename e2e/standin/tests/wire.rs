//! The stand-in on the wire: response shapes and statuses that the typed client hides (the
//! contract's error body for axum's own rejections, 401 everywhere, the admin surface being
//! off by default and token-guarded, ingest).

mod common;

use common::{Api, code};
use reqwest::Method;
use serde_json::json;
use terdut_standin::{Config, spawn};

#[tokio::test]
async fn every_api_route_needs_the_operator_key() {
    let s = spawn(Config::for_tests()).await.unwrap();
    let api = Api::new(&s);
    let routes = [
        (Method::GET, "/api/v1/whoami"),
        (Method::POST, "/api/v1/teams"),
        (Method::GET, "/api/v1/teams/1"),
        (Method::DELETE, "/api/v1/teams/1"),
        (Method::PUT, "/api/v1/teams/1/name"),
        (Method::PUT, "/api/v1/teams/1/oidc-groups"),
        (Method::GET, "/api/v1/teams/1/escalation"),
        (Method::PUT, "/api/v1/teams/1/escalation"),
        (Method::DELETE, "/api/v1/teams/1/escalation"),
        (Method::GET, "/api/v1/teams/1/deadman-switches"),
        (Method::POST, "/api/v1/teams/1/deadman-switches"),
        (Method::PUT, "/api/v1/teams/1/deadman-switches/2"),
        (Method::DELETE, "/api/v1/teams/1/deadman-switches/2"),
        (Method::POST, "/api/v1/teams/1/integrations"),
        (Method::GET, "/api/v1/teams/1/integrations/2"),
        (Method::PATCH, "/api/v1/teams/1/integrations/2"),
        (Method::DELETE, "/api/v1/teams/1/integrations/2"),
    ];
    let wrong = terdut_standin::generate_operator_key();
    for (method, path) in routes {
        for key in [None, Some(wrong.as_str()), Some("")] {
            let (status, body) = api
                .call_with(method.clone(), path, Some(json!({})), key)
                .await;
            assert_eq!(status, 401, "{method} {path} with {key:?}");
            assert_eq!(code(&body), "unauthorized");
        }
    }
    assert!(
        !format!("{s:?}").contains(s.operator_key()),
        "the handle's Debug hides the key"
    );
    for probe in ["/healthz", "/readyz"] {
        assert_eq!(api.call_with(Method::GET, probe, None, None).await.0, 200);
    }
    s.shutdown().await;
}

#[tokio::test]
async fn malformed_requests_get_the_contract_error_shape() {
    let s = spawn(Config::for_tests()).await.unwrap();
    let api = Api::new(&s);
    let json_ct = Some("application/json");
    for (ct, body) in [
        (json_ct, "{not json"),
        (json_ct, r#"{"name": 5, "external_id": "x"}"#),
        (json_ct, r#"{"name": "only a name"}"#),
        (None, r#"{"name": "A", "external_id": "ns/a"}"#),
        (
            Some("text/plain"),
            r#"{"name": "A", "external_id": "ns/a"}"#,
        ),
    ] {
        let (status, body) = api.raw(Method::POST, "/api/v1/teams", ct, body).await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(code(&body), "invalid");
        assert!(!body["message"].as_str().unwrap_or("").is_empty());
    }
    let (status, body) = api.call(Method::GET, "/api/v1/teams/abc", None).await;
    assert_eq!((status, code(&body)), (404, "not_found"));
    let (status, body) = api.call(Method::GET, "/api/v1/nope", None).await;
    assert_eq!((status, code(&body)), (404, "not_found"));
    let (status, body) = api.call(Method::PATCH, "/api/v1/teams", None).await;
    assert_eq!((status, code(&body)), (405, "method_not_allowed"));
    let (status, body) = api
        .call(
            Method::POST,
            "/api/v1/teams/1/integrations",
            Some(json!({"kind": "pagerduty", "name": "x", "external_id": "x"})),
        )
        .await;
    assert_eq!((status, code(&body)), (422, "invalid"), "unknown kind");
    s.shutdown().await;
}

#[tokio::test]
async fn bodies_match_the_contract_examples() {
    let s = spawn(Config::for_tests()).await.unwrap();
    let api = Api::new(&s);
    let (status, team) = api
        .call(
            Method::POST,
            "/api/v1/teams",
            Some(json!({"name": "Platform", "external_id": "team-ns/platform"})),
        )
        .await;
    assert_eq!(status, 201);
    let id = team["id"].as_i64().unwrap();
    assert_eq!(
        team,
        json!({"id": id, "name": "Platform", "external_id": "team-ns/platform",
            "oidc": {"member_group": null, "owner_group": null}})
    );
    let ladder = json!({"repeat_count": 2, "fallback_topic": null, "levels": [
        {"timeout_seconds": 300, "targets": [{"kind": "oncall"}]}]});
    let (status, got) = api
        .call(
            Method::PUT,
            &format!("/api/v1/teams/{id}/escalation"),
            Some(ladder.clone()),
        )
        .await;
    assert_eq!((status, got), (200, ladder));
    let (status, body) = api
        .call(
            Method::PUT,
            &format!("/api/v1/teams/{id}/escalation"),
            Some(json!({"repeat_count": 0, "levels": [{"timeout_seconds": 60,
                "targets": [{"kind": "user", "username": "alice"}]}]})),
        )
        .await;
    assert_eq!(status, 422);
    assert_eq!(
        body,
        json!({"error": "unknown_user", "message": "unknown user \"alice\"", "username": "alice"})
    );
    let (status, created) = api
        .call(
            Method::POST,
            &format!("/api/v1/teams/{id}/integrations"),
            Some(json!({"kind": "alertmanager", "name": "prod-alertmanager",
                "external_id": "team-ns/prod-alertmanager"})),
        )
        .await;
    assert_eq!(status, 201);
    let obj = created.as_object().unwrap();
    let mut keys: Vec<_> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["external_id", "id", "key", "kind", "name", "url"]);
    let (status, again) = api
        .call(
            Method::POST,
            &format!("/api/v1/teams/{id}/integrations"),
            Some(json!({"kind": "alertmanager", "name": "other",
                "external_id": "team-ns/prod-alertmanager"})),
        )
        .await;
    assert_eq!(status, 200);
    assert!(again.get("key").is_none() && again.get("url").is_none());
    assert_eq!(again["name"], "prod-alertmanager", "name untouched");
    s.shutdown().await;
}

#[tokio::test]
async fn ingest_accepts_only_the_integration_key() {
    let s = spawn(Config::for_tests()).await.unwrap();
    let api = Api::new(&s);
    let (_, team) = api
        .call(
            Method::POST,
            "/api/v1/teams",
            Some(json!({"name": "T", "external_id": "ns/t"})),
        )
        .await;
    let id = team["id"].as_i64().unwrap();
    let (_, created) = api
        .call(
            Method::POST,
            &format!("/api/v1/teams/{id}/integrations"),
            Some(json!({"kind": "grafana", "name": "g", "external_id": "ns/g"})),
        )
        .await;
    let url = created["url"].as_str().unwrap().to_owned();
    let key = created["key"].as_str().unwrap().to_owned();
    assert!(url.starts_with(&format!("{}/api/v1/ingest/grafana/", s.base_url())));
    let bearer = format!("Bearer {key}");
    assert_eq!(api.post_url(&url, &[("authorization", &bearer)]).await, 202);
    assert_eq!(api.post_url(&url, &[("x-terdut-key", &key)]).await, 202);
    assert_eq!(api.post_url(&url, &[]).await, 401);
    let operator = format!("Bearer {}", s.operator_key());
    assert_eq!(
        api.post_url(&url, &[("authorization", &operator)]).await,
        401,
        "the operator key is not a webhook key"
    );
    let wrong_kind = url.replace("/grafana/", "/generic/");
    assert_eq!(
        api.post_url(&wrong_kind, &[("x-terdut-key", &key)]).await,
        404
    );
    let state = s.admin().state().await.unwrap();
    assert_eq!(state.teams[0].integrations[0].ingested, 2);
    s.shutdown().await;
}

#[tokio::test]
async fn the_admin_surface_is_off_by_default_and_can_require_a_token() {
    let off = Config {
        admin: false,
        ..Config::for_tests()
    };
    let s = spawn(off).await.unwrap();
    let err = s.admin().state().await.unwrap_err();
    assert!(
        matches!(err, terdut_standin::AdminError::Status { status: 404, .. }),
        "{err}"
    );
    s.shutdown().await;

    let guarded = Config {
        admin_token: Some("sesame".into()),
        ..Config::for_tests()
    };
    let s = spawn(guarded).await.unwrap();
    s.admin()
        .state()
        .await
        .expect("the handle's client has the token");
    let anonymous = terdut_standin::AdminClient::new(s.base_url(), None);
    assert!(matches!(
        anonymous.state().await,
        Err(terdut_standin::AdminError::Status { status: 401, .. })
    ));
    s.shutdown().await;
}

#[tokio::test]
async fn faults_are_listed_removed_and_never_touch_admin_calls() {
    let s = spawn(Config::for_tests()).await.unwrap();
    let api = Api::new(&s);
    let admin = s.admin();
    let id = admin
        .add_fault(&terdut_standin::FaultRule::new("*").error_rate(1.0, 503))
        .await
        .unwrap();
    assert_eq!(admin.faults().await.unwrap().len(), 1);
    assert_eq!(api.call(Method::GET, "/healthz", None).await.0, 503);
    assert_eq!(api.call(Method::GET, "/api/v1/whoami", None).await.0, 503);
    admin.remove_fault(id).await.unwrap();
    assert_eq!(api.call(Method::GET, "/api/v1/whoami", None).await.0, 200);
    let calls = admin.calls().await.unwrap();
    assert_eq!(calls.get("GET /api/v1/whoami"), 2);
    assert_eq!(calls.get("GET /healthz"), 1);
    assert_eq!(calls.writes(), 0);
    admin.reset_calls().await.unwrap();
    assert_eq!(admin.calls().await.unwrap().total(), 0);
    assert!(
        admin
            .add_fault(&terdut_standin::FaultRule::new("*").error_rate(2.0, 500))
            .await
            .is_err()
    );
    s.shutdown().await;
}
