//! The CRDs against a real kube-apiserver: every CEL rule rejects a bad object with a message
//! that says what to fix, valid objects pass, defaults are materialised, and every example in
//! docs/examples applies with `kubectl apply --dry-run=server --validate=strict`.

use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Resource};
use serde_json::{Value, json};
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutServer, TerdutTeam};
use terdut_testenv::ControlPlane;

async fn setup(prefix: &str) -> (Client, String) {
    let cp = ControlPlane::shared().await.expect("control plane");
    let client = cp.client().await.expect("client");
    let ns = cp.namespace(&client, prefix).await.expect("namespace");
    (client, ns)
}

fn api_for<K: Resource<DynamicType = ()>>(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(&K::group(&()), &K::version(&()), &K::kind(&()));
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk(&gvk))
}

fn obj<K: Resource<DynamicType = ()>>(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap()
}

/// Creates for real (so transition rules can be tested) and returns the stored object.
async fn create(api: &Api<DynamicObject>, o: &DynamicObject) -> Result<DynamicObject, String> {
    api.create(&PostParams::default(), o)
        .await
        .map_err(|e| e.to_string())
}

/// Replaces `o` (named `o.metadata.name`): the stored object, or the apiserver's refusal.
async fn replace(api: &Api<DynamicObject>, o: &DynamicObject) -> Result<DynamicObject, String> {
    let name = o.metadata.name.as_deref().unwrap_or_default();
    api.replace(name, &PostParams::default(), o)
        .await
        .map_err(|e| e.to_string())
}

async fn dry_run(api: &Api<DynamicObject>, o: &DynamicObject) -> Result<DynamicObject, String> {
    let pp = PostParams {
        dry_run: true,
        ..Default::default()
    };
    api.create(&pp, o).await.map_err(|e| e.to_string())
}

async fn assert_rejected(api: &Api<DynamicObject>, o: &DynamicObject, needle: &str) {
    match dry_run(api, o).await {
        Ok(_) => panic!("expected rejection containing {needle:?}, but it was accepted"),
        Err(e) => assert!(
            e.contains(needle),
            "rejection {e:?} does not mention {needle:?}"
        ),
    }
}

fn server_spec() -> Value {
    json!({
        "image": {"tag": "v0.9.3"},
        "networking": {"hostname": "terdut.example.com"},
        "database": {"dsn": "postgres://terdut@db:5432/terdut"},
    })
}

fn with(mut base: Value, path: &[&str], v: Value) -> Value {
    let mut cur = &mut base;
    for p in &path[..path.len() - 1] {
        cur = cur.as_object_mut().unwrap().entry(*p).or_insert(json!({}));
    }
    cur.as_object_mut()
        .unwrap()
        .insert(path[path.len() - 1].to_owned(), v);
    base
}

fn team_spec() -> Value {
    json!({"serverRef": {"name": "terdut"}, "displayName": "Platform"})
}

#[tokio::test]
async fn server_defaults_are_materialised() {
    let (client, ns) = setup("defaults").await;
    let api = api_for::<TerdutServer>(&client, &ns);
    let got = dry_run(&api, &obj::<TerdutServer>("s", server_spec()))
        .await
        .unwrap();
    let spec = &got.data["spec"];
    assert_eq!(spec["replicas"], 2);
    assert_eq!(
        spec["image"]["repository"],
        "git.ryuvia.com/niklas/terdut-server"
    );
    assert_eq!(spec["image"]["pullPolicy"], "IfNotPresent");
    assert_eq!(spec["networking"]["servicePort"], 8080);
    assert_eq!(spec["sweeper"]["staleAfter"], "6h");
    assert_eq!(spec["sweeper"]["archiveAfter"], "168h");
    assert_eq!(spec["notify"]["repeatEvery"], "15m");
    assert_eq!(spec["oidc"]["enabled"], false);
    assert_eq!(spec["oidc"]["name"], "SSO");
    assert_eq!(spec["oidc"]["scopes"], "openid profile email");
    assert_eq!(spec["oidc"]["usernameClaim"], "preferred_username");
    assert_eq!(spec["oidc"]["sessionMaxAge"], "12h");
    assert_eq!(spec["passwordLogin"], true);
    assert_eq!(spec["allowedTeams"]["namespaces"]["from"], "None");
    // The stored object deserialises into the typed API.
    let typed: TerdutServer = serde_json::from_value(serde_json::to_value(&got).unwrap()).unwrap();
    assert_eq!(typed.spec.replicas, 2);
}

