//! The golden path of docs/examples, shared by every mode: teams and alert sources applied,
//! Ready, and verified on the server (teams, ladder, switch, integrations, live webhook keys);
//! at the end everything deleted and the server verified empty.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::DeleteParams;
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutServer, TerdutTeam};

use crate::checks::log;
use crate::examples::{self, NAMESPACES, SERVER, SERVER_NS, SOURCES, TEAMS};
use crate::run::Run;
use crate::wait;

/// 00-namespaces.yaml; in a cluster every namespace enforces the restricted Pod Security
/// level, as a careful user's would.
pub fn apply_namespaces(run: &Run, restricted: bool) -> anyhow::Result<()> {
    run.kubectl
        .apply_file(&examples::file("00-namespaces.yaml"))?;
    if restricted {
        for ns in NAMESPACES {
            label_restricted(run, ns)?;
        }
    }
    Ok(())
}

pub fn label_restricted(run: &Run, ns: &str) -> anyhow::Result<()> {
    run.kubectl
        .run(&[
            "label",
            "--overwrite",
            "namespace",
            ns,
            "pod-security.kubernetes.io/enforce=restricted",
        ])
        .map(drop)
}

/// Whether the object's Ready condition is True for its current generation.
pub fn is_ready(
    conditions: Option<&Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>,
) -> bool {
    conditions.is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub async fn team_ready(run: &Run, ns: &str, name: &str) -> anyhow::Result<bool> {
    let t = Api::<TerdutTeam>::namespaced(run.client.clone(), ns)
        .get(name)
        .await?;
    Ok(is_ready(t.status.as_ref().map(|s| &s.conditions)))
}

pub async fn source_ready(run: &Run, ns: &str, name: &str) -> anyhow::Result<bool> {
    let s = Api::<TerdutAlertSource>::namespaced(run.client.clone(), ns)
        .get(name)
        .await?;
    Ok(is_ready(s.status.as_ref().map(|s| &s.conditions)))
}

pub async fn server_ready(run: &Run) -> anyhow::Result<bool> {
    let s = Api::<TerdutServer>::namespaced(run.client.clone(), SERVER_NS)
        .get(SERVER)
        .await?;
    Ok(is_ready(s.status.as_ref().map(|s| &s.conditions)))
}

/// The TerdutServer's Deployment and Service exist, applied by the operator and owned by the
/// TerdutServer (docs/design.md §6): without a node no pod runs, but the objects must be there.
pub async fn check_workload_applied(run: &Run) -> anyhow::Result<()> {
    use k8s_openapi::api::{apps::v1::Deployment, core::v1::Service};
    log("checking the TerdutServer's Deployment and Service");
    let owned_by_server =
        |refs: Option<&Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>>| {
            refs.is_some_and(|r| {
                r.iter()
                    .any(|o| o.kind == "TerdutServer" && o.name == SERVER)
            })
        };
    let deployments = Api::<Deployment>::namespaced(run.client.clone(), SERVER_NS);
    let services = Api::<Service>::namespaced(run.client.clone(), SERVER_NS);
    wait::until(
        "the TerdutServer's Deployment and Service",
        Duration::from_secs(60),
        || async {
            let d = deployments.get_opt(SERVER).await?;
            let s = services.get_opt(SERVER).await?;
            let both = d.is_some_and(|d| owned_by_server(d.metadata.owner_references.as_ref()))
                && s.is_some_and(|s| owned_by_server(s.metadata.owner_references.as_ref()));
            Ok(both.then_some(()))
        },
    )
    .await
}

/// Seeds the user the platform ladder pages, applies the teams and alert sources and waits
/// until each is Ready.
pub async fn converge(run: &Run) -> anyhow::Result<()> {
    // The ladder pages alice: she must exist on the server (UnknownUser until then).
    run.admin().await?.seed_users(["alice"]).await?;
    log("applying the TerdutTeams and TerdutAlertSources");
    run.kubectl
        .apply_file(&examples::file("20-terdutteams.yaml"))?;
    run.kubectl
        .apply_file(&examples::file("30-terdutalertsources.yaml"))?;
    wait_teams_and_sources(run, Duration::from_secs(120)).await?;
    log(&format!(
        "everything is Ready:\n{}",
        run.kubectl.run(&["get", "terdut", "-A"])?
    ));
    Ok(())
}

pub async fn wait_teams_and_sources(run: &Run, limit: Duration) -> anyhow::Result<()> {
    for (ns, name, _) in TEAMS {
        wait::until(&format!("TerdutTeam {ns}/{name} Ready"), limit, || async {
            Ok(team_ready(run, ns, name).await?.then_some(()))
        })
        .await?;
    }
    for (ns, name, _) in SOURCES {
        wait::until(
            &format!("TerdutAlertSource {ns}/{name} Ready"),
            limit,
            || async { Ok(source_ready(run, ns, name).await?.then_some(())) },
        )
        .await?;
    }
    Ok(())
}

/// The key in an alert source's webhook Secret (never printed).
pub async fn webhook(run: &Run, ns: &str, source: &str) -> anyhow::Result<(String, String)> {
    let secret = Api::<Secret>::namespaced(run.client.clone(), ns)
        .get(&examples::webhook_secret(source))
        .await?;
    let data = secret.data.unwrap_or_default();
    let field = |k: &str| {
        data.get(k)
            .map(|v| String::from_utf8_lossy(&v.0).into_owned())
            .ok_or_else(|| anyhow::anyhow!("webhook Secret of {ns}/{source} has no {k}"))
    };
    Ok((field("url")?, field("key")?))
}

/// What the server holds, checked against the examples.
pub async fn verify_on_server(run: &Run) -> anyhow::Result<()> {
    let admin = run.admin().await?;
    let state = admin.state().await?;
    let c = &run.checks;
    for (ns, name, display) in TEAMS {
        let t = state.team_by_external_id(&format!("{ns}/{name}"));
        c.check(
            &format!("team {ns}/{name} exists on the server"),
            t.is_some_and(|t| t.name == display),
            format!("{t:?}"),
        );
    }
    let platform = state.team_by_external_id("platform-oncall/platform");
    let levels: Vec<u64> = platform
        .and_then(|t| t.ladder.as_ref())
        .map(|l| l.levels.iter().map(|l| l.timeout_seconds).collect())
        .unwrap_or_default();
    c.check(
        "platform ladder has 2 levels, 300s then 900s",
        levels == [300, 900],
        format!("{levels:?}"),
    );
    let switches: Vec<&str> = platform
        .map(|t| t.switches.iter().map(|s| s.name.as_str()).collect())
        .unwrap_or_default();
    c.check(
        "platform switch watchdog exists",
        switches == ["watchdog"],
        format!("{switches:?}"),
    );
    for (ns, name, team) in SOURCES {
        let ints: Vec<_> = state
            .team_by_external_id(&format!("{ns}/{team}"))
            .map(|t| {
                t.integrations
                    .iter()
                    .filter(|i| i.external_id == format!("{ns}/{name}"))
                    .collect()
            })
            .unwrap_or_default();
        c.check(
            &format!("integration {ns}/{name} exists once"),
            ints.len() == 1,
            format!("{ints:?}"),
        );
        let live = match webhook(run, ns, name).await {
            Ok((_, key)) => admin.key_check(&key).await.map(|k| k.live).unwrap_or(false),
            Err(_) => false,
        };
        c.check(
            &format!("webhook Secret of {ns}/{name} holds a live key"),
            live,
            "the key is not live on the server",
        );
    }
    Ok(())
}

/// Deletes the alert sources and teams (their finalizers delete them on the server) and waits
/// until they are gone.
pub fn delete_teams_and_sources(run: &Run) -> anyhow::Result<()> {
    log("deleting the alert sources and teams");
    for f in ["30-terdutalertsources.yaml", "20-terdutteams.yaml"] {
        run.kubectl.run(&[
            "delete",
            "--wait=true",
            "--timeout=120s",
            "-f",
            &examples::file(f).display().to_string(),
        ])?;
    }
    Ok(())
}

pub async fn check_server_empty(run: &Run) -> anyhow::Result<()> {
    let state = run.admin().await?.state().await?;
    run.checks.check(
        "no team left on the server",
        state.teams.is_empty(),
        format!("{:?}", state.teams),
    );
    Ok(())
}

/// Deletes the TerdutServer and waits until it is gone (its Deployment, Service and key
/// Secret go with it by owner references).
pub async fn delete_server(run: &Run) -> anyhow::Result<()> {
    log("deleting the TerdutServer");
    let api = Api::<TerdutServer>::namespaced(run.client.clone(), SERVER_NS);
    match api.delete(SERVER, &DeleteParams::foreground()).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    wait::until(
        "the TerdutServer gone",
        Duration::from_secs(120),
        || async {
            match api.get_opt(SERVER).await? {
                None => Ok(Some(())),
                Some(_) => Ok(None),
            }
        },
    )
    .await
}
