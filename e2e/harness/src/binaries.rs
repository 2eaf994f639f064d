//! Where the pinned binaries are: `TERDUT_K8S_BIN`, else the cache `build.sh` fills.

use std::path::PathBuf;

use anyhow::bail;

/// Kubernetes version the cache is keyed by; keep in step with e2e/control-plane/build.sh.
pub const K8S_VERSION: &str = "v1.37.2";

/// The folder holding etcd, kube-apiserver, kube-controller-manager, kubectl, helm, promtool.
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("TERDUT_K8S_BIN") {
        return PathBuf::from(dir);
    }
    let cache = std::env::var_os("TERDUT_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()))
                        .join(".cache")
                })
                .join("terdut-operator")
        });
    cache.join(format!("k8s-{K8S_VERSION}")).join("bin")
}

/// The path of one tool, or an error telling the user how to build it. Tests fail rather
/// than skip when the control plane is missing: a skipped suite would hide everything.
pub fn tool(name: &str) -> anyhow::Result<PathBuf> {
    let path = bin_dir().join(name);
    if !path.is_file() {
        bail!(
            "{} is missing: run `just control-plane` (e2e/control-plane/build.sh) first",
            path.display()
        );
    }
    Ok(path)
}
