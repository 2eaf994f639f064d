//! How the test, on the host, reaches what runs in the cluster.
//! - node: directly. The host routes the pod and service ranges through the node, so a
//!   Service's ClusterIP goes through kube-proxy exactly as a pod's request would.
//! - kind: `kubectl port-forward` (the kind node's ranges are not routed to the host) to a pod:
//!   for a Service, one of its ready endpoints that is not terminating, picked again on every
//!   call, as kube-proxy would send a new connection (a `port-forward svc/...` stays with the
//!   pod it first picked, even while that pod terminates); a forward whose pod went away is
//!   started again.
//! - local: the stand-in and the operator are processes on loopback.

use std::collections::HashMap;
use std::process::{Child, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::ListParams;
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
            Self::PortForward(f) => {
                let (pod, target) = ready_endpoint(client, ns, name, port).await?;
                f.url(&format!("pod/{pod}"), ns, target).await
            }
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

/// A ready, not terminating endpoint pod of Service `ns/name` and the pod's port behind the
/// Service's `port`, from its EndpointSlices.
async fn ready_endpoint(
    client: &Client,
    ns: &str,
    name: &str,
    port: u16,
) -> anyhow::Result<(String, u16)> {
    let svc = Api::<Service>::namespaced(client.clone(), ns)
        .get(name)
        .await?;
    let port_name = svc
        .spec
        .and_then(|s| s.ports)
        .unwrap_or_default()
        .into_iter()
        .find(|p| p.port == i32::from(port))
        .with_context(|| format!("Service {ns}/{name} has no port {port}"))?
        .name;
    let slices = Api::<EndpointSlice>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&format!("kubernetes.io/service-name={name}")))
        .await?;
    for slice in slices.items {
        let target = slice
            .ports
            .unwrap_or_default()
            .into_iter()
            .find(|p| p.name == port_name)
            .and_then(|p| p.port)
            .and_then(|p| u16::try_from(p).ok());
        let Some(target) = target else { continue };
        let pod = slice
            .endpoints
            .unwrap_or_default()
            .into_iter()
            .find_map(|e| {
                let c = e.conditions.unwrap_or_default();
                let usable = c.ready == Some(true) && c.terminating != Some(true);
                e.target_ref
                    .filter(|r| usable && r.kind.as_deref() == Some("Pod"))
                    .and_then(|r| r.name)
            });
        if let Some(pod) = pod {
            return Ok((pod, target));
        }
    }
    bail!("Service {ns}/{name} has no ready endpoint")
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