#[tokio::test]
async fn zalando_ref_defaults_user_and_database() {
    let (client, ns) = setup("zdefaults").await;
    let api = api_for::<TerdutServer>(&client, &ns);
    let spec = with(
        server_spec(),
        &["database"],
        json!({"postgresClusterRef": {"name": "pg"}}),
    );
    let got = dry_run(&api, &obj::<TerdutServer>("s", spec))
        .await
        .unwrap();
    assert_eq!(
        got.data["spec"]["database"]["postgresClusterRef"]["user"],
        "terdut"
    );
    assert_eq!(
        got.data["spec"]["database"]["postgresClusterRef"]["database"],
        "terdut"
    );
}

#[tokio::test]
async fn database_needs_exactly_one_source() {
    let (client, ns) = setup("db").await;
    let api = api_for::<TerdutServer>(&client, &ns);
    let msg = "set exactly one of database.dsn";
    let both = with(
        server_spec(),
        &["database"],
        json!({"dsn": "postgres://x@y/z", "postgresClusterRef": {"name": "pg"}}),
    );
    assert_rejected(&api, &obj::<TerdutServer>("both", both), msg).await;
    let neither = with(server_spec(), &["database"], json!({}));
    assert_rejected(&api, &obj::<TerdutServer>("neither", neither), msg).await;
    // An explicit null is pruned like an absent field, so it cannot satisfy the rule.
    let null_dsn = with(
        server_spec(),
        &["database"],
        json!({"dsn": null, "postgresClusterRef": null}),
    );
    assert_rejected(&api, &obj::<TerdutServer>("nulls", null_dsn), msg).await;
    let zalando = with(
        server_spec(),
        &["database"],
        json!({"postgresClusterRef": {"name": "pg"}}),
    );
    dry_run(&api, &obj::<TerdutServer>("zalando", zalando))
        .await
        .unwrap();
    // CloudNativePG is the third way, and excludes the other two as they exclude each other.
    let cnpg = with(
        server_spec(),
        &["database"],
        json!({"cnpgClusterRef": {"name": "pg"}}),
    );
    dry_run(&api, &obj::<TerdutServer>("cnpg", cnpg))
        .await
        .unwrap();
    for (name, database) in [
        (
            "dsn-cnpg",
            json!({"dsn": "postgres://x@y/z", "cnpgClusterRef": {"name": "pg"}}),
        ),
        (
            "zalando-cnpg",
            json!({"postgresClusterRef": {"name": "pg"}, "cnpgClusterRef": {"name": "pg"}}),
        ),
        (
            "all-three",
            json!({"dsn": "postgres://x@y/z", "postgresClusterRef": {"name": "pg"},
                   "cnpgClusterRef": {"name": "pg"}}),
        ),
    ] {
        let spec = with(server_spec(), &["database"], database);
        let o = obj::<TerdutServer>(name, spec);
        assert_rejected(&api, &o, msg).await;
        assert_rejected(
            &api,
            &o,
            "database.cnpgClusterRef (a CloudNativePG Cluster)",
        )
        .await;
    }
    // `<name>-rw` must still be a Service name.
    let long = with(
        server_spec(),
        &["database"],
        json!({"cnpgClusterRef": {"name": "p".repeat(61)}}),
    );
    assert_rejected(
        &api,
        &obj::<TerdutServer>("long", long),
        "cnpgClusterRef.name",
    )
    .await;
}

