//! The TerdutTeam actor against a real kube-apiserver and the stand-in terdut-server: a team
//! converging and following spec changes (switch add/change/remove, rename, ladder cleared),
//! drift on the server put back, a lost status and a team deleted behind the operator's back
//! healing, and the pause annotation. Condition reasons: team_reasons.rs; consent:
//! team_consent.rs; deletion: team_delete.rs; the no-op resync: team_steady.rs.

mod common;
mod teams;

use std::time::Duration;

use common::{eventually, server_with_standin, setup};
use kube::api::{Api, Patch, PatchParams};
use prometheus_client::encoding::text::encode;
use serde_json::json;
use teams::*;
use terdut_actors::api::{Ladder, Level, OidcGroups, SwitchSpec, Target};
use terdut_actors::key::ObjectKey;
use terdut_actors::routing::ChildKind;
use terdut_actors::team::FINALIZER;
use terdut_actors::team::status::{PAUSE_ANNOTATION, PAUSED};
use terdut_crds::v1alpha1::TerdutTeam;
use terdut_crds::v1alpha1::conditions;

fn server() -> serde_json::Value {
    json!({"name": "terdut"})
}

/// `drift_corrections_total{kind="team"}` as the operator exports it.
fn drift_corrections(op: &common::TestOperator) -> u64 {
    let mut text = String::new();
    encode(&mut text, &op.registry).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(r#"drift_corrections_total{kind="team"} "#))
        .map_or(0, |v| v.trim().parse().unwrap())
}

#[tokio::test]
async fn a_team_converges_and_follows_its_spec() {
    let (_, client, ns, _) = setup("team-life").await;
    let standin = server_with_standin(&client, &ns, "terdut", 19610).await;
    standin.admin().seed_users(["alice"]).await.unwrap();
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    create(&api, &team("platform", server(), "Platform", full_spec())).await;

    let t = wait_reason(&api, "platform", "Ready").await;
    let id = team_id(&t);
    assert!(
        t.metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == FINALIZER)
    );
    let (status, _, message) = ready(&t).unwrap();
    assert_eq!(status, "True");
    assert!(message.contains(&format!("team {id}")), "{message}");

    let s = on_server(&standin, &format!("{ns}/platform"))
        .await
        .unwrap();
    assert_eq!((s.id, s.name.as_str()), (id, "Platform"));
    assert_eq!(s.oidc.member_group.as_deref(), Some("platform-members"));
    assert_eq!(s.oidc.owner_group.as_deref(), Some("platform-owners"));
    let ladder = s.ladder.unwrap();
    assert_eq!(ladder.repeat_count, 2);
    assert_eq!(ladder.fallback_topic.as_deref(), Some("platform-oncall"));
    let secs: Vec<u64> = ladder.levels.iter().map(|l| l.timeout_seconds).collect();
    assert_eq!(secs, [300, 900]);
    assert_eq!(s.switches.len(), 1);
    let watchdog = &s.switches[0];
    assert_eq!(
        (
            watchdog.name.as_str(),
            watchdog.timeout_seconds,
            watchdog.severity.as_str()
        ),
        ("watchdog", 900, "critical")
    );
    for reason in [
        "TeamCreated",
        "OidcGroupsApplied",
        "EscalationApplied",
        "SwitchCreated",
    ] {
        wait_event(&client, &ns, "platform", reason).await;
    }

    // Rename; change one switch, add another.
    patch_spec(
        &api,
        "platform",
        json!({"displayName": "Platform Team", "deadmanSwitches": [
            {"name": "watchdog", "matcher": "alertname=Watchdog,cluster=prod", "timeout": "30m"},
            {"name": "beat", "matcher": "alertname=Beat", "timeout": "1m", "severity": "info"}]}),
    )
    .await;
    let t = wait_reason(&api, "platform", "Ready").await;
    assert_eq!(team_id(&t), id);
    let s = on_server(&standin, &format!("{ns}/platform"))
        .await
        .unwrap();
    assert_eq!(s.name, "Platform Team");
    let w = s.switches.iter().find(|x| x.name == "watchdog").unwrap();
    assert_eq!(
        (w.id, w.timeout_seconds),
        (watchdog.id, 1800),
        "updated in place"
    );
    let beat = s.switches.iter().find(|x| x.name == "beat").unwrap();
    assert_eq!((beat.timeout_seconds, beat.severity.as_str()), (60, "info"));
    for reason in ["TeamRenamed", "SwitchUpdated"] {
        wait_event(&client, &ns, "platform", reason).await;
    }

    // Remove a switch and the whole ladder.
    patch_spec(
        &api,
        "platform",
        json!({"escalation": null, "deadmanSwitches": [
            {"name": "beat", "matcher": "alertname=Beat", "timeout": "1m", "severity": "info"}]}),
    )
    .await;
    wait_reason(&api, "platform", "Ready").await;
    let s = on_server(&standin, &format!("{ns}/platform"))
        .await
        .unwrap();
    assert_eq!(s.ladder, None);
    let names: Vec<&str> = s.switches.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(names, ["beat"]);
    for reason in ["SwitchDeleted", "EscalationCleared"] {
        wait_event(&client, &ns, "platform", reason).await;
    }
}

