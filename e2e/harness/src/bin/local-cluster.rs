//! `local-cluster`: the test control plane as a long-running process, for `just demo` and
//! `just e2e-local`. Starts etcd, kube-apiserver and kube-controller-manager on loopback,
//! installs the CRDs, writes the admin kubeconfig to the path given (default
//! `.tmp/kubeconfig`) and runs until interrupted; the processes stop with it.

use terdut_testenv::ControlPlane;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| ".tmp/kubeconfig".into());
    let cp = ControlPlane::shared().await?;
    if let Some(parent) = std::path::Path::new(&out).parent() {
        std::fs::create_dir_all(parent)?;
    }
    // Write to a temp name then rename, so a waiting script never reads half a file.
    let tmp = format!("{out}.partial");
    std::fs::copy(cp.kubeconfig(), &tmp)?;
    std::fs::rename(&tmp, &out)?;
    eprintln!(
        "control plane at {} (logs in {}); kubeconfig: {out}",
        cp.server,
        cp.dir().join("logs").display()
    );
    tokio::signal::ctrl_c().await?;
    let _ = std::fs::remove_file(&out);
    Ok(())
}
