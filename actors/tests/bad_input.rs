//! Foreign objects and bad input, as a platform team with an existing install and ordinary
//! mistakes meets them (docs/runbook-server.md): the real kube-apiserver (with
//! kube-controller-manager for GC) and the stand-in. Each test asserts what the user sees
//! (conditions, Events) and what the cluster or the server got.

mod common;
mod source_fixture;
mod teams;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::json;
use terdut_crds::v1alpha1::{TerdutServer, TerdutTeam};

use common::{create_secret, eventually, setup, standin_for, test_server};
use source_fixture as sf;

const WAIT: Duration = Duration::from_secs(30);
/// Long enough for the growing retry of a reason no watch reports (at most 30 s apart).
const POLL_WAIT: Duration = Duration::from_secs(50);

const CHART_PORT: u16 = 19730;
const FOREIGN_KEY_PORT: u16 = 19731;
const MISSING_PORT: u16 = 19732;
const REJECTED_PORT: u16 = 19733;
const RESET_PORT: u16 = 19734;
const STATUS_DENIED_PORT: u16 = 19735;
const APPLY_FAILED_PORT: u16 = 19736;

/// `(status, reason, message)` of a TerdutServer condition.
async fn condition(
    api: &Api<TerdutServer>,
    name: &str,
    type_: &str,
) -> Option<(String, String, String)> {
    let s = api.get(name).await.ok()?.status?;
    s.conditions
        .into_iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status, c.reason, c.message))
}

async fn wait_condition(
    api: &Api<TerdutServer>,
    name: &str,
    type_: &str,
    reason: &str,
    limit: Duration,
) -> (String, String) {
    let what = format!("{type_} {reason} on TerdutServer {name}");
    let (status, _, message) = eventually(&what, limit, || async {
        condition(api, name, type_)
            .await
            .filter(|(_, r, _)| r == reason)
    })
    .await;
    (status, message)
}

/// Touches the server so its actor runs a pass now (an annotation is a spec-level change).
async fn touch(api: &Api<TerdutServer>, name: &str, v: &str) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"test/touch": v}}})),
    )
    .await
    .unwrap();
}

/// A Deployment and a Service as the terdut-server chart installs them: the server's name,
/// the chart's labels, no ownerReference, the Service's port named `http`.
fn chart_objects(ns: &str) -> (Deployment, Service) {
    let labels = json!({"app.kubernetes.io/name": "terdut-server",
        "app.kubernetes.io/instance": "terdut", "app.kubernetes.io/managed-by": "Helm"});
    let d = serde_json::from_value(json!({
        "metadata": {"name": "terdut", "namespace": ns, "labels": labels},
        "spec": {"replicas": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": "terdut-server",
                                         "app.kubernetes.io/instance": "terdut"}},
            "template": {"metadata": {"labels": labels},
                "spec": {"containers": [{"name": "terdut-server",
                    "image": "git.ryuvia.com/niklas/terdut-server:v0.9.3",
                    "ports": [{"name": "http", "containerPort": 8080}]}]}}},
    }))
    .unwrap();
    let s = serde_json::from_value(json!({
        "metadata": {"name": "terdut", "namespace": ns, "labels": labels},
        "spec": {"selector": {"app.kubernetes.io/name": "terdut-server",
                              "app.kubernetes.io/instance": "terdut"},
                 "ports": [{"name": "http", "port": 8080, "targetPort": "http"}]},
    }))
    .unwrap();
    (d, s)
}

/// What must stay exactly as it was: the spec (its generation), labels, annotations, owners,
/// and no field of it managed by the operator. (Its status moves: kube-controller-manager
/// runs the chart's Deployment.)
fn fingerprint<K: Resource>(o: &K) -> (Option<i64>, String, String, String, bool) {
    let m = o.meta();
    (
        m.generation,
        format!("{:?}", m.labels),
        format!("{:?}", m.annotations),
        format!("{:?}", m.owner_references),
        m.managed_fields
            .iter()
            .flatten()
            .any(|f| f.manager.as_deref() == Some("terdut-operator")),
    )
}