#[tokio::test]
async fn password_secret_only_with_dsn() {
    let (client, ns) = setup("pw").await;
    let api = api_for::<TerdutServer>(&client, &ns);
    let bad = with(
        server_spec(),
        &["database"],
        json!({"postgresClusterRef": {"name": "pg"}, "passwordSecretRef": {"name": "s", "key": "password"}}),
    );
    assert_rejected(
        &api,
        &obj::<TerdutServer>("pw", bad),
        "database.passwordSecretRef goes with database.dsn",
    )
    .await;
    let bad = with(
        server_spec(),
        &["database"],
        json!({"cnpgClusterRef": {"name": "pg"}, "passwordSecretRef": {"name": "s", "key": "password"}}),
    );
    assert_rejected(
        &api,
        &obj::<TerdutServer>("pw-cnpg", bad),
        "database.passwordSecretRef goes with database.dsn",
    )
    .await;
    let good = with(
        server_spec(),
        &["database"],
        json!({"dsn": "postgres://x@y/z", "passwordSecretRef": {"name": "s", "key": "password"}}),
    );
    dry_run(&api, &obj::<TerdutServer>("pw-ok", good))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_dsn_carrying_a_password_is_refused_with_where_to_put_it() {
    let (client, ns) = setup("dsnpw").await;
    let api = api_for::<TerdutServer>(&client, &ns);
    let msg = "database.dsn must not carry a password";
    for (i, dsn) in [
        "postgres://terdut:hunter2@db:5432/terdut?sslmode=require",
        "postgresql://u:p@db/terdut",
        "postgres://terdut@db:5432/terdut?sslmode=require&password=hunter2",
        "host=db user=terdut password=hunter2 dbname=terdut",
        "password = hunter2 host=db",
    ]
    .iter()
    .enumerate()
    {
        let bad = with(server_spec(), &["database"], json!({"dsn": dsn}));
        assert_rejected(&api, &obj::<TerdutServer>(&format!("pw{i}"), bad), msg).await;
    }
    for (i, dsn) in [
        "postgres://terdut@db:5432/terdut?sslmode=require",
        "postgres://db.example:5432/terdut",
        "host=db user=terdut dbname=terdut sslmode=require",
        "postgres://terdut@[::1]:5432/terdut",
    ]
    .iter()
    .enumerate()
    {
        let good = with(server_spec(), &["database"], json!({"dsn": dsn}));
        dry_run(&api, &obj::<TerdutServer>(&format!("ok{i}"), good))
            .await
            .unwrap_or_else(|e| panic!("{dsn}: {e}"));
    }
}

#[tokio::test]
async fn disruption_budget_takes_one_bound() {
    let (client, ns) = setup("pdb").await;
    let api = api_for::<TerdutServer>(&client, &ns);
    let msg = "set exactly one of disruptionBudget.minAvailable or disruptionBudget.maxUnavailable";
    let both = with(
        server_spec(),
        &["pod", "disruptionBudget"],
        json!({"minAvailable": 1, "maxUnavailable": "50%"}),
    );
    assert_rejected(&api, &obj::<TerdutServer>("both", both), msg).await;
    let none = with(server_spec(), &["pod", "disruptionBudget"], json!({}));
    assert_rejected(&api, &obj::<TerdutServer>("none", none), msg).await;
    let pct = with(
        server_spec(),
        &["pod", "disruptionBudget"],
        json!({"maxUnavailable": "50%"}),
    );
    dry_run(&api, &obj::<TerdutServer>("pct", pct))
        .await
        .unwrap();
}

#[tokio::test]
async fn selector_iff_from_selector() {
    let (client, ns) = setup("consent").await;
    let api = api_for::<TerdutServer>(&client, &ns);
    let msg = "allowedTeams.namespaces.selector is required when from is Selector";
    let missing = with(
        server_spec(),
        &["allowedTeams", "namespaces"],
        json!({"from": "Selector"}),
    );
    assert_rejected(&api, &obj::<TerdutServer>("missing", missing), msg).await;
    let stray = with(
        server_spec(),
        &["allowedTeams", "namespaces"],
        json!({"from": "All", "selector": {"matchLabels": {"a": "b"}}}),
    );
    assert_rejected(&api, &obj::<TerdutServer>("stray", stray), msg).await;
    let bad_enum = with(
        server_spec(),
        &["allowedTeams", "namespaces"],
        json!({"from": "Everyone"}),
    );
    assert_rejected(
        &api,
        &obj::<TerdutServer>("enum", bad_enum),
        "supported values: \"None\", \"Same\", \"All\", \"Selector\"",
    )
    .await;
    for from in ["None", "Same", "All"] {
        let ok = with(
            server_spec(),
            &["allowedTeams", "namespaces"],
            json!({"from": from}),
        );
        dry_run(&api, &obj::<TerdutServer>(&from.to_lowercase(), ok))
            .await
            .unwrap();
    }
    let sel = with(
        server_spec(),
        &["allowedTeams", "namespaces"],
        json!({"from": "Selector", "selector": {"matchLabels": {"a": "b"}}}),
    );
    dry_run(&api, &obj::<TerdutServer>("sel", sel))
        .await
        .unwrap();
}

#[tokio::test]
async fn server_owner_policies_are_checked_at_admission() {
    let (client, ns) = setup("policy").await;
    let api = api_for::<TerdutServer>(&client, &ns);
    let with_policies = |policies: Value| {
        with(
            server_spec(),
            &["allowedTeams"],
            json!({"namespaces": {"from": "All"}, "policies": policies}),
        )
    };
    let full = with_policies(json!([{
        "name": "payments",
        "namespaces": {"names": ["team-payments"]},
        "maxTeams": 5,
        "allowed": {
            "displayNames": ["Payments*"],
            "users": ["pay-*"],
            "fallbackTopics": ["payments-*"],
            "oidcGroups": ["terdut-payments-*"],
            "deletionPolicies": ["Delete"],
        },
    }, {"name": "rest", "namespaces": {"selector": {}}, "maxTeams": 1}]));
    let stored = dry_run(&api, &obj::<TerdutServer>("full", full))
        .await
        .unwrap();
    assert_eq!(
        stored.data["spec"]["allowedTeams"]["policies"][1]["allowed"],
        json!({}),
        "absent lists allow anything"
    );
    let msg = "a policy's namespaces need exactly one of names and selector";
    for (name, namespaces) in [
        ("both", json!({"names": ["a"], "selector": {}})),
        ("neither", json!({})),
        ("empty-names", json!({"names": []})),
    ] {
        let bad = with_policies(json!([{"name": "p", "namespaces": namespaces}]));
        assert_rejected(&api, &obj::<TerdutServer>(name, bad), msg).await;
    }
    let duplicate = with_policies(json!([
        {"name": "p", "namespaces": {"names": ["a"]}},
        {"name": "p", "namespaces": {"names": ["b"]}},
    ]));
    assert_rejected(
        &api,
        &obj::<TerdutServer>("dup", duplicate),
        "Duplicate value",
    )
    .await;
    let negative =
        with_policies(json!([{"name": "p", "namespaces": {"names": ["a"]}, "maxTeams": -1}]));
    assert_rejected(&api, &obj::<TerdutServer>("neg", negative), "maxTeams").await;
    let bad_name = with_policies(json!([{"name": "Not A Label", "namespaces": {"names": ["a"]}}]));
    assert_rejected(&api, &obj::<TerdutServer>("badname", bad_name), "name").await;
    let bad_policy = with_policies(json!([{"name": "p", "namespaces": {"names": ["a"]},
        "allowed": {"deletionPolicies": ["Keep"]}}]));
    assert_rejected(
        &api,
        &obj::<TerdutServer>("badpolicy", bad_policy),
        "supported values: \"Delete\", \"Orphan\"",
    )
    .await;
    let empty_pattern = with_policies(json!([{"name": "p", "namespaces": {"names": ["a"]},
        "allowed": {"users": [""]}}]));
    assert_rejected(
        &api,
        &obj::<TerdutServer>("emptypat", empty_pattern),
        "users",
    )
    .await;
}

#[tokio::test]
async fn oidc_enabled_needs_its_settings() {
    let (client, ns) = setup("oidc").await;
    let api = api_for::<TerdutServer>(&client, &ns);
    let bad = with(
        server_spec(),
        &["oidc"],
        json!({"enabled": true, "issuer": "https://idp"}),
    );
    assert_rejected(
        &api,
        &obj::<TerdutServer>("oidc", bad),
        "oidc.enabled needs oidc.issuer, oidc.clientID and oidc.clientSecretRef",
    )
    .await;
    let good = with(
        server_spec(),
        &["oidc"],
        json!({"enabled": true, "issuer": "https://idp", "clientID": "terdut",
               "clientSecretRef": {"name": "oidc", "key": "client-secret"}}),
    );
    dry_run(&api, &obj::<TerdutServer>("oidc-ok", good))
        .await
        .unwrap();
}

#[tokio::test]
async fn durations_must_be_go_durations_everywhere() {
    let (client, ns) = setup("dur").await;
    let servers = api_for::<TerdutServer>(&client, &ns);
    let teams = api_for::<TerdutTeam>(&client, &ns);
    let msg = "must be a Go duration such as 30s, 5m, 6h or 1h30m";
    for (i, path) in [
        vec!["sweeper", "staleAfter"],
        vec!["sweeper", "archiveAfter"],
        vec!["notify", "repeatEvery"],
        vec!["oidc", "sessionMaxAge"],
    ]
    .iter()
    .enumerate()
    {
        for bad in ["5 minutes", "1d", "-5m", "5"] {
            let spec = with(server_spec(), path, json!(bad));
            assert_rejected(&servers, &obj::<TerdutServer>(&format!("d{i}"), spec), msg).await;
        }
    }
    for good in ["30s", "5m", "6h", "1h30m", "1.5h", "0"] {
        let spec = with(server_spec(), &["sweeper", "staleAfter"], json!(good));
        dry_run(&servers, &obj::<TerdutServer>("ok", spec))
            .await
            .unwrap();
    }
    let ladder = |t: &str| json!({"levels": [{"timeout": t, "targets": [{"kind": "oncall"}]}]});
    let spec = with(team_spec(), &["escalation"], ladder("five minutes"));
    assert_rejected(&teams, &obj::<TerdutTeam>("t1", spec), msg).await;
    let spec = with(
        team_spec(),
        &["deadmanSwitches"],
        json!([{"name": "w", "matcher": "a=b", "timeout": "15"}]),
    );
    assert_rejected(&teams, &obj::<TerdutTeam>("t2", spec), msg).await;
}

#[tokio::test]
async fn escalation_needs_levels_and_valid_targets() {
    let (client, ns) = setup("esc").await;
    let api = api_for::<TerdutTeam>(&client, &ns);
    let empty = with(team_spec(), &["escalation"], json!({"levels": []}));
    assert_rejected(
        &api,
        &obj::<TerdutTeam>("empty", empty),
        "should have at least 1 items",
    )
    .await;
    let no_targets = with(
        team_spec(),
        &["escalation"],
        json!({"levels": [{"timeout": "5m", "targets": []}]}),
    );
    assert_rejected(
        &api,
        &obj::<TerdutTeam>("nt", no_targets),
        "should have at least 1 items",
    )
    .await;
    let msg = "an escalation target of kind user needs a username";
    let user_without = with(
        team_spec(),
        &["escalation"],
        json!({"levels": [{"timeout": "5m", "targets": [{"kind": "user"}]}]}),
    );
    assert_rejected(&api, &obj::<TerdutTeam>("u", user_without), msg).await;
    let oncall_with = with(
        team_spec(),
        &["escalation"],
        json!({"levels": [{"timeout": "5m", "targets": [{"kind": "oncall", "username": "alice"}]}]}),
    );
    assert_rejected(&api, &obj::<TerdutTeam>("o", oncall_with), msg).await;
    let bad_kind = with(
        team_spec(),
        &["escalation"],
        json!({"levels": [{"timeout": "5m", "targets": [{"kind": "group"}]}]}),
    );
    assert_rejected(
        &api,
        &obj::<TerdutTeam>("k", bad_kind),
        "supported values: \"oncall\", \"user\"",
    )
    .await;
    let ok = with(
        team_spec(),
        &["escalation"],
        json!({"levels": [{"timeout": "5m", "targets": [{"kind": "oncall"}, {"kind": "user", "username": "alice"}]}]}),
    );
    let got = dry_run(&api, &obj::<TerdutTeam>("ok", ok)).await.unwrap();
    assert_eq!(got.data["spec"]["escalation"]["repeatCount"], 0);
}

#[tokio::test]
async fn switch_names_are_unique() {
    let (client, ns) = setup("sw").await;
    let api = api_for::<TerdutTeam>(&client, &ns);
    let sw = |n: &str| json!({"name": n, "matcher": "alertname=Watchdog", "timeout": "15m"});
    let dup = with(
        team_spec(),
        &["deadmanSwitches"],
        json!([sw("watchdog"), sw("watchdog")]),
    );
    assert_rejected(&api, &obj::<TerdutTeam>("dup", dup), "Duplicate value").await;
    let ok = with(
        team_spec(),
        &["deadmanSwitches"],
        json!([sw("watchdog"), sw("heartbeat")]),
    );
    let got = dry_run(&api, &obj::<TerdutTeam>("ok", ok)).await.unwrap();
    assert_eq!(
        got.data["spec"]["deadmanSwitches"][0]["severity"],
        "critical"
    );
    let bad_sev = with(
        team_spec(),
        &["deadmanSwitches"],
        json!([{"name": "w", "matcher": "a=b", "timeout": "1m", "severity": "page"}]),
    );
    assert_rejected(
        &api,
        &obj::<TerdutTeam>("sev", bad_sev),
        "supported values: \"critical\", \"warning\", \"info\"",
    )
    .await;
}

#[tokio::test]
async fn required_fields_are_required() {
    let (client, ns) = setup("req").await;
    let teams = api_for::<TerdutTeam>(&client, &ns);
    assert_rejected(
        &teams,
        &obj::<TerdutTeam>("t", json!({"displayName": "X"})),
        "spec.serverRef: Required value",
    )
    .await;
    assert_rejected(
        &teams,
        &obj::<TerdutTeam>("t", json!({"serverRef": {}, "displayName": "X"})),
        "spec.serverRef.name: Required value",
    )
    .await;
    assert_rejected(
        &teams,
        &obj::<TerdutTeam>("t", json!({"serverRef": {"name": "s"}, "displayName": ""})),
        "spec.displayName",
    )
    .await;
    let sources = api_for::<TerdutAlertSource>(&client, &ns);
    assert_rejected(
        &sources,
        &obj::<TerdutAlertSource>("a", json!({"kind": "generic", "name": "x"})),
        "spec.teamRef: Required value",
    )
    .await;
    assert_rejected(
        &sources,
        &obj::<TerdutAlertSource>(
            "a",
            json!({"teamRef": {"name": "t"}, "kind": "pagerduty", "name": "x"}),
        ),
        "supported values: \"alertmanager\", \"grafana\", \"generic\"",
    )
    .await;
    let servers = api_for::<TerdutServer>(&client, &ns);
    assert_rejected(
        &servers,
        &obj::<TerdutServer>(
            "s",
            json!({"networking": {"hostname": "h"}, "database": {"dsn": "x"}}),
        ),
        "spec.image: Required value",
    )
    .await;
}

#[tokio::test]
async fn limits_keep_objects_bounded() {
    let (client, ns) = setup("limits").await;
    let teams = api_for::<TerdutTeam>(&client, &ns);
    let long = "x".repeat(129);
    let spec = with(team_spec(), &["displayName"], json!(long));
    assert_rejected(&teams, &obj::<TerdutTeam>("long", spec), "Too long").await;
    let many: Vec<Value> = (0..65)
        .map(|i| json!({"name": format!("s{i}"), "matcher": "a=b", "timeout": "1m"}))
        .collect();
    let spec = with(team_spec(), &["deadmanSwitches"], json!(many));
    assert_rejected(&teams, &obj::<TerdutTeam>("many", spec), "Too many").await;
}

#[tokio::test]
async fn refs_are_immutable() {
    let (client, ns) = setup("immut").await;
    let teams = api_for::<TerdutTeam>(&client, &ns);
    let mut t = create(&teams, &obj::<TerdutTeam>("t", team_spec()))
        .await
        .unwrap();
    // Other fields stay editable.
    t.data["spec"]["displayName"] = json!("Platform Engineering");
    t = replace(&teams, &t).await.unwrap();
    t.data["spec"]["serverRef"]["name"] = json!("other");
    let e = replace(&teams, &t).await.unwrap_err();
    assert!(e.contains("serverRef is immutable"), "{e}");
    t.data["spec"]["serverRef"] = json!({"name": "terdut", "namespace": "elsewhere"});
    let e = replace(&teams, &t).await.unwrap_err();
    assert!(e.contains("serverRef is immutable"), "{e}");

    let sources = api_for::<TerdutAlertSource>(&client, &ns);
    let spec = json!({"teamRef": {"name": "t"}, "kind": "generic", "name": "x"});
    let mut a = create(&sources, &obj::<TerdutAlertSource>("a", spec))
        .await
        .unwrap();
    a.data["spec"]["name"] = json!("renamed");
    a = replace(&sources, &a).await.unwrap();
    a.data["spec"]["teamRef"]["name"] = json!("u");
    let e = replace(&sources, &a).await.unwrap_err();
    assert!(e.contains("teamRef is immutable"), "{e}");
}

#[tokio::test]
async fn examples_apply_with_strict_server_validation() {
    let cp = ControlPlane::shared().await.unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/examples");
    // The folder's own files; its subfolders (quickstart/, alertmanager/) have their own test
    // (e2e/harness/tests/examples.rs), with the CRDs they need.
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(
        files.len() >= 4,
        "expected one example per CRD at least, got {files:?}"
    );
    // The namespaces must exist for real before namespaced objects can be dry-run.
    let (ok, out) = cp
        .kubectl(&["apply", "-f", files[0].to_str().unwrap()])
        .unwrap();
    assert!(ok, "{out}");
    let mut kinds = vec![];
    for f in &files[1..] {
        let (ok, out) = cp
            .kubectl(&[
                "apply",
                "--dry-run=server",
                "--validate=strict",
                "-f",
                f.to_str().unwrap(),
            ])
            .unwrap();
        assert!(ok, "{} failed: {out}", f.display());
        kinds.push(out);
    }
    let all = kinds.join("\n");
    for kind in ["terdutserver.", "terdutteam.", "terdutalertsource."] {
        assert!(
            all.contains(kind),
            "no example of {kind} in docs/examples: {all}"
        );
    }
}

#[tokio::test]
async fn category_lists_all_three_kinds() {
    let cp = ControlPlane::shared().await.unwrap();
    let client = cp.client().await.unwrap();
    let ns = cp.namespace(&client, "cat").await.unwrap();
    create(
        &api_for::<TerdutServer>(&client, &ns),
        &obj::<TerdutServer>("s", server_spec()),
    )
    .await
    .unwrap();
    create(
        &api_for::<TerdutTeam>(&client, &ns),
        &obj::<TerdutTeam>("t", team_spec()),
    )
    .await
    .unwrap();
    let spec = json!({"teamRef": {"name": "t"}, "kind": "generic", "name": "x"});
    create(
        &api_for::<TerdutAlertSource>(&client, &ns),
        &obj::<TerdutAlertSource>("a", spec),
    )
    .await
    .unwrap();
    let (ok, out) = cp.kubectl(&["get", "terdut", "-n", &ns]).unwrap();
    assert!(ok, "{out}");
    for name in [
        "terdutserver.terdut.ryuvia.com/s",
        "terdutteam.terdut.ryuvia.com/t",
        "terdutalertsource.terdut.ryuvia.com/a",
    ] {
        assert!(
            out.contains(name),
            "`kubectl get terdut` misses {name}:\n{out}"
        );
    }
    let (ok, out) = cp.kubectl(&["get", "tdt", "-n", &ns]).unwrap();
    assert!(
        ok && out.contains("SERVER") && out.contains("TEAMID") && out.contains("READY"),
        "{out}"
    );
}
