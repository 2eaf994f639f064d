//! Leader election in pods. Deleting the leader pod: the other replica takes the Lease and
//! reconciles a change made right after, within the Lease's duration. `kubectl rollout
//! restart` of the operator: changes made while it rolls all reach the server.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use terdut_crds::v1alpha1::TerdutTeam;

use super::helm::{NAMESPACE, RELEASE};
use crate::checks::log;
use crate::run::Run;
use crate::wait;

/// The chart's `leaderElection.leaseName`.
const LEASE: &str = "terdut-operator";

async fn lease(run: &Run) -> anyhow::Result<Lease> {
    Ok(Api::<Lease>::namespaced(run.client.clone(), NAMESPACE)
        .get(LEASE)
        .await?)
}

/// The pod holding the Lease (its holderIdentity is the pod's name).
pub async fn holder(run: &Run) -> anyhow::Result<String> {
    lease(run)
        .await?
        .spec
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
        .ok_or_else(|| anyhow::anyhow!("nobody holds the Lease"))
}

async fn operator_pods(run: &Run) -> anyhow::Result<Vec<String>> {
    Ok(Api::<Pod>::namespaced(run.client.clone(), NAMESPACE)
        .list(&ListParams::default().labels(&format!(
            "app.kubernetes.io/name=terdut-operator,app.kubernetes.io/instance={RELEASE}"
        )))
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.metadata.name)
        .collect())
}

/// Sets a team's displayName (a merge patch, as `kubectl patch` would).
async fn rename(run: &Run, ns: &str, team: &str, display: &str) -> anyhow::Result<()> {
    Api::<TerdutTeam>::namespaced(run.client.clone(), ns)
        .patch(
            team,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"displayName": display}})),
        )
        .await?;
    Ok(())
}

/// Whether the server shows the team `ns/team` under `display`.
async fn server_shows(run: &Run, ns: &str, team: &str, display: &str) -> anyhow::Result<bool> {
    let state = run.admin().await?.state().await?;
    Ok(state
        .team_by_external_id(&format!("{ns}/{team}"))
        .is_some_and(|t| t.name == display))
}

pub async fn failover(run: &Run) -> anyhow::Result<()> {
    let lease_secs = lease(run)
        .await?
        .spec
        .and_then(|s| s.lease_duration_seconds)
        .unwrap_or(15);
    let old = holder(run).await?;
    let other = operator_pods(run)
        .await?
        .into_iter()
        .find(|p| *p != old)
        .ok_or_else(|| anyhow::anyhow!("no second replica"))?;
    log(&format!("deleting the leader pod {old}"));
    let started = Instant::now();
    run.kubectl
        .run(&["delete", "pod", "-n", NAMESPACE, &old, "--wait=false"])?;
    rename(run, "platform-oncall", "platform", "Platform SRE").await?;
    let limit = Duration::from_secs(u64::try_from(lease_secs)?);
    let took = wait::until(
        "the other replica leading and reconciling",
        limit,
        || async {
            let leads = holder(run).await.is_ok_and(|h| h == other);
            let done =
                leads && server_shows(run, "platform-oncall", "platform", "Platform SRE").await?;
            Ok(done.then(|| started.elapsed()))
        },
    )
    .await;
    run.checks.check(
        &format!(
            "the other replica takes the Lease and reconciles a change made right after, within the lease duration ({lease_secs} s)"
        ),
        took.is_ok(),
        took.as_ref().err().map(|e| format!("{e:#}")).unwrap_or_default(),
    );
    if let Ok(t) = took {
        log(&format!(
            "leader {old} deleted; {other} leading and the change on the server after {t:.1?}"
        ));
    }
    super::deployment_available(run, NAMESPACE, RELEASE).await
}

/// Renames the two teams in turn while the restart rolls, until it is done, then checks the
/// server shows the last name of each.
pub async fn rollout_restart(run: &Run) -> anyhow::Result<()> {
    let before = operator_pods(run).await?;
    log("kubectl rollout restart of the operator, renaming teams while it rolls");
    run.kubectl.run(&[
        "rollout",
        "restart",
        "-n",
        NAMESPACE,
        &format!("deployment/{RELEASE}"),
    ])?;
    let mut last = [String::new(), String::new()];
    let teams = [
        ("platform-oncall", "platform"),
        ("team-payments", "payments"),
    ];
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut n = 0usize;
    loop {
        let i = n % 2;
        let name = format!("{} r{n}", if i == 0 { "Platform" } else { "Payments" });
        rename(run, teams[i].0, teams[i].1, &name).await?;
        last[i] = name;
        n += 1;
        let pods = operator_pods(run).await?;
        let rolled = pods.iter().all(|p| !before.contains(p)) && wait_available_now(run).await?;
        if (rolled && n >= 2) || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let landed = wait::until(
        "the renames on the server",
        Duration::from_secs(120),
        || async {
            let a = server_shows(run, teams[0].0, teams[0].1, &last[0]).await?;
            let b = server_shows(run, teams[1].0, teams[1].1, &last[1]).await?;
            Ok((a && b).then_some(()))
        },
    )
    .await;
    run.checks.check(
        &format!("kubectl rollout restart loses no update ({n} renames while it rolled)"),
        landed.is_ok(),
        landed
            .as_ref()
            .err()
            .map(|e| format!("{e:#}"))
            .unwrap_or_default(),
    );
    // Leave the examples' names for what follows.
    rename(run, teams[0].0, teams[0].1, "Platform").await?;
    rename(run, teams[1].0, teams[1].1, "Payments").await
}

async fn wait_available_now(run: &Run) -> anyhow::Result<bool> {
    let d =
        Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(run.client.clone(), NAMESPACE)
            .get(RELEASE)
            .await?;
    let want = d.spec.replicas.unwrap_or(1);
    let s = d.status.unwrap_or_default();
    Ok(s.ready_replicas == Some(want)
        && s.updated_replicas == Some(want)
        && s.replicas == Some(want))
}
