//! Rotating the operator key by hand (docs/design.md §6): deleting the key Secret makes the
//! operator write a new one and roll the server's pods (the pod template carries the key's hash);
//! the new pods accept the new key and refuse the old one. The stand-in keeps its state in its
//! process, so the new pods start empty: the teams and alert sources then converge again on
//! them, which is what a server that lost its data would need from the operator.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::Api;
use kube::api::{DeleteParams, ListParams};

use crate::checks::log;
use crate::examples::{self, SERVER, SERVER_NS, SOURCES, TEAMS};
use crate::golden;
use crate::run::Run;
use crate::wait;

fn server_pods_selector() -> String {
    format!("app.kubernetes.io/name=terdut-server,app.kubernetes.io/instance={SERVER}")
}

async fn token(secrets: &Api<Secret>) -> anyhow::Result<Option<String>> {
    Ok(secrets
        .get_opt(&examples::operator_key_secret())
        .await?
        .and_then(|s| s.data)
        .and_then(|d| {
            d.get("token")
                .map(|v| String::from_utf8_lossy(&v.0).into_owned())
        }))
}

/// Names of the server's pods, and whether each is Ready and not terminating.
async fn server_pods(run: &Run) -> anyhow::Result<Vec<(String, bool)>> {
    let pods = Api::<Pod>::namespaced(run.client.clone(), SERVER_NS)
        .list(&ListParams::default().labels(&server_pods_selector()))
        .await?;
    Ok(pods
        .items
        .into_iter()
        .map(|p| {
            let ready = p.metadata.deletion_timestamp.is_none()
                && p.status
                    .and_then(|s| s.conditions)
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            (p.metadata.name.unwrap_or_default(), ready)
        })
        .collect())
}

/// `GET /api/v1/whoami` with `key` through the Service: the answer's status. A connection
/// that fails is tried again, as a client would: for a moment after the old pod is gone
/// kube-proxy may still send a new connection to its address.
async fn whoami(run: &Run, key: &str) -> anyhow::Result<u16> {
    let url = format!("{}/api/v1/whoami", run.server_url().await?);
    wait::until("an answer to whoami", Duration::from_secs(30), || async {
        let status = run.http.get(&url).bearer_auth(key).send().await?.status();
        Ok(Some(status.as_u16()))
    })
    .await
}

pub async fn check(run: &Run) -> anyhow::Result<()> {
    let secrets = Api::<Secret>::namespaced(run.client.clone(), SERVER_NS);
    let old = token(&secrets)
        .await?
        .ok_or_else(|| anyhow::anyhow!("no operator key"))?;
    let old_pods: BTreeSet<String> = server_pods(run)
        .await?
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    log("deleting the operator key Secret");
    secrets
        .delete(&examples::operator_key_secret(), &DeleteParams::default())
        .await?;
    let limit = Duration::from_secs(180);
    let new = wait::until("a new operator key", limit, || async {
        Ok(token(&secrets).await?.filter(|t| *t != old))
    })
    .await?;
    let rolled = wait::until("the server's pods rolled", limit, || async {
        let pods = server_pods(run).await?;
        let done = !pods.is_empty()
            && pods
                .iter()
                .all(|(n, ready)| *ready && !old_pods.contains(n));
        Ok(done.then_some(()))
    })
    .await;
    run.checks
        .check_result("deleting the key Secret rolls the server's pods", &rolled);
    rolled?;
    run.wait_server().await?;
    let (with_new, with_old) = (whoami(run, &new).await?, whoami(run, &old).await?);
    run.checks.check(
        "the new pods accept the new key and refuse the old one",
        with_new == 200 && with_old == 401,
        format!("new key: HTTP {with_new}, old key: HTTP {with_old}"),
    );
    // The new pods hold nothing yet: alice, then everything the operator recreates.
    run.admin().await?.seed_users(["alice"]).await?;
    let again = wait::until("teams and integrations on the new pods", limit, || async {
        let state = run.admin().await?.state().await?;
        let teams = TEAMS
            .iter()
            .all(|(ns, n, _)| state.team_by_external_id(&format!("{ns}/{n}")).is_some());
        let ints: usize = state.teams.iter().map(|t| t.integrations.len()).sum();
        Ok((teams && ints == SOURCES.len()).then_some(()))
    })
    .await;
    let again = match again {
        Ok(()) => golden::wait_teams_and_sources(run, limit).await,
        Err(e) => Err(e),
    };
    run.checks.check_result(
        "after the roll the teams and alert sources converge again on the new pods",
        &again,
    );
    Ok(())
}
