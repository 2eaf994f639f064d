//! Liveness in pods (docs/reliability.md "Liveness", docs/adr/0017-liveness.md): the leader's
//! routing writer is stalled through the test hooks; its `/healthz` fails naming it, the
//! kubelet restarts that container after the chart's liveness probe failed three times, and a
//! change made meanwhile reaches the server (the standby takes over when the stalled leader
//! is stopped).
//!
//! The hooks are on only from here on: `helm upgrade --reuse-values` adds `--test-hooks`
//! (a rolling update). They listen on the pod's loopback only, reached with `kubectl
//! port-forward`.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Api;
use kube::api::ListParams;

use super::helm::{HOOKS_PORT, Helm, NAMESPACE, RELEASE, test_hooks_sets};
use super::leader;
use crate::checks::log;
use crate::reach::Forwards;
use crate::run::Run;
use crate::wait;

/// The HTTP port (the chart's).
const HTTP_PORT: u16 = 8080;

/// The operator container's restarts in pod `name`.
async fn restarts(run: &Run, name: &str) -> anyhow::Result<i32> {
    let pod = Api::<Pod>::namespaced(run.client.clone(), NAMESPACE)
        .get(name)
        .await?;
    Ok(pod
        .status
        .and_then(|s| s.container_statuses)
        .and_then(|c| c.into_iter().find(|c| c.name == "operator"))
        .map_or(0, |c| c.restart_count))
}

/// The kubelet's word that the container of `pod` failed its liveness probe, if it said so.
async fn liveness_event(run: &Run, pod: &str) -> anyhow::Result<Option<String>> {
    let events = Api::<Event>::namespaced(run.client.clone(), NAMESPACE)
        .list(&ListParams::default().fields(&format!("involvedObject.name={pod}")))
        .await?;
    Ok(events
        .items
        .into_iter()
        .filter_map(|e| e.message)
        .find(|m| m.contains("failed liveness probe")))
}

pub async fn check(run: &Run, helm: &Helm) -> anyhow::Result<()> {
    let started = Instant::now();
    log("liveness: helm upgrade with --test-hooks (a rolling update)");
    let hooks_on = test_hooks_sets();
    helm.run(&[
        "upgrade",
        RELEASE,
        &super::helm::chart().display().to_string(),
        "--namespace",
        NAMESPACE,
        "--reuse-values",
        "--set",
        &hooks_on[0],
        "--set",
        &hooks_on[1],
        "--wait",
        "--timeout",
        "3m",
    ])?;
    super::deployment_available(run, NAMESPACE, RELEASE).await?;
    let rolled = started.elapsed();
    // A leader that is not on its way out: right after the roll, the Lease may still name a
    // pod of the old template that is terminating (no hooks port; a CI run's port-forward to
    // it was refused), until a new pod takes the Lease over.
    let old = wait::until("a leader", Duration::from_secs(60), || async {
        let Ok(holder) = leader::holder(run).await else {
            return Ok(None);
        };
        Ok(leader::operator_pods(run)
            .await?
            .contains(&holder)
            .then_some(holder))
    })
    .await?;
    let before = restarts(run, &old).await?;
    let healthz = format!(
        "{}/healthz",
        run.reach
            .pod(&run.client, NAMESPACE, &old, HTTP_PORT)
            .await?
    );

    let forwards = Forwards::new(run.kubectl.clone());
    let hooks = forwards
        .url(&format!("pod/{old}"), NAMESPACE, HOOKS_PORT)
        .await?;
    let armed = run
        .http
        .post(format!("{hooks}/fault?part=writer&fault=stall"))
        .send()
        .await?;
    anyhow::ensure!(
        armed.status().is_success(),
        "arming the stall: {} {}",
        armed.status(),
        armed.text().await.unwrap_or_default()
    );
    let stalled_at = Instant::now();
    log(&format!("liveness: the writer of leader {old} stalled"));

    // A change while it stalls: the stalled leader cannot route it.
    leader::rename(run, "platform-oncall", "platform", "Platform, live").await?;
    let failing = wait::until(
        "the stalled leader's /healthz failing",
        Duration::from_secs(90),
        || async {
            let resp = run.http.get(&healthz).send().await?;
            let status = resp.status().as_u16();
            let body = resp.text().await?;
            Ok((status == 503).then_some(body))
        },
    )
    .await;
    let failing_after = stalled_at.elapsed();
    run.checks.check(
        "a stalled routing writer fails the leader's /healthz, by name",
        failing.as_ref().is_ok_and(|b| {
            b.starts_with("not live: writer\n") && b.contains("writer: up, stalled")
        }),
        match &failing {
            Ok(b) => b.clone(),
            Err(e) => format!("{e:#}"),
        },
    );

    let restarted = wait::until(
        "the kubelet restarting the stalled leader's container",
        Duration::from_secs(120),
        || async {
            let now = restarts(run, &old).await?;
            Ok((now > before).then_some(()))
        },
    )
    .await;
    let restarted_after = stalled_at.elapsed();
    let event = liveness_event(run, &old).await?;
    run.checks.check(
        "the kubelet restarts the container whose liveness probe fails (its probe's Event says so)",
        restarted.is_ok() && event.is_some(),
        match (&restarted, &event) {
            (Err(e), _) => format!("{e:#}"),
            (Ok(()), None) => "restarted, but no Event says the liveness probe failed".into(),
            (Ok(()), Some(_)) => String::new(),
        },
    );

    let landed = wait::until(
        "the change made during the stall on the server",
        Duration::from_secs(120),
        || async {
            Ok(
                leader::server_shows(run, "platform-oncall", "platform", "Platform, live")
                    .await?
                    .then_some(()),
            )
        },
    )
    .await;
    let landed_after = stalled_at.elapsed();
    run.checks.check_result(
        "a change made while the leader stalled reaches the server",
        &landed,
    );
    super::deployment_available(run, NAMESPACE, RELEASE).await?;
    // Leave the examples' names for what follows.
    leader::rename(run, "platform-oncall", "platform", "Platform").await?;
    log(&format!(
        "liveness: rolled with hooks in {rolled:.0?}; from the stall: /healthz 503 after \
         {failing_after:.0?}, container restarted after {restarted_after:.0?}, the change on \
         the server after {landed_after:.0?}; {:.0?} in all",
        started.elapsed()
    ));
    Ok(())
}
