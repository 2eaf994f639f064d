//! This machine's node for a day-two run: started with the images of e2e/images/build.sh
//! (and any extra tars), with the clients a run needs.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use terdut_testenv::{NodeCluster, NodeOptions, tool};

use crate::checks::log;
use crate::cluster::helm::Helm;
use crate::kubectl::Kubectl;
use crate::reach::Reach;
use crate::run::{Mode, Run};

/// The node with every tar of `images` and of `extra` imported, and a run on it.
/// `registry`: an OCI registry beside the node as well (`just e2e-node` installs from it).
pub async fn start(
    mode: Mode,
    images: &Path,
    extra: &[PathBuf],
    registry: bool,
) -> anyhow::Result<(NodeCluster, Run, Helm)> {
    let mut tars = tars_in(images)?;
    for dir in extra {
        tars.extend(tars_in(dir)?);
    }
    let started = std::time::Instant::now();
    let cluster = NodeCluster::start(NodeOptions {
        images: tars,
        registry,
    })
    .await?;
    log(&format!(
        "node cluster up in {:.1?} (node logs: {})",
        started.elapsed(),
        cluster.dir().join("logs").display()
    ));
    let kubeconfig = cluster.control_plane().kubeconfig().to_path_buf();
    let kubectl = Kubectl {
        bin: tool("kubectl")?,
        kubeconfig: Some(kubeconfig.clone()),
    };
    let helm = Helm {
        bin: tool("helm")?,
        kubeconfig: Some(kubeconfig.clone()),
    };
    let config = Run::config_of(&kubeconfig).await?;
    let run = Run::new(mode, config, kubectl, Reach::Routed)?;
    Ok((cluster, run, helm))
}

/// Every `*.tar` in `dir`.
fn tars_in(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut tars: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {} (run e2e/images/build.sh)", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "tar"))
        .collect();
    tars.sort();
    Ok(tars)
}
