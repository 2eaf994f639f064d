//! An upgrade to the operator's records (ADR 0013, docs/upgrade.md "Team records and instance
//! claims"), against the real kube-apiserver and the stand-in: TerdutTeams that exist before
//! the records do are judged once by the rule they were made under, then by their record
//! alone. The team the earlier operator made for an object stays that object's, silently; a
//! team a reused name finds stays `Adopted` at every later pass, however often the object is
//! reconciled. This binary runs its own operator, with a selector and a namespace of its own
//! for the records, made only after the objects, as on the first start of the new version.

mod common;
mod teams;

use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use terdut_actors::api::TeamCreate;
use terdut_actors::key::ObjectKey;
use terdut_actors::operator::RunningOperator;
use terdut_actors::routing::ChildKind;
use terdut_actors::team::guard::Record;
use terdut_actors::team::records::TeamRecords;
use terdut_crds::v1alpha1::TerdutTeam;
use terdut_testenv::ControlPlane;

use common::{eventually, standin_for, start_operator, test_config, test_server};
use teams::{WAIT, team, team_id, wait_reason};

const PORT: u16 = 19830;
const SELECTOR: &str = "terdut.ryuvia.com/shard";
const FINALIZER: &str = "terdut.ryuvia.com/team-cleanup";

fn selected<K: kube::Resource>(mut object: K) -> K {
    object
        .meta_mut()
        .labels
        .get_or_insert_with(Default::default)
        .insert(SELECTOR.into(), "upgrade".into());
    object
}

