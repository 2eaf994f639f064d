//! The restart protocol of the `local-cluster` binary (`src/bin/local-cluster.rs`), both
//! ends: SIGUSR1 restarts its kube-apiserver gracefully (SIGTERM), SIGUSR2 kills it (SIGKILL);
//! either way it comes back with the same flags, port, etcd data, certificate and keys
//! ([`ControlPlane::restart_apiserver`](crate::ControlPlane::restart_apiserver)). When it is
//! ready again, `<kubeconfig>.restarts` holds the number of completed restarts, or
//! `error: ...` when one failed. `just chaos` drives it (docs/reliability.md).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

use crate::StopMode;
use crate::signal::{Signal, send};

/// `<kubeconfig>.restarts`.
pub fn restarts_file(kubeconfig: &Path) -> PathBuf {
    let mut name = kubeconfig.as_os_str().to_owned();
    name.push(".restarts");
    PathBuf::from(name)
}

/// The signal that asks `local-cluster` for a restart of this kind.
pub fn signal_for(mode: StopMode) -> Signal {
    match mode {
        StopMode::Graceful => Signal::Usr1,
        StopMode::Kill => Signal::Usr2,
    }
}

/// Writes `text` through a temporary name, so a reader never sees half of it.
pub fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// A running `local-cluster`, seen from another process.
#[derive(Debug, Clone)]
pub struct LocalCluster {
    pid: u32,
    restarts: PathBuf,
}

impl LocalCluster {
    /// `pid` of the `local-cluster` process that wrote `kubeconfig`.
    pub fn new(pid: u32, kubeconfig: &Path) -> Self {
        Self {
            pid,
            restarts: restarts_file(kubeconfig),
        }
    }

    /// Restarts completed so far; an error when the last one failed.
    pub fn completed(&self) -> anyhow::Result<u32> {
        let text = std::fs::read_to_string(&self.restarts)
            .with_context(|| format!("reading {}", self.restarts.display()))?;
        let text = text.trim();
        if text.starts_with("error") {
            bail!("local-cluster: {text}");
        }
        if text.is_empty() {
            return Ok(0);
        }
        text.parse()
            .with_context(|| format!("{}: {text:?}", self.restarts.display()))
    }

    /// Restarts the kube-apiserver and waits (at most `limit`) until it is ready again;
    /// returns the time from the signal to ready.
    pub async fn restart(&self, mode: StopMode, limit: Duration) -> anyhow::Result<Duration> {
        let before = self.completed()?;
        let started = Instant::now();
        send(self.pid, signal_for(mode))?;
        while started.elapsed() < limit {
            if self.completed()? > before {
                return Ok(started.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("the kube-apiserver was not ready {limit:?} after a restart")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_file_sits_next_to_the_kubeconfig() {
        assert_eq!(
            restarts_file(Path::new("/w/kubeconfig")),
            PathBuf::from("/w/kubeconfig.restarts")
        );
    }

    #[test]
    fn a_failed_restart_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let kc = dir.path().join("kubeconfig");
        let lc = LocalCluster::new(1, &kc);
        write_atomic(&restarts_file(&kc), "2\n").unwrap();
        assert_eq!(lc.completed().unwrap(), 2);
        write_atomic(&restarts_file(&kc), "error: boom\n").unwrap();
        assert!(lc.completed().is_err());
    }
}
