//! `local-cluster`: the test control plane as a long-running process, for `just demo`,
//! `just e2e-local` and `just chaos`. Starts etcd, kube-apiserver and kube-controller-manager on
//! loopback, installs the CRDs, writes the admin kubeconfig to the path given (default
//! `.tmp/kubeconfig`) and runs until interrupted; the processes stop with it.
//!
//! Restarting the kube-apiserver in place (`just chaos`): SIGUSR1 stops it gracefully
//! (SIGTERM), SIGUSR2 kills it (SIGKILL); either way it is started again with the same flags,
//! port, etcd data, certificate and keys. When it is ready again, `<kubeconfig>.restarts` holds
//! the number of completed restarts (written atomically), or `error: ...` when one failed.
//! The other end of this protocol is `terdut_testenv::local_cluster::LocalCluster`.

use std::path::Path;

use terdut_testenv::local_cluster::{restarts_file, write_atomic};
use terdut_testenv::{ControlPlane, StopMode};
use tokio::signal::unix::{SignalKind, signal};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| ".tmp/kubeconfig".into());
    // Handlers first: a signal that arrives during bring-up waits instead of killing us.
    // SIGUSR1 and SIGUSR2 as `local_cluster::signal_for` sends them.
    let mut graceful = signal(SignalKind::user_defined1())?;
    let mut kill = signal(SignalKind::user_defined2())?;
    let cp = ControlPlane::shared().await?;
    if let Some(parent) = std::path::Path::new(&out).parent() {
        std::fs::create_dir_all(parent)?;
    }
    let restarts_file = restarts_file(Path::new(&out));
    write_atomic(&restarts_file, "0\n")?;
    // Write to a temp name then rename, so a waiting script never reads half a file.
    let tmp = format!("{out}.partial");
    std::fs::copy(cp.kubeconfig(), &tmp)?;
    std::fs::rename(&tmp, &out)?;
    eprintln!(
        "control plane at {} (logs in {}); kubeconfig: {out}",
        cp.server,
        cp.dir().join("logs").display()
    );
    let mut restarts = 0u32;
    loop {
        let mode = tokio::select! {
            r = tokio::signal::ctrl_c() => { r?; break; }
            _ = graceful.recv() => StopMode::Graceful,
            _ = kill.recv() => StopMode::Kill,
        };
        match cp.restart_apiserver(mode).await {
            Ok(took) => {
                restarts += 1;
                eprintln!(
                    "kube-apiserver restart #{restarts} ({mode:?}): ready again after {took:.1?}"
                );
                write_atomic(&restarts_file, &format!("{restarts}\n"))?;
            }
            Err(e) => {
                eprintln!("kube-apiserver restart ({mode:?}) failed: {e:#}");
                write_atomic(&restarts_file, &format!("error: {e:#}\n"))?;
            }
        }
    }
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(&restarts_file);
    Ok(())
}
