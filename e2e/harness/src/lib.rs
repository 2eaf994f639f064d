//! A real Kubernetes control plane for tests: etcd, kube-apiserver and (optionally)
//! kube-controller-manager, started from the binaries `e2e/control-plane/build.sh` caches,
//! on loopback with free ports (docs/adr/0002-control-plane-harness.md).
//!
//! One control plane per test binary, shared by its tests; each test takes a namespace of its
//! own. The processes die with the test binary: a watchdog shell polls the test process and
//! kills them (and removes their data) when it is gone, since a `static` never runs `Drop`.
//!
//! ```no_run
//! # async fn t() -> anyhow::Result<()> {
//! let cp = terdut_testenv::ControlPlane::shared().await?;
//! let client = cp.client().await?;
//! let ns = cp.namespace(&client, "demo").await?;
//! # Ok(()) }
//! ```

pub mod audit;
mod binaries;
mod crds;
mod kubeconfig;
pub mod local_cluster;
mod node;
mod process;
pub mod rbac_audit;
mod restartable;
pub mod signal;
mod time_of_day;

pub use binaries::{bin_dir, tool};
pub use crds::install_crds;
pub use node::{
    CLUSTER_DOMAIN, Layout, NODE_NAME, NodeCluster, NodeComponent, NodeOptions, PAUSE_IMAGE,
    Registry,
};
pub use process::StopMode;
pub use restartable::Restartable;
pub use time_of_day::hms_utc;

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use tokio::sync::OnceCell;

/// A running control plane.
#[derive(Debug)]
pub struct ControlPlane {
    /// `https://127.0.0.1:<port>` of the kube-apiserver.
    pub server: String,
    kubeconfig: PathBuf,
    dir: PathBuf,
    apiserver: std::sync::Arc<process::Apiserver>,
    /// Every other process of this control plane (etcd, kube-controller-manager, ...).
    pids: std::sync::Mutex<Vec<u32>>,
}

static SHARED: OnceCell<ControlPlane> = OnceCell::const_new();

impl ControlPlane {
    /// The control plane of this test binary, started on first use with
    /// kube-controller-manager (garbage collection, namespace deletion, Deployments).
    pub async fn shared() -> anyhow::Result<&'static ControlPlane> {
        SHARED
            .get_or_try_init(|| async {
                let cp = process::start(process::Options {
                    controller_manager: true,
                    node: None,
                })
                .await?;
                let client = cp.client().await?;
                install_crds(&client, terdut_crds::v1alpha1::crds()).await?;
                Ok(cp)
            })
            .await
    }

    /// A fresh admin client (system:masters) bound to the calling test's runtime.
    pub async fn client(&self) -> anyhow::Result<Client> {
        kubeconfig::client(&self.kubeconfig).await
    }

    /// Path of the kubeconfig of the tests' operator identity: also `system:masters`, but its
    /// own user, whose requests the audit log records (see [`audit`]).
    pub fn operator_kubeconfig(&self) -> PathBuf {
        self.dir.join("operator.kubeconfig")
    }

    /// Path of an admin kubeconfig, for `kubectl` and for the operator binary.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// Scratch directory of this control plane (logs live in `logs/`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Restarts the kube-apiserver in place: stops it (`mode`), starts it again with the same
    /// flags (same port, same etcd and its data, same serving certificate and service-account
    /// keys, so existing kubeconfigs and tokens keep working) and waits until it is ready.
    /// Returns how long the apiserver was unavailable to new requests, about.
    pub async fn restart_apiserver(&self, mode: StopMode) -> anyhow::Result<std::time::Duration> {
        let started = std::time::Instant::now();
        let dir = self.dir.clone();
        // The stop-and-wait blocks (up to 10 s for a graceful stop): off the runtime's workers.
        let apiserver = self.apiserver.clone();
        tokio::task::spawn_blocking(move || apiserver.restart(mode, &dir))
            .await
            .context("the restart task")??;
        let log = self.dir.join("logs").join("kube-apiserver.log");
        process::wait_apiserver(&self.kubeconfig, &log).await?;
        Ok(started.elapsed())
    }

    /// Stops every process of this control plane and removes its folder (the watchdog does
    /// the same once this process is gone). Idempotent.
    pub fn stop(&self) {
        self.apiserver.stop();
        let pids = self.pids.lock().map(|p| p.clone()).unwrap_or_default();
        for pid in &pids {
            let _ = std::process::Command::new("kill")
                .arg(pid.to_string())
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    /// Makes `pid` stop with this control plane.
    pub(crate) fn adopt(&self, pid: u32) -> anyhow::Result<()> {
        if let Ok(mut pids) = self.pids.lock() {
            pids.push(pid);
        }
        process::watchdog(&[pid], &self.dir)
    }

    /// Creates a namespace `<prefix>-<random>` and returns its name.
    pub async fn namespace(&self, client: &Client, prefix: &str) -> anyhow::Result<String> {
        let name = format!("{prefix}-{}", process::random_suffix());
        self.create_namespace(client, &name, Default::default())
            .await?;
        Ok(name)
    }

    /// Creates a namespace with the given name and labels.
    pub async fn create_namespace(
        &self,
        client: &Client,
        name: &str,
        labels: std::collections::BTreeMap<String, String>,
    ) -> anyhow::Result<()> {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                labels: Some(labels),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .with_context(|| format!("creating namespace {name}"))?;
        Ok(())
    }

    /// Runs the pinned kubectl against this control plane; returns (success, stdout+stderr).
    pub fn kubectl(&self, args: &[&str]) -> anyhow::Result<(bool, String)> {
        let out = std::process::Command::new(tool("kubectl")?)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .output()
            .context("running kubectl")?;
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        Ok((out.status.success(), text))
    }
}
