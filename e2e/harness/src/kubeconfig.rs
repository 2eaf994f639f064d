//! The admin kubeconfig: a static token in `system:masters` and the apiserver's self-signed
//! serving certificate, which loopback tests do not verify.

use std::path::Path;

use anyhow::Context as _;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

pub(crate) fn render(server: &str, token: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: {server}
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: {token}
contexts:
- name: local
  context:
    cluster: local
    user: admin
current-context: local
"
    )
}

/// The same, verifying the kube-apiserver's certificate against the cluster's CA file (a node
/// cluster has one: its pods verify the same certificate).
pub(crate) fn render_with_ca(server: &str, token: &str, ca_file: &Path) -> String {
    render(server, token).replace(
        "    insecure-skip-tls-verify: true\n",
        &format!("    certificate-authority: {}\n", ca_file.display()),
    )
}

pub(crate) async fn client(path: &Path) -> anyhow::Result<Client> {
    let kc = Kubeconfig::read_from(path).context("reading kubeconfig")?;
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .context("loading kubeconfig")?;
    Client::try_from(config).context("building client")
}
