//! An OCI registry beside the node (docs/node.md "Registry"): the CNCF distribution registry
//! (e2e/control-plane/release-tools.sh builds it) on the host end of the node's link, serving
//! TLS with a certificate of the node's CA, so the host pushes to it (crane, `helm push`) and
//! the node's containerd pulls from it as from any registry: by name, with the CA its
//! `hosts.toml` names ([`hosts_toml`]). Its storage lives in the node's folder and goes with it.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::binaries::bin_dir;

/// The registry's port on the host end of the link.
pub const REGISTRY_PORT: u16 = 5443;

/// A running registry: where it is and the CA its certificate chains to.
#[derive(Debug, Clone)]
pub struct Registry {
    /// `host:port`, as image references and `oci://` URLs name it.
    pub host: String,
    /// The node CA's certificate (PEM), which clients pass as their CA file.
    pub ca_file: PathBuf,
}

/// The registry's configuration: filesystem storage under `w`, TLS on `addr`.
pub fn config(w: &Path, addr: Ipv4Addr, pki: &Path) -> String {
    let (w, pki) = (w.display(), pki.display());
    format!(
        r#"version: 0.1
log:
  level: info
  formatter: text
storage:
  filesystem:
    rootdirectory: {w}/state/registry
  delete:
    enabled: true
http:
  addr: {addr}:{REGISTRY_PORT}
  tls:
    certificate: {pki}/registry.crt
    key: {pki}/registry.key
"#
    )
}

/// containerd's `hosts.toml` for the registry (certs.d/<host>/hosts.toml): pull and resolve
/// from it directly, trusting the node's CA. The same file serves any private registry: its
/// address and its CA (docs/installation.md "A registry of your own").
pub fn hosts_toml(host: &str, ca: &Path) -> String {
    format!(
        r#"server = "https://{host}"

[host."https://{host}"]
  capabilities = ["pull", "resolve"]
  ca = "{ca}"
"#,
        ca = ca.display(),
    )
}

/// The `registry` binary, or how to build it.
pub fn binary() -> anyhow::Result<PathBuf> {
    let bin = bin_dir().join("registry");
    if !bin.is_file() {
        anyhow::bail!(
            "{} is missing: run `bash e2e/control-plane/release-tools.sh registry`",
            bin.display()
        );
    }
    Ok(bin)
}

/// Writes the configuration and the containerd host file; returns the registry's address.
pub fn write_config(w: &Path, addr: Ipv4Addr, pki: &Path) -> anyhow::Result<Registry> {
    let host = format!("{addr}:{REGISTRY_PORT}");
    std::fs::write(w.join("config/registry.yml"), config(w, addr, pki))?;
    let hosts = w.join("config/certs.d").join(&host);
    std::fs::create_dir_all(&hosts)?;
    std::fs::write(
        hosts.join("hosts.toml"),
        hosts_toml(&host, &pki.join("ca.crt")),
    )
    .context("writing containerd's hosts.toml")?;
    Ok(Registry {
        host,
        ca_file: pki.join("ca.crt"),
    })
}

/// Whether the registry accepts TCP connections (it serves TLS once it listens).
pub fn listening(addr: Ipv4Addr) -> bool {
    std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from((addr, REGISTRY_PORT)),
        std::time::Duration::from_millis(500),
    )
    .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containerd_trusts_the_node_ca_for_the_registry_only() {
        let t = hosts_toml("10.200.0.1:5443", Path::new("/n/pki/ca.crt"));
        assert!(t.starts_with("server = \"https://10.200.0.1:5443\""), "{t}");
        assert!(t.contains("[host.\"https://10.200.0.1:5443\"]"), "{t}");
        assert!(t.contains("ca = \"/n/pki/ca.crt\""), "{t}");
        assert!(!t.contains("skip_verify"), "{t}");
    }

    #[test]
    fn serves_tls_on_the_host_end_of_the_link() {
        let c = config(
            Path::new("/n"),
            Ipv4Addr::new(10, 200, 0, 1),
            Path::new("/n/pki"),
        );
        assert!(c.contains("addr: 10.200.0.1:5443"), "{c}");
        assert!(c.contains("certificate: /n/pki/registry.crt"), "{c}");
        assert!(c.contains("rootdirectory: /n/state/registry"), "{c}");
    }
}
