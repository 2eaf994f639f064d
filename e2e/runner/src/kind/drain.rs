//! A worker drained with `kubectl drain`, as a cluster operator does before maintenance, with
//! the operator's leader and the TerdutServer's pod on it:
//! 1. the drain evicts the leader (the chart's budget allows one of two replicas) and another
//!    replica, on the other worker, takes the Lease and reconciles a change made right after;
//! 2. it stops at the TerdutServer's PodDisruptionBudget (docs/examples: `minAvailable: 1`, one
//!    replica here): the server's pod keeps running on the cordoned node and the drain fails,
//!    saying why;
//! 3. once the server's owner loosens the budget (`minAvailable: 0`) the drain completes, the
//!    server's pod is rescheduled on the other worker, and the teams are unaffected: the server
//!    holds the same teams and integrations by id, the operator created nothing on the new pod,
//!    the webhook keys are the same and live, every CR stays Ready.
//!
//! The server's state must survive its pod's move for (3) to mean anything: shared_data.rs puts
//! the stand-in's data file on storage both workers reach, as the real server's database is.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use sha2::{Digest as _, Sha256};
use terdut_crds::v1alpha1::TerdutServer;
use terdut_standin::admin::AdminState;
use terdut_standin::wire::Id;

use super::{placement, shared_data};
use crate::checks::log;
use crate::cluster::leader;
use crate::examples::{SERVER, SERVER_NS, SOURCES, TEAMS};
use crate::golden;
use crate::run::Run;
use crate::wait;

/// What must not change on the server when its pod moves: every team and integration by id.
#[derive(Debug, PartialEq, Eq)]
struct Held {
    users: Vec<String>,
    /// The team's external id -> its id and its integrations' external ids -> ids.
    teams: BTreeMap<String, (Id, BTreeMap<String, Id>)>,
}

fn held(state: &AdminState) -> Held {
    let mut users = state.users.clone();
    users.sort();
    Held {
        users,
        teams: state
            .teams
            .iter()
            .map(|t| {
                let ints = t
                    .integrations
                    .iter()
                    .map(|i| (i.external_id.clone(), i.id))
                    .collect();
                (t.external_id.clone(), (t.id, ints))
            })
            .collect(),
    }
}

/// The SHA-256 of each alert source's webhook key (compared, never printed).
async fn webhook_keys(run: &Run) -> anyhow::Result<BTreeMap<String, String>> {
    let mut keys = BTreeMap::new();
    for (ns, name, _) in SOURCES {
        let (_, key) = golden::webhook(run, ns, name).await?;
        keys.insert(
            format!("{ns}/{name}"),
            hex::encode(Sha256::digest(key.as_bytes())),
        );
    }
    Ok(keys)
}