#[tokio::test]
async fn drift_made_on_the_server_is_put_back() {
    let (_, client, ns, op) = setup("team-drift").await;
    let standin = server_with_standin(&client, &ns, "terdut", 19611).await;
    standin.admin().seed_users(["alice"]).await.unwrap();
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    create(&api, &team("platform", server(), "Platform", full_spec())).await;
    let id = team_id(&wait_reason(&api, "platform", "Ready").await);
    let external_id = format!("{ns}/platform");
    let want = on_server(&standin, &external_id).await.unwrap();

    // Someone changes everything directly on the server.
    let direct = server_client(&standin);
    direct.rename_team(id, "Hijacked").await.unwrap();
    direct
        .set_oidc_groups(id, &OidcGroups::default())
        .await
        .unwrap();
    direct
        .put_escalation(
            id,
            &Ladder {
                repeat_count: 0,
                fallback_topic: None,
                levels: vec![Level {
                    timeout_seconds: 60,
                    targets: vec![Target::Oncall],
                }],
            },
        )
        .await
        .unwrap();
    let w = &want.switches[0];
    let changed = SwitchSpec {
        name: w.name.clone(),
        matcher: w.matcher.clone(),
        timeout_seconds: 60,
        severity: w.severity.clone(),
    };
    direct.update_switch(id, w.id, &changed).await.unwrap();
    direct
        .create_switch(
            id,
            &SwitchSpec {
                name: "stray".into(),
                matcher: "a=b".into(),
                timeout_seconds: 60,
                severity: "warning".into(),
            },
        )
        .await
        .unwrap();

    let before = drift_corrections(op);
    resync(op, &ns, "platform").await;
    let healed = eventually("the server to match the spec again", WAIT, || async {
        let now = on_server(&standin, &external_id).await?;
        (now.name == want.name
            && now.oidc == want.oidc
            && now.ladder == want.ladder
            && now.switches.len() == 1
            && now.switches[0] == want.switches[0])
            .then_some(now)
    })
    .await;
    assert_eq!(healed.id, id, "the same team, put back");
    // Rename, OIDC groups, ladder, switch update, stray switch delete.
    assert!(
        drift_corrections(op) >= before + 5,
        "drift counted: {} -> {}",
        before,
        drift_corrections(op)
    );
    let note = wait_event(&client, &ns, "platform", "SwitchDeleted").await;
    assert!(
        note.contains("stray") && note.contains("changed on the server"),
        "{note}"
    );
    let t = wait_reason(&api, "platform", "Ready").await;
    assert_eq!(team_id(&t), id);
}

#[tokio::test]
async fn a_lost_status_heals_without_a_duplicate_team() {
    let (_, client, ns, op) = setup("team-lost").await;
    let standin = server_with_standin(&client, &ns, "terdut", 19616).await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    create(&api, &team("platform", server(), "Platform", json!({}))).await;
    let id = team_id(&wait_reason(&api, "platform", "Ready").await);
    let external_id = format!("{ns}/platform");
    let lose_it = || async {
        api.patch_status(
            "platform",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"teamID": null}})),
        )
        .await
        .unwrap();
    };
    let healed = || async {
        eventually("status.teamID to come back", WAIT, || async {
            api.get("platform")
                .await
                .unwrap()
                .status
                .and_then(|s| s.team_id)
        })
        .await
    };
    let posts = || async {
        standin
            .admin()
            .calls()
            .await
            .unwrap()
            .get("POST /api/v1/teams")
    };

    // While the actor runs, it still knows the id and writes it back.
    lose_it().await;
    assert_eq!(healed().await, id);
    assert_eq!(count_on_server(&standin, &external_id).await, 1);

    // As after an operator restart: a fresh actor knows only the object, and finds the team by
    // its external_id with the idempotent POST.
    let before = posts().await;
    op.tree
        .forget(ChildKind::Team, &ObjectKey::new(ns.clone(), "platform"))
        .await;
    lose_it().await;
    assert_eq!(
        healed().await,
        id,
        "found by external_id, not created again"
    );
    assert_eq!(count_on_server(&standin, &external_id).await, 1);
    assert_eq!(standin.admin().state().await.unwrap().teams.len(), 1);
    let after = posts().await;
    assert!(after <= before + 1, "at most one POST: {before} -> {after}");
    wait_reason(&api, "platform", "Ready").await;
}