#[tokio::test]
async fn an_install_of_the_server_chart_is_left_byte_for_byte_and_outlives_the_server() {
    let (_cp, client, ns, _op) = setup("chart-install").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let (d, s) = chart_objects(&ns);
    deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    let s = services.create(&PostParams::default(), &s).await.unwrap();
    // kube-controller-manager takes the chart's Deployment first (its revision annotation):
    // what is compared is what the operator would change after that.
    let d = eventually("the Deployment controller's revision", WAIT, || async {
        let d = deployments.get("terdut").await.ok()?;
        d.annotations()
            .contains_key("deployment.kubernetes.io/revision")
            .then_some(d)
    })
    .await;

    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    servers
        .create(
            &PostParams::default(),
            &test_server("terdut", i32::from(CHART_PORT)),
        )
        .await
        .unwrap();
    let (status, message) =
        wait_condition(&servers, "terdut", "Ready", "ResourceNotOwned", WAIT).await;
    assert_eq!(status, "False");
    assert!(message.contains("Deployment terdut"), "{message}");
    let note = sf::wait_event(&client, &ns, "terdut", "Warning", "ResourceNotOwned").await;
    assert!(note.contains("never adopts"), "{note}");

    // Passes go on (a change, then its retries) and still nothing is written to them.
    touch(&servers, "terdut", "1").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let d_now = deployments.get("terdut").await.unwrap();
    let s_now = services.get("terdut").await.unwrap();
    assert_eq!(
        fingerprint(&d_now),
        fingerprint(&d),
        "the chart's Deployment"
    );
    assert_eq!(fingerprint(&s_now), fingerprint(&s), "the chart's Service");
    // One Warning for the streak, not one per retry.
    let warnings = sf::events_of(&client, &ns, "terdut")
        .await
        .into_iter()
        .filter(|(t, r, _)| t == "Warning" && r == "ResourceNotOwned")
        .count();
    assert_eq!(warnings, 1);

    // Deleting the TerdutServer takes nothing of the chart's with it (GC follows owners).
    servers
        .delete("terdut", &DeleteParams::foreground())
        .await
        .unwrap();
    eventually("the TerdutServer gone", WAIT, || async {
        servers
            .get_opt("terdut")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        fingerprint(&deployments.get("terdut").await.unwrap()),
        fingerprint(&d)
    );
    assert_eq!(
        fingerprint(&services.get("terdut").await.unwrap()),
        fingerprint(&s)
    );
}

#[tokio::test]
async fn an_unlabelled_secret_under_the_key_name_is_never_used_or_overwritten() {
    let (_cp, client, ns, _op) = setup("foreign-key").await;
    // A Secret of the key's name that someone else made, holding a well-formed key, and a
    // server seeded with that key: if the operator used it, the server would count calls.
    let foreign = format!("tdsa_{}", "ab".repeat(24));
    create_secret(&client, &ns, "terdut-operator-key", &[("token", &foreign)]).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let before = secrets.get("terdut-operator-key").await.unwrap();
    let mut config = terdut_standin::Config::for_tests().with_operator_key(foreign.clone());
    config.listen = std::net::SocketAddr::from(([127, 0, 0, 1], FOREIGN_KEY_PORT));
    let standin = terdut_standin::spawn(config).await.unwrap();

    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    servers
        .create(
            &PostParams::default(),
            &test_server("terdut", i32::from(FOREIGN_KEY_PORT)),
        )
        .await
        .unwrap();
    let (_, message) = wait_condition(&servers, "terdut", "Ready", "KeySecretNotOwned", WAIT).await;
    assert!(message.contains("terdut-operator-key"), "{message}");
    let teams_api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    teams_api
        .create(
            &PostParams::default(),
            &teams::team("t", json!({"name": "terdut"}), "T", json!({})),
        )
        .await
        .unwrap();
    let t = teams::wait_reason(&teams_api, "t", "WaitingForServer").await;
    assert!(teams::ready(&t).unwrap().2.contains("no operator key"));
    touch(&servers, "terdut", "1").await;
    tokio::time::sleep(Duration::from_secs(4)).await;

    assert_eq!(
        fingerprint(&secrets.get("terdut-operator-key").await.unwrap()),
        fingerprint(&before)
    );
    assert_eq!(
        standin.admin().calls().await.unwrap().total(),
        0,
        "the foreign Secret's key was never presented"
    );
    let creates = sf::events_of(&client, &ns, "terdut")
        .await
        .into_iter()
        .filter(|(_, r, _)| r == "OperatorKeyCreated" || r == "KeySecretNotOwned")
        .collect::<Vec<_>>();
    assert_eq!(
        creates
            .iter()
            .filter(|(_, r, _)| r == "KeySecretNotOwned")
            .count(),
        1,
        "{creates:?}"
    );
    assert!(!creates.iter().any(|(_, r, _)| r == "OperatorKeyCreated"));
}

#[tokio::test]
async fn each_missing_referenced_secret_is_named_and_noticed_when_it_appears() {
    let (_cp, client, ns, _op) = setup("missing-secrets").await;
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    let mut s = test_server("terdut", i32::from(MISSING_PORT));
    s.spec = serde_json::from_value(json!({
        "image": {"tag": "v0.9.3"},
        "networking": {"hostname": "terdut.example.com", "servicePort": MISSING_PORT},
        "database": {"dsn": "postgres://terdut@db:5432/terdut",
                     "passwordSecretRef": {"name": "db", "key": "password"}},
        "notify": {"tokenSecretRef": {"name": "ntfy", "key": "token"}},
        "oidc": {"enabled": true, "issuer": "https://idp.example", "clientID": "terdut",
                 "clientSecretRef": {"name": "oidc", "key": "client-secret"}},
    }))
    .unwrap();
    servers.create(&PostParams::default(), &s).await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);

    let (_, m) = wait_condition(&servers, "terdut", "Ready", "SecretNotFound", WAIT).await;
    assert!(
        m.contains("Secret db (spec.database.passwordSecretRef)"),
        "{m}"
    );
    create_secret(&client, &ns, "db", &[("pw", "x")]).await;
    touch(&servers, "terdut", "1").await;
    let (_, m) = wait_condition(&servers, "terdut", "Ready", "SecretKeyNotFound", WAIT).await;
    assert!(
        m.contains("Secret db") && m.contains("no key password"),
        "{m}"
    );
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    secrets
        .delete("db", &DeleteParams::default())
        .await
        .unwrap();
    create_secret(&client, &ns, "db", &[("password", "x")]).await;
    touch(&servers, "terdut", "2").await;
    let (_, _, m) = eventually("the ntfy token named", WAIT, || async {
        condition(&servers, "terdut", "Ready")
            .await
            .filter(|(_, r, m)| r == "SecretNotFound" && m.contains("ntfy"))
    })
    .await;
    assert!(
        m.contains("Secret ntfy (spec.notify.tokenSecretRef)"),
        "{m}"
    );
    create_secret(&client, &ns, "ntfy", &[("token", "x")]).await;
    touch(&servers, "terdut", "3").await;
    let (_, _, m) = eventually("the OIDC client secret named", WAIT, || async {
        condition(&servers, "terdut", "Ready")
            .await
            .filter(|(_, r, m)| r == "SecretNotFound" && m.contains("oidc"))
    })
    .await;
    assert!(m.contains("spec.oidc.clientSecretRef"), "{m}");
    assert!(
        deployments.get_opt("terdut").await.unwrap().is_none(),
        "held back while a Secret its pods read is missing"
    );
    // The last one appears and nobody touches the server: it notices by itself.
    create_secret(&client, &ns, "oidc", &[("client-secret", "x")]).await;
    eventually("the Deployment", POLL_WAIT, || async {
        deployments.get_opt("terdut").await.ok().flatten()
    })
    .await;
    wait_condition(&servers, "terdut", "Ready", "Progressing", WAIT).await;
}

