//! A TerdutServer that never answers beside a healthy one (docs/security.md, "bounded and
//! fair"): 200 teams on the black hole hold at most their lane's share of the pass limit, so a
//! team on the healthy server converges as if the black hole were not there. With one FIFO
//! queue it waited behind every hung pass (200 x the 3 s request timeout over 2 slots: minutes).

mod common;
mod teams;

use kube::api::{Api, PostParams};
use serde_json::json;
use terdut_crds::v1alpha1::TerdutTeam;
use terdut_standin::FaultRule;

use common::{server_with_standin, setup};
use teams::{team, wait_reason};

const BLACK_HOLE_PORT: u16 = 19720;
const HEALTHY_PORT: u16 = 19721;
const HUNG_TEAMS: usize = 200;

#[tokio::test]
async fn two_hundred_teams_on_a_black_holed_server_do_not_hold_up_a_healthy_one() {
    let (cp, client, hole_ns, op) = setup("fair-hole").await;
    let healthy_ns = cp.namespace(&client, "fair-healthy").await.unwrap();
    let hole = server_with_standin(&client, &hole_ns, "terdut", BLACK_HOLE_PORT).await;
    // Every call waits an hour: longer than any request timeout, i.e. never answered.
    hole.admin()
        .add_fault(&FaultRule::new("*").latency_ms(3_600_000))
        .await
        .unwrap();
    let hung: Api<TerdutTeam> = Api::namespaced(client.clone(), &hole_ns);
    for i in 0..HUNG_TEAMS {
        hung.create(
            &PostParams::default(),
            &team(
                &format!("t{i}"),
                json!({"name": "terdut"}),
                &format!("T{i}"),
                json!({}),
            ),
        )
        .await
        .unwrap();
    }
    // The hung passes have the slots they can get before the healthy team appears.
    let running = || {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &op.registry).unwrap();
        text.lines()
            .find(|l| l.starts_with("reconcile_passes_running{kind=\"team\"}"))
            .and_then(|l| l.split_whitespace().last()?.parse::<i64>().ok())
            .unwrap_or(0)
    };
    common::eventually("a hung pass holding a slot", teams::WAIT, || async {
        (running() >= 1).then_some(())
    })
    .await;

    let _healthy_server = server_with_standin(&client, &healthy_ns, "terdut", HEALTHY_PORT).await;
    let healthy: Api<TerdutTeam> = Api::namespaced(client.clone(), &healthy_ns);
    healthy
        .create(
            &PostParams::default(),
            &team("payments", json!({"name": "terdut"}), "Payments", json!({})),
        )
        .await
        .unwrap();
    // Within the tests' usual wait, where behind one queue it would take minutes.
    let t = wait_reason(&healthy, "payments", "Ready").await;
    assert!(t.status.unwrap().team_id.is_some());
    // The black hole's teams are still waiting, each with the reason.
    let one = hung.get("t0").await.unwrap();
    let (status, reason, _) = teams::ready(&one).unwrap_or_default();
    assert_ne!(status, "True", "{reason}");
}