#[tokio::test]
async fn a_team_deleted_behind_the_operators_back_is_recreated() {
    let (_, client, ns, op) = setup("team-gone").await;
    let standin = server_with_standin(&client, &ns, "terdut", 19617).await;
    standin.admin().seed_users(["alice"]).await.unwrap();
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    create(&api, &team("platform", server(), "Platform", full_spec())).await;
    let id = team_id(&wait_reason(&api, "platform", "Ready").await);

    server_client(&standin).delete_team(id).await.unwrap();
    resync(op, &ns, "platform").await;
    let new_id = eventually("a new teamID", WAIT, || async {
        let t = api.get("platform").await.unwrap();
        let new = t.status.as_ref().and_then(|s| s.team_id)?;
        (new != id && ready(&t)?.1 == "Ready").then_some(new)
    })
    .await;
    let external_id = format!("{ns}/platform");
    assert_eq!(count_on_server(&standin, &external_id).await, 1);
    let s = on_server(&standin, &external_id).await.unwrap();
    assert_eq!(s.id, new_id);
    assert_eq!(
        s.ladder.map(|l| l.levels.len()),
        Some(2),
        "ladder applied again"
    );
    assert_eq!(s.switches.len(), 1, "switch applied again");
    let note = wait_event(&client, &ns, "platform", "TeamRecreated").await;
    assert!(
        note.contains(&format!("team {id}")) && note.contains(&format!("team {new_id}")),
        "{note}"
    );
    let warning = events(&client, &ns, "platform")
        .await
        .into_iter()
        .any(|(ty, r, _)| r == "TeamRecreated" && ty == "Warning");
    assert!(warning, "TeamRecreated is a Warning");
}

#[tokio::test]
async fn a_paused_team_is_left_alone_until_resumed() {
    let (_, client, ns, op) = setup("team-pause").await;
    let standin = server_with_standin(&client, &ns, "terdut", 19618).await;
    let api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    create(&api, &team("platform", server(), "Platform", json!({}))).await;
    let ready_before = wait_reason(&api, "platform", "Ready").await;
    let id = team_id(&ready_before);
    let generation = ready_before.metadata.generation;
    let external_id = format!("{ns}/platform");

    let annotate = |value: serde_json::Value| {
        let api = api.clone();
        async move {
            api.patch(
                "platform",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {PAUSE_ANNOTATION: value}}})),
            )
            .await
            .unwrap();
        }
    };
    annotate(json!("true")).await;
    let paused = eventually("the Paused condition", WAIT, || async {
        let t = api.get("platform").await.unwrap();
        let s = t.status.clone()?;
        conditions::find(&s.conditions, PAUSED)
            .is_some_and(|c| c.status == "True")
            .then_some(t)
    })
    .await;
    assert_eq!(
        ready(&paused),
        ready(&ready_before),
        "Ready is kept as it was"
    );

    // Neither a spec change nor drift on the server is acted on while paused.
    patch_spec(&api, "platform", json!({"displayName": "Changed"})).await;
    server_client(&standin)
        .rename_team(id, "Renamed on the server")
        .await
        .unwrap();
    let calls_before = standin.admin().calls().await.unwrap().total();
    resync(op, &ns, "platform").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let t = api.get("platform").await.unwrap();
    assert_eq!(
        t.status.as_ref().unwrap().observed_generation,
        generation,
        "observedGeneration stays at what was reconciled"
    );
    assert_eq!(
        on_server(&standin, &external_id).await.unwrap().name,
        "Renamed on the server"
    );
    assert_eq!(
        standin.admin().calls().await.unwrap().total(),
        calls_before,
        "a paused team makes no calls"
    );

    annotate(serde_json::Value::Null).await;
    let t = wait_reason(&api, "platform", "Ready").await;
    assert!(conditions::find(&t.status.unwrap().conditions, PAUSED).is_none());
    assert_eq!(
        on_server(&standin, &external_id).await.unwrap().name,
        "Changed"
    );
}
