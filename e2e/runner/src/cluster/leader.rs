//! Leader election in pods. Deleting the leader pod: another replica takes the Lease and
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

pub(super) async fn operator_pods(run: &Run) -> anyhow::Result<Vec<String>> {
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
pub async fn rename(run: &Run, ns: &str, team: &str, display: &str) -> anyhow::Result<()> {
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
pub async fn server_shows(run: &Run, ns: &str, team: &str, display: &str) -> anyhow::Result<bool> {
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
    // The standby usually wins, but the Deployment's replacement for the deleted pod is a
    // candidate too and sometimes polls first: either is a correct handover.
    let standby = operator_pods(run)
        .await?
        .into_iter()
        .find(|p| *p != old)
        .ok_or_else(|| anyhow::anyhow!("no second replica"))?;
    // The old leader's last words (its shutdown and the Lease release) are gone with its pod,
    // so they are streamed while it stops and shown if the handover is late.
    let last_words = LogStream::follow(run, &old);
    log(&format!(
        "deleting the leader pod {old} (standby {standby})"
    ));
    let started = Instant::now();
    run.kubectl
        .run(&["delete", "pod", "-n", NAMESPACE, &old, "--wait=false"])?;
    rename(run, "platform-oncall", "platform", "Platform SRE").await?;
    let limit = Duration::from_secs(u64::try_from(lease_secs)?);
    let led = std::cell::RefCell::new(None::<(String, Duration)>);
    let took = wait::until("another replica leading and reconciling", limit, || async {
        let now = holder(run).await.ok().filter(|h| *h != old);
        if let Some(h) = &now
            && led.borrow().is_none()
        {
            *led.borrow_mut() = Some((h.clone(), started.elapsed()));
        }
        let done = now.is_some()
            && server_shows(run, "platform-oncall", "platform", "Platform SRE").await?;
        Ok(done.then(|| started.elapsed()))
    })
    .await;
    let led = led.into_inner();
    let detail = match (&took, &led) {
        (Ok(_), _) => String::new(),
        (Err(e), Some((by, at))) => format!(
            "{e:#}; {by} held the Lease after {at:.1?} but the rename had not reached the server"
        ),
        (Err(e), None) => format!(
            "{e:#}; the Lease was still {:?}",
            holder(run).await.unwrap_or_else(|e| format!("{e:#}"))
        ),
    };
    run.checks.check(
        &format!(
            "another replica takes the Lease and reconciles a change made right after, within the lease duration ({lease_secs} s)"
        ),
        took.is_ok(),
        detail,
    );
    match took {
        Ok(t) => log(&format!(
            "leader {old} deleted; {} leading and the change on the server after {t:.1?}",
            led.map(|(by, at)| format!("{by} (the Lease after {at:.1?})"))
                .unwrap_or_default()
        )),
        Err(_) => {
            println!(
                "--- {old} (the deleted leader), its last lines\n{}",
                last_words.tail(60)
            );
            let pods = run
                .kubectl
                .run(&["get", "pods", "-n", NAMESPACE, "-o", "wide"])
                .unwrap_or_else(|e| format!("{e:#}"));
            println!("--- the operator's pods now\n{pods}");
            for pod in operator_pods(run).await.unwrap_or_default() {
                let lines = run
                    .kubectl
                    .run(&["logs", "-n", NAMESPACE, &pod, "--tail=60"])
                    .unwrap_or_else(|e| format!("{e:#}"));
                println!("--- {pod}, its last lines\n{lines}");
            }
        }
    }
    super::deployment_available(run, NAMESPACE, RELEASE).await
}

/// `kubectl logs -f` of one pod, collected in the background until the pod's container ends.
struct LogStream {
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl LogStream {
    fn follow(run: &Run, pod: &str) -> Self {
        use std::io::BufRead as _;
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let child = run
            .kubectl
            .command()
            .args(["logs", "-f", "-n", NAMESPACE, pod, "--tail=20"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn();
        match child {
            Ok(mut child) => {
                let sink = lines.clone();
                let out = child.stdout.take();
                std::thread::spawn(move || {
                    if let Some(out) = out {
                        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                            sink.lock().unwrap_or_else(|p| p.into_inner()).push(line);
                        }
                    }
                    let _ = child.wait();
                });
            }
            Err(e) => lines
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(format!("kubectl logs -f {pod}: {e}")),
        }
        Self { lines }
    }

    fn tail(&self, n: usize) -> String {
        let lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
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