#[tokio::test]
async fn a_key_the_server_rejects_is_on_the_server_and_its_teams_say_so() {
    let (_cp, client, ns, _op) = setup("rejected-key").await;
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    servers
        .create(
            &PostParams::default(),
            &test_server("terdut", i32::from(REJECTED_PORT)),
        )
        .await
        .unwrap();
    // A server started with another key (pods not rolled, a server that ignores the env).
    let mut config =
        terdut_standin::Config::for_tests().with_operator_key(format!("tdsa_{}", "cd".repeat(24)));
    config.listen = std::net::SocketAddr::from(([127, 0, 0, 1], REJECTED_PORT));
    let wrong = terdut_standin::spawn(config).await.unwrap();
    let (status, message) =
        wait_condition(&servers, "terdut", "KeyAccepted", "KeyRejected", WAIT).await;
    assert_eq!(status, "False");
    assert!(message.contains("refuses the operator key"), "{message}");
    let teams_api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    teams_api
        .create(
            &PostParams::default(),
            &teams::team("t", json!({"name": "terdut"}), "T", json!({})),
        )
        .await
        .unwrap();
    let t = teams::wait_reason(&teams_api, "t", "WaitingForServer").await;
    let why = teams::ready(&t).unwrap().2;
    assert!(
        why.contains("does not accept the operator key") && why.contains("KeyAccepted"),
        "{why}"
    );
    assert_eq!(
        wrong
            .admin()
            .calls()
            .await
            .unwrap()
            .get("POST /api/v1/teams"),
        0,
        "teams make no calls the server would refuse"
    );

    // The pods roll with the right key: the server notices, and so do its teams.
    wrong.shutdown().await;
    let _right = standin_for(&client, &ns, "terdut", REJECTED_PORT).await;
    wait_condition(&servers, "terdut", "KeyAccepted", "Accepted", POLL_WAIT).await;
    teams::wait_reason(&teams_api, "t", "Ready").await;
}

