//! A hostile tenant, against the real kube-apiserver and the stand-in (docs/security.md): rights
//! to create TerdutTeams and TerdutAlertSources in one namespace, and to write their status and
//! the webhook Secrets there. Each test makes the attack itself and asserts what the server got
//! and what the user sees.

mod common;
mod source_fixture;
mod teams;

use std::time::Duration;

use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use terdut_crds::v1alpha1::TerdutTeam;

use common::{eventually, server_with_standin, setup};
use source_fixture as sf;
use teams::{WAIT, team, team_id, wait_reason};

/// Ports of this binary's stand-ins (one per test).
const FORGED_STATUS_PORT: u16 = 19710;
const FOREIGN_ID_PORT: u16 = 19711;
const REFUSED_DELETE_PORT: u16 = 19712;
const REUSED_NS_PORT: u16 = 19713;
const FORGED_ID_PORT: u16 = 19714;
const OVERSIZE_PORT: u16 = 19715;

/// Writes `status` onto the TerdutTeam as its owner could (`terdutteams/status` is theirs).
async fn forge_team_status(api: &Api<TerdutTeam>, name: &str, team_id: i64) {
    let status = json!({"status": {
        "conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
            "message": "forged", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        "teamID": team_id,
    }});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

/// Keeps forging the team's status for `for_` while the operator's team actor rewrites it.
async fn keep_forging(api: Api<TerdutTeam>, name: String, team_id: i64, for_: Duration) {
    let until = tokio::time::Instant::now() + for_;
    while tokio::time::Instant::now() < until {
        forge_team_status(&api, &name, team_id).await;
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}

/// The integrations the stand-in holds on team `team`: (external_id, name).
async fn integrations_on(standin: &terdut_standin::Handle, team: i64) -> Vec<(String, String)> {
    let state = standin.admin().state().await.unwrap();
    let t = state.teams.iter().find(|t| t.id == team).expect("team");
    t.integrations
        .iter()
        .map(|i| (i.external_id.clone(), i.name.clone()))
        .collect()
}

#[tokio::test]
async fn a_forged_team_status_gets_no_webhook_key_into_another_tenants_team() {
    let (cp, client, victim_ns, _op) = setup("trust-victim").await;
    let attacker_ns = cp.namespace(&client, "trust-attacker").await.unwrap();
    let standin = server_with_standin(&client, &victim_ns, "terdut", FORGED_STATUS_PORT).await;
    let victim_teams: Api<TerdutTeam> = Api::namespaced(client.clone(), &victim_ns);
    let attacker_teams: Api<TerdutTeam> = Api::namespaced(client.clone(), &attacker_ns);

    // The victim: a team and an alert source in the server's own namespace.
    let victim = team("oncall", json!({"name": "terdut"}), "Victim", json!({}));
    victim_teams
        .create(&PostParams::default(), &victim)
        .await
        .unwrap();
    let victim_id = team_id(&wait_reason(&victim_teams, "oncall", "Ready").await);
    sf::sources(&client, &victim_ns)
        .create(
            &PostParams::default(),
            &sf::source("am", "oncall", "alertmanager", "victim-am"),
        )
        .await
        .unwrap();
    let victim_integration = sf::wait_ready_id(&client, &victim_ns, "am", None).await;

    // The attacker: a team the server refuses (another namespace, allowedTeams None) and an
    // alert source beside it.
    let refused = team(
        "mine",
        json!({"name": "terdut", "namespace": victim_ns}),
        "Attacker",
        json!({}),
    );
    attacker_teams
        .create(&PostParams::default(), &refused)
        .await
        .unwrap();
    wait_reason(&attacker_teams, "mine", "RefNotPermitted").await;
    sf::sources(&client, &attacker_ns)
        .create(
            &PostParams::default(),
            &sf::source("grab", "mine", "alertmanager", "grab"),
        )
        .await
        .unwrap();

    // The attack: the refused team's status says Ready with the victim's team id, rewritten
    // as fast as the team actor corrects it, while the source is nudged.
    let forger = tokio::spawn(keep_forging(
        attacker_teams.clone(),
        "mine".into(),
        victim_id,
        Duration::from_secs(8),
    ));
    for _ in 0..8 {
        sf::nudge(&client, &attacker_ns, "grab").await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    forger.await.unwrap();
    forge_team_status(&attacker_teams, "mine", victim_id).await;
    sf::nudge(&client, &attacker_ns, "grab").await;
    // Whichever copy of the team the source read last (forged, or corrected by the team's
    // actor), it says the server refuses this namespace: its own consent check, or the team's.
    let refusal = format!("does not allow TerdutTeams from namespace {attacker_ns}");
    let (status, reason, message) =
        eventually("the source to say the server refuses it", WAIT, || async {
            sf::ready(&client, &attacker_ns, "grab")
                .await
                .filter(|(_, _, m)| m.contains(&refusal))
        })
        .await;
    assert_eq!(status, "False");
    assert!(
        ["RefNotPermitted", "WaitingForTeam"].contains(&reason.as_str()),
        "{reason}: {message}"
    );

    // What the server got: the victim's team holds the victim's integration only.
    assert_eq!(
        integrations_on(&standin, victim_id).await,
        [(format!("{victim_ns}/am"), "victim-am".to_owned())]
    );
    assert!(
        sf::integrations_for(&standin, &format!("{attacker_ns}/grab"))
            .await
            .is_empty()
    );
    // What the attacker got: no Secret with a key.
    assert!(sf::webhook(&client, &attacker_ns, "grab").await.is_none());
    let victim_hook = sf::webhook(&client, &victim_ns, "am").await.unwrap();
    assert_eq!(
        sf::key_live(&standin, &victim_hook.key).await,
        (true, Some(victim_integration))
    );
}

#[tokio::test]
async fn an_accepted_team_with_a_forged_team_id_still_gets_nothing_on_the_other_team() {
    let (cp, client, victim_ns, _op) = setup("trust-forged-id").await;
    let attacker_ns = cp.namespace(&client, "trust-forged-id-a").await.unwrap();
    // Every namespace may attach: consent holds, identity must still be proven.
    let standin = server_with_standin(&client, &victim_ns, "terdut", FORGED_ID_PORT).await;
    teams::allow(&client, &victim_ns, "terdut", json!({"from": "All"})).await;
    let victim_teams: Api<TerdutTeam> = Api::namespaced(client.clone(), &victim_ns);
    let attacker_teams: Api<TerdutTeam> = Api::namespaced(client.clone(), &attacker_ns);
    victim_teams
        .create(
            &PostParams::default(),
            &team("oncall", json!({"name": "terdut"}), "Victim", json!({})),
        )
        .await
        .unwrap();
    let victim_id = team_id(&wait_reason(&victim_teams, "oncall", "Ready").await);
    attacker_teams
        .create(
            &PostParams::default(),
            &team(
                "mine",
                json!({"name": "terdut", "namespace": victim_ns}),
                "Attacker",
                json!({}),
            ),
        )
        .await
        .unwrap();
    let own_id = team_id(&wait_reason(&attacker_teams, "mine", "Ready").await);
    assert_ne!(own_id, victim_id);

    // The source appears while the status names the victim's team.
    forge_team_status(&attacker_teams, "mine", victim_id).await;
    sf::sources(&client, &attacker_ns)
        .create(
            &PostParams::default(),
            &sf::source("grab", "mine", "generic", "grab"),
        )
        .await
        .unwrap();
    keep_forging(
        attacker_teams.clone(),
        "mine".into(),
        victim_id,
        Duration::from_secs(6),
    )
    .await;

    // The victim's team never got it; once the team actor has put the real id back, the
    // source lands on the attacker's own team.
    assert!(integrations_on(&standin, victim_id).await.is_empty());
    let id = sf::wait_ready_id(&client, &attacker_ns, "grab", None).await;
    assert_eq!(
        integrations_on(&standin, own_id).await,
        [(format!("{attacker_ns}/grab"), "grab".to_owned())]
    );
    assert!(integrations_on(&standin, victim_id).await.is_empty());
    let hook = sf::wait_webhook(&client, &attacker_ns, "grab", id).await;
    assert_eq!(sf::key_live(&standin, &hook.key).await, (true, Some(id)));
    let mismatch = sf::events_of(&client, &attacker_ns, "grab").await;
    assert!(
        !mismatch.iter().any(|(_, _, n)| n.contains(&victim_ns)),
        "no Event names the other tenant's team: {mismatch:?}"
    );
}

#[tokio::test]
async fn a_foreign_integration_id_in_the_webhook_secret_is_never_renamed_rotated_or_deleted() {
    let (_cp, client, ns, _op) = setup("trust-foreign-id").await;
    let (standin, team_id) = sf::server_and_team(&client, &ns, FOREIGN_ID_PORT, "t").await;
    let sources = sf::sources(&client, &ns);
    for (name, display) in [("theirs", "Theirs"), ("mine", "Mine")] {
        sources
            .create(
                &PostParams::default(),
                &sf::source(name, "t", "alertmanager", display),
            )
            .await
            .unwrap();
    }
    let theirs = sf::wait_ready_id(&client, &ns, "theirs", None).await;
    sf::wait_ready_id(&client, &ns, "mine", None).await;
    let their_key = sf::wait_webhook(&client, &ns, "theirs", theirs).await.key;
    let untouched = |admin: terdut_standin::AdminClient| async move {
        let state = admin.state().await.unwrap();
        let t = state.teams.iter().find(|t| t.id == team_id).unwrap();
        t.integrations
            .iter()
            .find(|i| i.id == theirs)
            .map(|i| (i.name.clone(), i.kind))
    };

    // The attack: the attacker's own webhook Secret and status name the other integration.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), &ns);
    secrets
        .patch(
            "mine-terdut-webhook",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                "terdut.ryuvia.com/integration-id": theirs.to_string()}}})),
        )
        .await
        .unwrap();
    sources
        .patch_status(
            "mine",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"integrationID": theirs}})),
        )
        .await
        .unwrap();
    sf::wait_event(&client, &ns, "mine", "Warning", "IntegrationIDRejected").await;
    let before = untouched(standin.admin()).await.expect("still there");
    assert_eq!(before.0, "Theirs", "not renamed to the attacker's name");

    // A kind change (delete and recreate) and then a delete of the attacker's source.
    sf::patch_spec(&client, &ns, "mine", json!({"kind": "grafana"})).await;
    eventually("the attacker's source on grafana", WAIT, || async {
        let ints = sf::integrations_for(&standin, &format!("{ns}/mine")).await;
        (ints.len() == 1 && ints[0].kind.as_str() == "grafana").then_some(())
    })
    .await;
    sources
        .delete("mine", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the attacker's source gone", WAIT, || async {
        sources
            .get_opt("mine")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;

    // What the server got: the other integration as it was, its key live; the attacker's own
    // integrations gone with its source.
    assert_eq!(untouched(standin.admin()).await, Some(before));
    assert_eq!(
        sf::key_live(&standin, &their_key).await,
        (true, Some(theirs))
    );
    assert!(
        sf::integrations_for(&standin, &format!("{ns}/mine"))
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn deleting_a_refused_team_with_a_self_added_finalizer_makes_no_create_call() {
    let (cp, client, server_ns, _op) = setup("trust-refused").await;
    let tenant_ns = cp.namespace(&client, "trust-refused-t").await.unwrap();
    let standin = server_with_standin(&client, &server_ns, "terdut", REFUSED_DELETE_PORT).await;
    let server_teams: Api<TerdutTeam> = Api::namespaced(client.clone(), &server_ns);
    server_teams
        .create(
            &PostParams::default(),
            &team("owned", json!({"name": "terdut"}), "Owned", json!({})),
        )
        .await
        .unwrap();
    let victim_id = team_id(&wait_reason(&server_teams, "owned", "Ready").await);

    let tenant: Api<TerdutTeam> = Api::namespaced(client.clone(), &tenant_ns);
    let mut t = team(
        "probe",
        json!({"name": "terdut", "namespace": server_ns}),
        "Owned",
        json!({}),
    );
    t.metadata.finalizers = Some(vec!["terdut.ryuvia.com/team-cleanup".into()]);
    tenant.create(&PostParams::default(), &t).await.unwrap();
    wait_reason(&tenant, "probe", "RefNotPermitted").await;
    // The status also names the victim's team, as if it were this one's.
    forge_team_status(&tenant, "probe", victim_id).await;

    standin.admin().reset_calls().await.unwrap();
    tenant
        .delete("probe", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the refused team gone", WAIT, || async {
        tenant
            .get_opt("probe")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    let note = teams::wait_event(&client, &tenant_ns, "probe", "TeamLeftOnServer").await;
    assert!(note.contains("does not accept"), "{note}");

    let calls = standin.admin().calls().await.unwrap();
    assert_eq!(calls.get("POST /api/v1/teams"), 0, "{calls:?}");
    assert_eq!(calls.get("DELETE /api/v1/teams/{id}"), 0, "{calls:?}");
    assert!(
        teams::on_server(&standin, &format!("{server_ns}/owned"))
            .await
            .is_some(),
        "the team the forged status named is still there"
    );
}

async fn wait_paused(api: &Api<TerdutTeam>, name: &str) {
    eventually("the team paused", WAIT, || async {
        let t = api.get(name).await.ok()?;
        let s = t.status?;
        s.conditions
            .iter()
            .any(|c| c.type_ == "Paused" && c.status == "True")
            .then_some(())
    })
    .await
}

#[tokio::test]
async fn a_reused_namespace_reports_adopted_and_takes_over_only_with_the_annotation() {
    let (cp, client, server_ns, _op) = setup("trust-reuse").await;
    let standin = server_with_standin(&client, &server_ns, "terdut", REUSED_NS_PORT).await;
    teams::allow(&client, &server_ns, "terdut", json!({"from": "All"})).await;
    let tenant_ns = format!("{server_ns}-t");
    cp.create_namespace(&client, &tenant_ns, Default::default())
        .await
        .unwrap();
    let first = team(
        "payments",
        json!({"name": "terdut", "namespace": server_ns}),
        "Payments",
        json!({}),
    );
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &tenant_ns);
    api.create(&PostParams::default(), &first).await.unwrap();
    let old_id = team_id(&wait_reason(&api, "payments", "Ready").await);

    // The first tenant's namespace goes away with its team left on the server (paused, so the
    // operator stops putting its finalizer back, and the finalizer taken off by hand), and the
    // same name is created again by someone else.
    api.patch(
        "payments",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"terdut.ryuvia.com/paused": "true"}}})),
    )
    .await
    .unwrap();
    wait_paused(&api, "payments").await;
    api.patch(
        "payments",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    namespaces
        .delete(&tenant_ns, &DeleteParams::default())
        .await
        .unwrap();
    eventually("the namespace gone", Duration::from_secs(60), || async {
        namespaces
            .get_opt(&tenant_ns)
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    cp.create_namespace(&client, &tenant_ns, Default::default())
        .await
        .unwrap();
    let second = team(
        "payments",
        json!({"name": "terdut", "namespace": server_ns}),
        "Payments EU",
        json!({"oidc": {"memberGroup": "newcomers"}}),
    );
    api.create(&PostParams::default(), &second).await.unwrap();

    // Never silent: Ready=False Adopted naming the team, a Warning, nothing changed on it.
    let t = wait_reason(&api, "payments", "Adopted").await;
    let (status, _, message) = teams::ready(&t).unwrap();
    assert_eq!(status, "False");
    assert!(message.contains(&format!("team {old_id}")), "{message}");
    assert!(message.contains("terdut.ryuvia.com/adopt"), "{message}");
    assert_eq!(t.status.as_ref().unwrap().team_id, None);
    assert!(
        !t.metadata
            .finalizers
            .unwrap_or_default()
            .iter()
            .any(|f| f == "terdut.ryuvia.com/team-cleanup"),
        "holds nothing on the server, so its deletion deletes nothing"
    );
    let note = teams::wait_event(&client, &tenant_ns, "payments", "Adopted").await;
    assert!(note.contains(&old_id.to_string()), "{note}");
    let on_server = teams::on_server(&standin, &format!("{tenant_ns}/payments"))
        .await
        .unwrap();
    assert_eq!(
        (on_server.id, on_server.name.as_str()),
        (old_id, "Payments")
    );
    assert_eq!(on_server.oidc.member_group, None);

    // Opting in takes it over: renamed, groups applied, the id in status.
    api.patch(
        "payments",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {
            "terdut.ryuvia.com/adopt": old_id.to_string()}}})),
    )
    .await
    .unwrap();
    let t = wait_reason(&api, "payments", "Ready").await;
    assert_eq!(team_id(&t), old_id);
    let on_server = teams::on_server(&standin, &format!("{tenant_ns}/payments"))
        .await
        .unwrap();
    assert_eq!(on_server.name, "Payments EU");
    assert_eq!(on_server.oidc.member_group.as_deref(), Some("newcomers"));
}

