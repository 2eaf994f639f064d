//! How the test, on the host, reaches what runs in the cluster.
//! - node: directly. The host routes the pod and service ranges through the node, so a
//!   Service's ClusterIP goes through kube-proxy exactly as a pod's request would.
//! - kind: `kubectl port-forward` (the kind node's ranges are not routed to the host); a
//!   forward whose pod went away is started again.
//! - local: the stand-in and the operator are processes on loopback.

use std::collections::HashMap;
use std::process::{Child, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::{Api, Client};

use crate::kubectl::Kubectl;

#[derive(Debug)]
pub enum Reach {
    Loopback { server: String, metrics: String },
    Routed,
    PortForward(Forwards),
}

impl Reach {
    /// Base URL (`http://host:port`) of Service `ns/name` on `port`.
    pub async fn service(
        &self,
        client: &Client,
        ns: &str,
        name: &str,
        port: u16,
    ) -> anyhow::Result<String> {
        match self {
            Self::Loopback { server, .. } => Ok(server.clone()),
            Self::Routed => {
                let svc = Api::<Service>::namespaced(client.clone(), ns)
                    .get(name)
                    .await?;
                let ip = svc
                    .spec
                    .and_then(|s| s.cluster_ip)
                    .with_context(|| format!("Service {ns}/{name} has no ClusterIP"))?;
                Ok(format!("http://{ip}:{port}"))
            }
            Self::PortForward(f) => f.url(&format!("svc/{name}"), ns, port).await,
        }
    }

    /// Base URL of pod `ns/name` on `port`.
    pub async fn pod(
        &self,
        client: &Client,
        ns: &str,
        name: &str,
        port: u16,
    ) -> anyhow::Result<String> {
        match self {
            Self::Loopback { metrics, .. } => Ok(metrics.trim_end_matches("/metrics").into()),
            Self::Routed => {
                let pod = Api::<Pod>::namespaced(client.clone(), ns).get(name).await?;
                let ip = pod
                    .status
                    .and_then(|s| s.pod_ip)
                    .with_context(|| format!("pod {ns}/{name} has no IP"))?;
                Ok(format!("http://{ip}:{port}"))
            }
            Self::PortForward(f) => f.url(&format!("pod/{name}"), ns, port).await,
        }
    }
}

/// Running `kubectl port-forward`s, one per target.
#[derive(Debug)]
pub struct Forwards {
    kubectl: Kubectl,
    running: Mutex<HashMap<String, (Child, u16)>>,
}

impl Forwards {
    pub fn new(kubectl: Kubectl) -> Self {
        Self {
            kubectl,
            running: Mutex::new(HashMap::new()),
        }
    }

    /// A forward to `target` (`pod/<name>`, `svc/<name>`) in `ns` on `port`, as a base URL.
    pub async fn url(&self, target: &str, ns: &str, port: u16) -> anyhow::Result<String> {
        let key = format!("{ns}/{target}:{port}");
        let alive = {
            let mut running = self
                .running
                .lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?;
            match running.get_mut(&key) {
                Some((child, local)) => child.try_wait()?.is_none().then_some(*local),
                None => None,
            }
        };
        if let Some(local) = alive
            && tcp_open(local).await
        {
            return Ok(format!("http://127.0.0.1:{local}"));
        }
        let local = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = self
            .kubectl
            .command()
            .args(["port-forward", "-n", ns, target, &format!("{local}:{port}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting kubectl port-forward")?;
        if let Some((mut old, _)) = self
            .running
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .insert(key, (child, local))
        {
            let _ = old.kill();
        }
        for _ in 0..50 {
            if tcp_open(local).await {
                return Ok(format!("http://127.0.0.1:{local}"));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        bail!("kubectl port-forward {ns}/{target} did not open 127.0.0.1:{local}")
    }
}

impl Drop for Forwards {
    fn drop(&mut self) {
        if let Ok(mut running) = self.running.lock() {
            for (child, _) in running.values_mut() {
                let _ = child.kill();
            }
        }
    }
}

async fn tcp_open(port: u16) -> bool {
    tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_ok()
}