#[tokio::test]
async fn a_server_that_lost_its_data_gets_everything_back_at_once() {
    let (_cp, client, ns, op) = setup("lost-data").await;
    let standin = common::server_with_standin(&client, &ns, "terdut", RESET_PORT).await;
    let teams_api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    let names = ["a", "b", "c"];
    for n in names {
        teams_api
            .create(
                &PostParams::default(),
                &teams::team(
                    n,
                    json!({"name": "terdut"}),
                    &format!("Team {n}"),
                    json!({}),
                ),
            )
            .await
            .unwrap();
        sf::sources(&client, &ns)
            .create(
                &PostParams::default(),
                &sf::source(&format!("{n}-am"), n, "alertmanager", &format!("{n} am")),
            )
            .await
            .unwrap();
    }
    let mut before = vec![];
    for n in names {
        teams::wait_reason(&teams_api, n, "Ready").await;
        let source = format!("{n}-am");
        let id = sf::wait_ready_id(&client, &ns, &source, None).await;
        before.push(sf::wait_webhook(&client, &ns, &source, id).await.key);
    }

    // The database is reset behind the operator's back; one team's resync comes round.
    standin.admin().reset().await.unwrap();
    teams::resync(op, &ns, "a").await;

    // Everything comes back within 30 s, not at each object's 5-minute resync.
    for (n, old_key) in names.iter().zip(&before) {
        let source = format!("{n}-am");
        eventually(&format!("{n} on the server again"), WAIT, || async {
            teams::on_server(&standin, &format!("{ns}/{n}")).await
        })
        .await;
        // A new integration (ids may repeat after a reset: its key tells it apart), live.
        let hook = eventually(&format!("a new live key for {source}"), WAIT, || async {
            let hook = sf::webhook(&client, &ns, &source).await?;
            let (live, _) = sf::key_live(&standin, &hook.key).await;
            (live && hook.key != *old_key).then_some(hook)
        })
        .await;
        assert_eq!(
            sf::integrations_for(&standin, &format!("{ns}/{source}"))
                .await
                .iter()
                .map(|i| Some(i.id))
                .collect::<Vec<_>>(),
            [hook.integration_id]
        );
        let note = sf::wait_event(&client, &ns, &source, "Warning", "WebhookKeyRotated").await;
        assert!(note.contains("no longer exists on the server"), "{note}");
        teams::wait_event(&client, &ns, n, "TeamRecreated").await;
    }
}

#[tokio::test]
async fn a_refused_status_write_does_not_withhold_the_client_from_the_teams() {
    let (_cp, client, ns, _op) = setup("status-denied").await;
    // Every status write of a TerdutServer here is refused (a policy of the cluster's).
    refuse(
        &client,
        &ns,
        &format!("deny-status-{ns}"),
        ("terdut.ryuvia.com", &["terdutservers/status"], &["UPDATE"]),
        "false",
        "status writes are refused here",
    )
    .await;
    // Policies take effect a moment after they are made: wait until a status write is refused.
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    servers
        .create(&PostParams::default(), &test_server("probe", 1))
        .await
        .unwrap();
    eventually("the policy in force", WAIT, || async {
        servers
            .patch_status(
                "probe",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"observedGeneration": 1}})),
            )
            .await
            .is_err()
            .then_some(())
    })
    .await;
    servers
        .delete("probe", &DeleteParams::default())
        .await
        .unwrap();

    let _standin = common::server_with_standin(&client, &ns, "terdut", STATUS_DENIED_PORT).await;
    let _ = &servers;
    let teams_api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    teams_api
        .create(
            &PostParams::default(),
            &teams::team("t", json!({"name": "terdut"}), "T", json!({})),
        )
        .await
        .unwrap();
    // The server's own status stays unwritten, and its team converges all the same.
    teams::wait_reason(&teams_api, "t", "Ready").await;
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    let s = servers.get("terdut").await.unwrap();
    // Never written: the schema's default status (an observedGeneration of -1), nothing else.
    assert!(
        s.status
            .as_ref()
            .is_some_and(|st| st.conditions.is_empty() && st.observed_generation == Some(-1)),
        "{:?}",
        s.status
    );
    assert!(s.name_any() == "terdut");
}

