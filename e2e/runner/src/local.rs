//! `just e2e-local`: the local control plane has no kubelet, so the TerdutServer's Deployment
//! never gets a pod; the stand-in runs as a process on loopback instead, with the operator key
//! the operator generated, and the operator (started by e2e/local-up.sh) reaches it at
//! `http://127.0.0.1:{servicePort}`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use crate::checks::log;
use crate::examples::{self, SERVER_NS, SERVER_PORT};
use crate::run::Run;
use crate::{golden, metrics, wait};

/// The stand-in process; stopped on drop.
#[derive(Debug)]
pub struct Standin(Child);

impl Drop for Standin {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Standin {
    /// For `--keep`: runs until this process is stopped.
    pub fn wait(mut self) {
        let _ = self.0.wait();
    }
}

async fn start_standin(run: &Run) -> anyhow::Result<Standin> {
    let secrets = Api::<Secret>::namespaced(run.client.clone(), SERVER_NS);
    let secret = wait::until(
        "the operator key Secret",
        Duration::from_secs(120),
        || async { Ok(secrets.get_opt(&examples::operator_key_secret()).await?) },
    )
    .await?;
    let key = secret
        .data
        .and_then(|d| {
            d.get("token")
                .map(|v| String::from_utf8_lossy(&v.0).into_owned())
        })
        .context("the operator key Secret has no token")?;
    let bin = PathBuf::from(std::env::var("STANDIN_BIN").context("STANDIN_BIN is not set")?);
    let log_file = match std::env::var_os("STANDIN_LOG") {
        Some(p) => Stdio::from(std::fs::File::create(p)?),
        None => Stdio::null(),
    };
    log(&format!(
        "starting the stand-in terdut-server on 127.0.0.1:{SERVER_PORT} with the operator's key"
    ));
    let child = Command::new(bin)
        .args(["--listen", &format!("127.0.0.1:{SERVER_PORT}"), "--admin"])
        .env("TERDUT_OPERATOR_KEY", key)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file)
        .spawn()
        .context("starting the stand-in")?;
    // A signal ends this process without running `Drop`: the script that started it stops
    // the stand-in by this id (e2e/local-up.sh), never by a pattern that would also match
    // someone else's stand-in on this port.
    if let Some(path) = std::env::var_os("STANDIN_PID_FILE") {
        std::fs::write(path, child.id().to_string()).context("writing the stand-in's pid")?;
    }
    let standin = Standin(child);
    let url = run.server_url().await?;
    wait::until("the stand-in", Duration::from_secs(30), || async {
        Ok(run
            .http
            .get(format!("{url}/healthz"))
            .send()
            .await?
            .status()
            .is_success()
            .then_some(()))
    })
    .await?;
    Ok(standin)
}

/// The scenario; with `keep`, returns the stand-in still running after convergence.
pub async fn scenario(
    run: &Run,
    metrics_url: Option<&str>,
    keep: bool,
) -> anyhow::Result<Option<Standin>> {
    log("applying namespaces, the database password Secret and the TerdutServer");
    golden::apply_namespaces(run, false)?;
    run.kubectl
        .apply_file(&examples::file("05-database-password.yaml"))?;
    run.kubectl
        .apply_file(&examples::file("10-terdutserver.yaml"))?;
    let standin = start_standin(run).await?;
    golden::check_workload_applied(run).await?;
    golden::converge(run).await?;
    golden::verify_on_server(run).await?;
    crate::tracking::check(run).await?;
    if let Some(url) = metrics_url {
        metrics::check(run, url).await?;
    }
    if keep {
        return Ok(Some(standin));
    }
    golden::delete_teams_and_sources(run)?;
    golden::delete_server(run).await?;
    golden::check_server_empty(run).await?;
    Ok(None)
}
