//! Hostile terdut-servers cannot fill the operator's memory with their answers, however many
//! there are (docs/security.md "A broken or hostile server costs little"): each answers every
//! call with half a MiB that stays open, 64 calls at a time, and what the operator holds of
//! all of them stays within the process's budget, one server's within its share, while a
//! healthy server's calls go through. Against the stand-in through the operator's own client
//! (the Kubernetes side plays no part in it).

use std::time::Duration;

use terdut_actors::api::{AnswerBudget, ApiError, ClientConfig, OperatorKey, TerdutClient};
use terdut_standin::{Config, FaultRule, Handle};

const MIB: usize = 1024 * 1024;
/// Each hostile answer: under the per-answer limit (1 MiB), so only a budget bounds them.
const ANSWER: u64 = 512 * 1024;
/// Calls each client has in flight (its default bound).
const CALLS: usize = ClientConfig::DEFAULT_MAX_IN_FLIGHT;

async fn hostile() -> Handle {
    let standin = terdut_standin::spawn(Config::for_tests()).await.unwrap();
    standin
        .admin()
        .add_fault(
            &FaultRule::new("GET /api/v1/teams/{id}/deadman-switches")
                .oversize_bytes(ANSWER)
                .oversize_stall_ms(1_500),
        )
        .await
        .unwrap();
    standin
}

fn client(standin: &Handle, budget: &AnswerBudget) -> TerdutClient {
    TerdutClient::new(
        ClientConfig::new(standin.base_url(), OperatorKey::new(standin.operator_key()))
            .request_timeout(Duration::from_secs(4))
            .answer_budget(budget.clone()),
    )
    .unwrap()
}

/// `CALLS` calls at once on `client`; how many answered at all (any error counts, a hang does
/// not).
async fn flood(client: TerdutClient) -> usize {
    let calls: Vec<_> = (0..CALLS)
        .map(|_| {
            let c = client.clone();
            tokio::spawn(async move { c.list_switches(1).await })
        })
        .collect();
    let mut answered = 0;
    for call in calls {
        let result = call.await.unwrap();
        // Spaces are no JSON, and a call that waited past its timeout for the budget is
        // transient: either way it ended.
        assert!(
            matches!(
                result,
                Err(ApiError::Decode { .. } | ApiError::Transient { .. })
            ),
            "{result:?}"
        );
        answered += 1;
    }
    answered
}

#[tokio::test]
async fn six_hostile_servers_hold_no_more_than_the_process_budget() {
    // 6 servers x 64 calls x 512 KiB would be 192 MiB; the budget is 8 MiB, 2 MiB a server.
    let budget = AnswerBudget::new(8 * MIB, 2 * MIB);
    let mut servers = vec![];
    for _ in 0..6 {
        servers.push(hostile().await);
    }
    let floods: Vec<_> = servers
        .iter()
        .map(|s| tokio::spawn(flood(client(s, &budget))))
        .collect();
    for f in floods {
        let answered = tokio::time::timeout(Duration::from_secs(120), f)
            .await
            .expect("every call ends")
            .unwrap();
        assert_eq!(answered, CALLS);
    }
    assert!(
        budget.peak() <= 8 * MIB,
        "held {} MiB of answers at once",
        budget.peak() / MIB
    );
    assert!(
        budget.peak() >= 6 * MIB,
        "the flood reached the budget ({} KiB): the test measures something",
        budget.peak() / 1024
    );
    assert_eq!(budget.held(), 0, "every answer gave its part back");
}

#[tokio::test]
async fn a_hostile_server_waits_on_its_own_share_while_a_healthy_one_reads_on() {
    let budget = AnswerBudget::new(8 * MIB, 2 * MIB);
    let bad = hostile().await;
    let good = terdut_standin::spawn(Config::for_tests()).await.unwrap();
    let flooding = tokio::spawn(flood(client(&bad, &budget)));
    // While the hostile server's 64 answers hold (and wait for) its 2 MiB share, the healthy
    // server's calls each find room.
    let healthy = client(&good, &budget);
    while budget.held() < MIB {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for i in 0..20 {
        let name = format!("healthy-{i}");
        let team = healthy
            .create_team(&name, &format!("ns/{name}"))
            .await
            .expect("the healthy server's answers are read")
            .into_team();
        assert!(healthy.list_switches(team.id).await.unwrap().is_empty());
    }
    assert!(
        budget.held() <= 2 * MIB + 64 * 1024,
        "the hostile server holds its share only"
    );
    assert_eq!(flooding.await.unwrap(), CALLS);
    assert!(budget.peak() <= 2 * MIB + 64 * 1024, "{}", budget.peak());
}
