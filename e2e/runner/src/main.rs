//! `terdut-e2e`: the end-to-end scenario of docs/examples, one runner for every place it runs
//! (docs/node.md):
//! - `local` (`just e2e-local`, `just demo`): the local control plane from e2e/local-up.sh,
//!   the operator as a process, the stand-in started here; needs KUBECONFIG, KUBECTL,
//!   STANDIN_BIN, optionally METRICS_URL, PROMTOOL, STANDIN_LOG.
//! - `node` (`just e2e-node`): this machine's single-node cluster, started here; the images
//!   from e2e/images/build.sh (`--images`), the release from `just release` (`--release`),
//!   installed from a registry beside the node.
//! - `kind` (`just e2e`): the current kubectl context, a kind cluster with the images loaded.
//! - `node-chaos` (`just node-chaos`): the faults a node has, on this machine's node
//!   (docs/reliability.md "Node faults"); the images as for `node`.
//! - `upgrade` (`just upgrade-check`): `helm upgrade` from the previous version's chart and
//!   image to this tree's, and `helm rollback`, on this machine's node (docs/upgrade.md).
//!
//! `--keep` stops after the golden path and leaves everything running until Ctrl-C.
//! Exit status 1 when any check failed.

mod checks;
mod cluster;
mod examples;
mod fleet;
mod golden;
mod kind;
mod kubectl;
mod local;
mod metrics;
mod node;
mod nodechaos;
mod reach;
mod run;
mod tracking;
mod upgrade;
mod wait;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use crate::checks::log;
use crate::kubectl::Kubectl;
use crate::reach::Reach;
use crate::run::{Mode, Run};

#[derive(Debug, Parser)]
#[command(about = "The e2e scenario of docs/examples (local, node or kind)")]
struct Args {
    #[arg(value_enum)]
    mode: Mode,
    /// Stop after the golden path and keep everything running until Ctrl-C. `KEEP=1` as
    /// `just kind-demo` and `just node-demo` set it (clap's plain bool takes only true/false).
    #[arg(long, env = "KEEP", action = clap::ArgAction::SetTrue,
          value_parser = clap::builder::BoolishValueParser::new())]
    keep: bool,
    /// node: the folder of image tars (e2e/images/build.sh prints it).
    #[arg(long, env = "IMAGES_DIR")]
    images: Option<PathBuf>,
    /// node: a release `just release` wrote (target/dist/VERSION): pushed to a registry beside
    /// the node and installed from it. Without it, the chart folder with the imported image.
    #[arg(long, env = "RELEASE_DIR")]
    release: Option<PathBuf>,
    #[command(flatten)]
    node_chaos: nodechaos::plan::NodeChaosArgs,
    #[command(flatten)]
    upgrade: upgrade::UpgradeArgs,
    #[command(flatten)]
    deploy: fleet::install::DeployArgs,
}

async fn local(keep: bool) -> anyhow::Result<u32> {
    let kubectl = Kubectl {
        bin: std::env::var_os("KUBECTL").map_or_else(|| "kubectl".into(), PathBuf::from),
        kubeconfig: std::env::var_os("KUBECONFIG").map(PathBuf::from),
    };
    let metrics = std::env::var("METRICS_URL").ok();
    let reach = Reach::Loopback {
        server: std::env::var("ADMIN_URL").unwrap_or_else(|_| "http://127.0.0.1:8080".into()),
        metrics: metrics.clone().unwrap_or_default(),
    };
    let mut run = Run::new(Mode::Local, kube::Config::infer().await?, kubectl, reach)?;
    run.promtool = std::env::var_os("PROMTOOL")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from);
    let standin = local::scenario(&run, metrics.as_deref(), keep).await?;
    println!("e2e: {}", run.checks.summary());
    if let Some(standin) = standin {
        // The demo keeps the stand-in running until the caller stops this process.
        standin.wait();
    }
    Ok(run.checks.failed())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let result = match args.mode {
        Mode::Local => local(args.keep).await,
        Mode::Node => {
            let dir = args.images.unwrap_or_else(|| PathBuf::from(".tmp/images"));
            node::main(&dir, args.release.as_deref(), args.keep).await
        }
        Mode::Kind => kind::main(args.keep).await,
        Mode::NodeChaos => {
            let dir = args.images.unwrap_or_else(|| PathBuf::from(".tmp/images"));
            nodechaos::main(&dir, &args.node_chaos, &args.deploy).await
        }
        Mode::Upgrade => {
            let dir = args.images.unwrap_or_else(|| PathBuf::from(".tmp/images"));
            upgrade::main(&dir, &args.upgrade, &args.deploy).await
        }
    };
    match result {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            log(&format!("ERROR {e:#}"));
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory as _;
        super::Args::command().debug_assert();
    }
}