#[tokio::test]
async fn a_server_answering_a_hundred_mib_leaves_the_team_waiting_with_the_reason() {
    let (_cp, client, ns, op) = setup("trust-oversize").await;
    let standin = server_with_standin(&client, &ns, "terdut", OVERSIZE_PORT).await;
    standin
        .admin()
        .add_fault(&terdut_standin::FaultRule::new("POST /api/v1/teams").oversize_bytes(100 << 20))
        .await
        .unwrap();
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    api.create(
        &PostParams::default(),
        &team("big", json!({"name": "terdut"}), "Big", json!({})),
    )
    .await
    .unwrap();
    // WaitingForServer also reads "no operator key yet" while the server's first pass runs (a
    // loaded machine lets the team's pass come first): wait for the oversized answer's reason.
    let message = eventually(
        "TerdutTeam big WaitingForServer on the oversized answer",
        WAIT,
        || async {
            let t = api.get("big").await.ok()?;
            let (_, reason, message) = teams::ready(&t)?;
            (reason == "WaitingForServer" && message.contains("exceeded")).then_some(message)
        },
    )
    .await;
    assert!(message.contains("exceeded 1048576 bytes"), "{message}");
    // Once the server answers sanely the team converges.
    standin.admin().clear_faults().await.unwrap();
    teams::resync(op, &ns, "big").await;
    wait_reason(&api, "big", "Ready").await;
}