/// A ValidatingAdmissionPolicy of the cluster's, bound to namespace `ns`: refuses the
/// `operations` on `resources` (of `group`) where `expression` is false, with `message`.
async fn refuse(
    client: &kube::Client,
    ns: &str,
    name: &str,
    (group, resources, operations): (&str, &[&str], &[&str]),
    expression: &str,
    message: &str,
) {
    let gvk = |kind: &str| {
        kube::core::ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            kind,
        ))
    };
    let policy: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {"failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [group], "apiVersions": ["*"],
                "operations": operations, "resources": resources}]},
            "validations": [{"expression": expression, "message": message}]},
    }))
    .unwrap();
    let binding: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels":
                {"kubernetes.io/metadata.name": ns}}}},
    }))
    .unwrap();
    Api::<kube::api::DynamicObject>::all_with(client.clone(), &gvk("ValidatingAdmissionPolicy"))
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
    Api::<kube::api::DynamicObject>::all_with(
        client.clone(),
        &gvk("ValidatingAdmissionPolicyBinding"),
    )
    .create(&PostParams::default(), &binding)
    .await
    .unwrap();
}

#[tokio::test]
async fn writes_the_cluster_refuses_are_apply_failed_with_its_message() {
    let (_cp, client, ns, _op) = setup("apply-failed").await;
    // The cluster's policies: no Deployment in this namespace, and no webhook Secret.
    refuse(
        &client,
        &ns,
        &format!("no-deployments-{ns}"),
        ("apps", &["deployments"], &["CREATE", "UPDATE"]),
        "false",
        "Deployments are not allowed here",
    )
    .await;
    refuse(
        &client,
        &ns,
        &format!("no-webhook-secrets-{ns}"),
        ("", &["secrets"], &["CREATE"]),
        "!object.metadata.name.endsWith('-terdut-webhook')",
        "webhook Secrets are not allowed here",
    )
    .await;
    // Policies take effect a moment after they are made: wait until both refuse.
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let (d, _) = chart_objects(&ns);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let probe: Secret =
        serde_json::from_value(json!({"metadata": {"name": "probe-terdut-webhook"}})).unwrap();
    eventually("the policies in force", WAIT, || async {
        (deployments.create(&dry, &d).await.is_err() && secrets.create(&dry, &probe).await.is_err())
            .then_some(())
    })
    .await;
    let servers: Api<TerdutServer> = Api::namespaced(client.clone(), &ns);
    let _standin = common::server_with_standin(&client, &ns, "terdut", APPLY_FAILED_PORT).await;
    let (status, message) = wait_condition(&servers, "terdut", "Ready", "ApplyFailed", WAIT).await;
    assert_eq!(status, "False");
    assert!(
        message.contains("Deployment") && message.contains("Deployments are not allowed here"),
        "{message}"
    );
    sf::wait_event(&client, &ns, "terdut", "Warning", "ApplyFailed").await;

    // Its team converges (the key and client need no Deployment); its alert source cannot
    // store the key and says why.
    let teams_api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    teams_api
        .create(
            &PostParams::default(),
            &teams::team("t", json!({"name": "terdut"}), "T", json!({})),
        )
        .await
        .unwrap();
    teams::wait_reason(&teams_api, "t", "Ready").await;
    sf::sources(&client, &ns)
        .create(
            &PostParams::default(),
            &sf::source("am", "t", "alertmanager", "am"),
        )
        .await
        .unwrap();
    let s = sf::wait_reason(&client, &ns, "am", "ApplyFailed").await;
    let c = s.status.unwrap().conditions;
    let ready = c.iter().find(|c| c.type_ == "Ready").unwrap();
    assert!(
        ready
            .message
            .contains("webhook Secrets are not allowed here"),
        "{}",
        ready.message
    );
}