/// The sum of `reconciles_total{kind="team"}`.
fn team_passes(registry: &prometheus_client::registry::Registry) -> f64 {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    text.lines()
        .filter(|l| l.starts_with("reconciles_total{kind=\"team\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Runs one more pass of the team `name` and waits until it has ended.
async fn one_more_pass(
    op: &RunningOperator,
    registry: &prometheus_client::registry::Registry,
    ns: &str,
    name: &str,
) {
    let before = team_passes(registry);
    let key = ObjectKey::new(ns, name);
    op.tree
        .host_of(ChildKind::Team, &key)
        .await
        .expect("the team is known to the operator")
        .resync(ChildKind::Team, key);
    eventually("one more team pass", WAIT, || async {
        (team_passes(registry) > before).then_some(())
    })
    .await;
}

#[tokio::test]
async fn teams_older_than_the_records_keep_the_judgement_of_the_rule_they_were_made_under() {
    let cp = ControlPlane::shared().await.unwrap();
    let client = cp.client().await.unwrap();
    let ns = cp.namespace(&client, "upgrade").await.unwrap();
    let teams_api: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    // The objects of before the upgrade, not selected yet (so nothing judges them early):
    // `kept` carries the finalizer the earlier operator added before it made its team;
    // `reused` reuses the name of an object whose team was left on the server.
    let mut kept = team("kept", json!({"name": "terdut"}), "Kept", json!({}));
    kept.metadata.finalizers = Some(vec![FINALIZER.into()]);
    teams_api
        .create(&PostParams::default(), &kept)
        .await
        .unwrap();
    let reused = team(
        "reused",
        json!({"name": "terdut"}),
        "Reused EU",
        json!({"oidc": {"memberGroup": "newcomers"}}),
    );
    teams_api
        .create(&PostParams::default(), &reused)
        .await
        .unwrap();
    // Creation times have a resolution of a second: the records come strictly later.
    tokio::time::sleep(Duration::from_millis(1100)).await;

    // The new version starts; its records live in a namespace of its own.
    let records_ns = format!("{ns}-operator");
    let (op, registry) = start_operator(&cp.operator_kubeconfig(), {
        let mut c = test_config();
        c.selector = Some(format!("{SELECTOR}=upgrade"));
        c.operator_namespace = records_ns.clone();
        c.instance_name = "upgrade".into();
        // The actor keeps what it knows between the passes this test runs.
        c.passivate_after = None;
        c
    })
    .await;
    let servers: Api<terdut_crds::v1alpha1::TerdutServer> = Api::namespaced(client.clone(), &ns);
    servers
        .create(
            &PostParams::default(),
            &selected(test_server("terdut", i32::from(PORT))),
        )
        .await
        .unwrap();
    let standin = standin_for(&client, &ns, "terdut", PORT).await;
    // What the earlier operator left on the server: `kept`'s team (its id in the object's
    // status), and the team of an earlier object named `reused`.
    let server = teams::server_client(&standin);
    let made = |t: TeamCreate| match t {
        TeamCreate::Created(t) => t.id,
        TeamCreate::Found(t) => panic!("already there: {t:?}"),
    };
    let kept_id = made(
        server
            .create_team("Kept", &format!("{ns}/kept"))
            .await
            .unwrap(),
    );
    let reused_id = made(
        server
            .create_team("Reused", &format!("{ns}/reused"))
            .await
            .unwrap(),
    );
    teams_api
        .patch_status(
            "kept",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"teamID": kept_id}})),
        )
        .await
        .unwrap();
    standin.admin().reset_calls().await.unwrap();
    for name in ["kept", "reused"] {
        let t = teams_api.get(name).await.unwrap();
        teams_api
            .replace(name, &PostParams::default(), &selected(t))
            .await
            .unwrap();
    }

    // `kept`: its own team, silently, and recorded as made from now on.
    let k = wait_reason(&teams_api, "kept", "Ready").await;
    assert_eq!(team_id(&k), kept_id);
    let records = TeamRecords::new(client.clone(), &records_ns);
    assert_eq!(records.get(&k.uid().unwrap()).await.unwrap(), Record::Made);
    // `reused`: Adopted, its judgement recorded.
    let r = wait_reason(&teams_api, "reused", "Adopted").await;
    let (_, _, message) = teams::ready(&r).unwrap();
    assert!(message.contains(&format!("team {reused_id}")), "{message}");
    let reused_uid = r.uid().unwrap();
    eventually("the decline recorded", WAIT, || async {
        let fresh = TeamRecords::new(client.clone(), &records_ns);
        (fresh.get(&reused_uid).await.ok()? == Record::Declined).then_some(())
    })
    .await;

    // Every later pass keeps that judgement: nothing a later pass sees (the actor's memory of
    // the declined team, a finalizer added in between) makes it this object's.
    for _ in 0..3 {
        one_more_pass(&op, &registry, &ns, "reused").await;
    }
    let mut r = teams_api.get("reused").await.unwrap();
    r.metadata.finalizers = Some(vec![FINALIZER.into()]);
    teams_api
        .replace("reused", &PostParams::default(), &r)
        .await
        .unwrap();
    for _ in 0..2 {
        one_more_pass(&op, &registry, &ns, "reused").await;
    }
    let r = wait_reason(&teams_api, "reused", "Adopted").await;
    assert_eq!(r.status.as_ref().unwrap().team_id, None);
    let fresh = TeamRecords::new(client.clone(), &records_ns);
    assert_eq!(fresh.get(&reused_uid).await.unwrap(), Record::Declined);
    // What the server got: no write to either team (no rename, no OIDC group), and no second
    // team.
    let calls = standin.admin().calls().await.unwrap();
    assert_eq!(
        calls.writes(),
        calls.get("POST /api/v1/teams"),
        "only create-or-find calls: {calls:?}"
    );
    let old = teams::on_server(&standin, &format!("{ns}/reused"))
        .await
        .unwrap();
    assert_eq!((old.id, old.name.as_str()), (reused_id, "Reused"));
    assert_eq!(old.oidc.member_group, None);
    let events = teams::events(&client, &ns, "kept").await;
    assert!(!events.iter().any(|(_, r, _)| r == "Adopted"), "{events:?}");
    op.stop().await;
}