async fn keys_live(run: &Run) -> anyhow::Result<bool> {
    let admin = run.admin().await?;
    for (ns, name, _) in SOURCES {
        let (_, key) = golden::webhook(run, ns, name).await?;
        if !admin.key_check(&key).await?.live {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The server holds every team and alert source of the examples, each CR is Ready and each
/// webhook key is live: what the operator makes again on a server that starts empty.
async fn converged(run: &Run) -> anyhow::Result<bool> {
    let state = run.admin().await?.state().await?;
    let teams = TEAMS
        .iter()
        .all(|(ns, n, _)| state.team_by_external_id(&format!("{ns}/{n}")).is_some());
    let ints: usize = state.teams.iter().map(|t| t.integrations.len()).sum();
    if !teams || ints != SOURCES.len() {
        return Ok(false);
    }
    for (ns, n, _) in TEAMS {
        if !golden::team_ready(run, ns, n).await? {
            return Ok(false);
        }
    }
    for (ns, n, _) in SOURCES {
        if !golden::source_ready(run, ns, n).await? {
            return Ok(false);
        }
    }
    keys_live(run).await
}

fn set_min_available(run: &Run, n: i32) -> anyhow::Result<()> {
    shared_data::patch_server(
        run,
        &serde_json::json!({"spec": {"pod": {"disruptionBudget": {"minAvailable": n}}}}),
    )
}

fn drain_args(node: &str, timeout: &str) -> Vec<String> {
    [
        "drain",
        node,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        &format!("--timeout={timeout}"),
    ]
    .map(str::to_owned)
    .to_vec()
}

pub async fn check(run: &Run) -> anyhow::Result<()> {
    let leader = leader::holder(run).await?;
    let node = placement::operator(run)
        .await?
        .into_iter()
        .find(|p| p.pod == leader)
        .map(|p| p.node)
        .ok_or_else(|| anyhow::anyhow!("the leader {leader} is not among the operator's pods"))?;
    let other = placement::workers(run)
        .await?
        .into_iter()
        .find(|w| *w != node)
        .ok_or_else(|| anyhow::anyhow!("no second worker beside {node}"))?;
    let result = async {
        server_with_data_on(run, &node, &other).await?;
        drain(run, &leader, &node, &other).await
    }
    .await;
    restore(run, &node, &other);
    result
}

/// The server's pods given their data file on the shared volume, rolled onto `node` (the other
/// worker cordoned while they roll), and everything converged again on the new, empty pod.
async fn server_with_data_on(run: &Run, node: &str, other: &str) -> anyhow::Result<()> {
    log(&format!(
        "the stand-in's data onto storage both workers reach, its pod onto {node} (the leader's node; {other} cordoned while it rolls)"
    ));
    let before: Vec<String> = placement::server(run)
        .await?
        .into_iter()
        .map(|p| p.pod)
        .collect();
    run.kubectl.run(&["cordon", other])?;
    let rolled = async {
        shared_data::apply(run)?;
        wait::until(
            &format!("the server's pods rolled onto {node}"),
            Duration::from_secs(180),
            || async {
                let pods = placement::server(run).await?;
                let done = !pods.is_empty()
                    && pods
                        .iter()
                        .all(|p| p.ready && p.node == node && !before.contains(&p.pod));
                Ok(done.then_some(()))
            },
        )
        .await
    }
    .await;
    run.kubectl.run(&["uncordon", other])?;
    rolled?;
    run.wait_server().await?;
    run.admin().await?.seed_users(["alice"]).await?;
    // The operator cannot tell that a server lost its data; it would find out at each object's
    // resync (5 minutes). `kubectl terdut reconcile` starts the passes now, as a user would.
    reconcile_now(run)?;
    let again = wait::until(
        "teams, alert sources and live keys on the new pod",
        Duration::from_secs(180),
        || async { Ok(converged(run).await?.then_some(())) },
    )
    .await;
    run.checks.check_result(
        "with its data file on shared storage the server's new pod converges again",
        &again,
    );
    again
}

/// What `kubectl terdut reconcile` does to each team and alert source (docs/cli.md): a new
/// `terdut.ryuvia.com/reconcile-requested-at`, whose change starts the object's pass.
fn reconcile_now(run: &Run) -> anyhow::Result<()> {
    let at = format!(
        "terdut.ryuvia.com/reconcile-requested-at={}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_secs()
    );
    let objects = TEAMS.iter().map(|(ns, n, _)| (ns, "terdutteam", n)).chain(
        SOURCES
            .iter()
            .map(|(ns, n, _)| (ns, "terdutalertsource", n)),
    );
    for (ns, kind, name) in objects {
        run.kubectl
            .run(&["annotate", "--overwrite", "-n", ns, kind, name, &at])?;
    }
    Ok(())
}

async fn drain(run: &Run, leader: &str, node: &str, other: &str) -> anyhow::Result<()> {
    let c = &run.checks;
    let before = held(&run.admin().await?.state().await?);
    let keys_before = webhook_keys(run).await?;
    let server_pod = match placement::server(run).await?.as_slice() {
        [only] if only.node == node => only.pod.clone(),
        pods => anyhow::bail!("expected the server's one pod on {node}, found {pods:?}"),
    };
    let lease_secs = Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
        run.client.clone(),
        crate::cluster::helm::NAMESPACE,
    )
    .get("terdut-operator")
    .await?
    .spec
    .and_then(|s| s.lease_duration_seconds)
    .unwrap_or(15);

    // 1 and 2: the drain runs while the handover is watched; it stops at the server's budget.
    log(&format!(
        "kubectl drain {node}: the leader {leader} and the server's pod {server_pod} run there"
    ));
    let started = Instant::now();
    let drain = run
        .kubectl
        .command()
        .args(drain_args(node, "30s"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let handover = wait::until(
        "another replica holding the Lease",
        Duration::from_secs(u64::try_from(lease_secs)?),
        || async {
            Ok(leader::holder(run)
                .await
                .ok()
                .filter(|h| h != leader)
                .map(|h| (h, started.elapsed())))
        },
    )
    .await;
    let reconciled = match &handover {
        Ok(_) => {
            leader::rename(run, "platform-oncall", "platform", "Platform (drained)").await?;
            wait::until(
                "the change on the server",
                Duration::from_secs(u64::try_from(lease_secs)?),
                || async {
                    Ok(leader::server_shows(
                        run,
                        "platform-oncall",
                        "platform",
                        "Platform (drained)",
                    )
                    .await?
                    .then(|| started.elapsed()))
                },
            )
            .await
        }
        Err(e) => Err(anyhow::anyhow!("{e:#}")),
    };
    let new_node = match &handover {
        Ok((h, _)) => placement::operator(run)
            .await?
            .into_iter()
            .find(|p| p.pod == *h)
            .map(|p| p.node),
        Err(_) => None,
    };
    c.check(
        &format!(
            "the leader on the drained node hands over: a replica on {other} leads and reconciles a change made right after, within the lease duration ({lease_secs} s)"
        ),
        reconciled.is_ok() && new_node.as_deref() == Some(other),
        format!("handover: {handover:?}, on node {new_node:?}, change: {reconciled:?}"),
    );
    if let (Ok((h, led)), Ok(seen)) = (&handover, &reconciled) {
        log(&format!(
            "{h} leads {led:.1?} after the drain started; the change on the server after {seen:.1?}"
        ));
    }
    let out = tokio::task::spawn_blocking(move || drain.wait_with_output()).await??;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    c.check(
        "kubectl drain stops at the TerdutServer's PodDisruptionBudget and says so",
        !out.status.success() && text.contains("disruption budget") && text.contains(&server_pod),
        format!(
            "exit {:?}, output ends: {}",
            out.status.code(),
            tail(&text, 6)
        ),
    );
    let pods = placement::server(run).await?;
    c.check(
        &format!("the server's pod keeps running on the cordoned {node} while its budget holds"),
        pods.len() == 1 && pods[0].pod == server_pod && pods[0].ready,
        format!("{pods:?}"),
    );

    // 3: the owner loosens the budget; the drain completes and the pod moves.
    log("minAvailable 0 on the TerdutServer's disruption budget, then kubectl drain again");
    set_min_available(run, 0)?;
    let pdbs = Api::<PodDisruptionBudget>::namespaced(run.client.clone(), SERVER_NS);
    wait::until(
        "the server's PodDisruptionBudget allowing a disruption",
        Duration::from_secs(60),
        || async {
            let pdb = pdbs.get(SERVER).await?;
            let allowed = pdb.status.and_then(|s| s.disruptions_allowed).unwrap_or(0);
            Ok((allowed >= 1).then_some(()))
        },
    )
    .await?;
    let args = drain_args(node, "120s");
    let drained = run
        .kubectl
        .run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    c.check_result("with the budget loosened the drain completes", &drained);
    let moved = wait::until(
        &format!("the server's pod Ready on {other}"),
        Duration::from_secs(180),
        || async {
            let pods = placement::server(run).await?;
            let done =
                matches!(pods.as_slice(), [p] if p.ready && p.node == other && p.pod != server_pod);
            Ok(done.then_some(()))
        },
    )
    .await;
    c.check_result(
        &format!("the server's pod is rescheduled on {other} and turns Ready"),
        &moved,
    );
    moved?;
    wait::until(
        "the TerdutServer Ready",
        Duration::from_secs(120),
        || async { Ok(golden::server_ready(run).await?.then_some(())) },
    )
    .await?;
    run.wait_server().await?;

    let admin = run.admin().await?;
    let after = held(&admin.state().await?);
    c.check(
        "no team or integration was lost or recreated: the server holds the same ones, by id",
        after == before,
        format!("before {before:?}, after {after:?}"),
    );
    let calls = admin.calls().await?;
    let created =
        calls.get("POST /api/v1/teams") + calls.get("POST /api/v1/teams/{id}/integrations");
    c.check(
        "the operator created no team or integration on the rescheduled pod",
        created == 0,
        format!("calls on the new pod: {:?}", calls.0),
    );
    let same_keys = webhook_keys(run).await? == keys_before;
    let live = keys_live(run).await?;
    c.check(
        "the alert sources' webhook keys are unchanged and live",
        same_keys && live,
        format!("unchanged: {same_keys}, live: {live}"),
    );
    let ready = golden::wait_teams_and_sources(run, Duration::from_secs(60)).await;
    c.check_result("every TerdutTeam and TerdutAlertSource stays Ready", &ready);
    let server_ready = Api::<TerdutServer>::namespaced(run.client.clone(), SERVER_NS)
        .get(SERVER)
        .await
        .map(|s| golden::is_ready(s.status.as_ref().map(|s| &s.conditions)))?;
    c.check(
        "the TerdutServer is Ready after the drain",
        server_ready,
        "not Ready",
    );
    Ok(())
}

/// The nodes schedulable, the budget and the team's name as the examples have them, the shared
/// volume on its way out; a failure is logged, the scenario's teardown goes on.
fn restore(run: &Run, node: &str, other: &str) {
    let steps: [(&str, anyhow::Result<()>); 4] = [
        (
            "uncordon",
            run.kubectl.run(&["uncordon", node, other]).map(drop),
        ),
        ("minAvailable 1", set_min_available(run, 1)),
        (
            "the team's name",
            run.kubectl
                .run(&[
                    "patch",
                    "terdutteam",
                    "platform",
                    "-n",
                    "platform-oncall",
                    "--type=merge",
                    "-p",
                    r#"{"spec":{"displayName":"Platform"}}"#,
                ])
                .map(drop),
        ),
        ("the shared volume", shared_data::delete(run)),
    ];
    for (what, r) in steps {
        if let Err(e) = r {
            log(&format!("restoring {what} after the drain: {e:#}"));
        }
    }
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use terdut_standin::admin::{AdminIntegration, AdminTeam};
    use terdut_standin::wire::{Kind, Oidc};

    fn team(id: Id, ext: &str, ints: &[(Id, &str)]) -> AdminTeam {
        AdminTeam {
            id,
            name: "n".into(),
            external_id: ext.into(),
            oidc: Oidc::default(),
            open_incidents: 0,
            ladder: None,
            switches: vec![],
            integrations: ints
                .iter()
                .map(|(id, ext)| AdminIntegration {
                    id: *id,
                    kind: Kind::Generic,
                    name: "i".into(),
                    external_id: (*ext).into(),
                    ingested: 0,
                })
                .collect(),
        }
    }

    #[test]
    fn a_team_made_again_is_not_the_same_team() {
        let state = |id| AdminState {
            users: vec!["alice".into()],
            teams: vec![team(id, "ns/a", &[(7, "ns/s")])],
        };
        assert_eq!(held(&state(1)), held(&state(1)));
        assert_ne!(held(&state(1)), held(&state(2)));
        let lost = AdminState {
            users: vec!["alice".into()],
            teams: vec![team(1, "ns/a", &[])],
        };
        assert_ne!(held(&state(1)), held(&lost));
    }
}
