//! The node's network (docs/node.md "Network"): a network namespace playing the node machine,
//! joined to this host by a veth pair with a /30. The host end is the control plane's address
//! (the kube-apiserver binds it); the node end is the node's IP. The pod range lives on the
//! node's CNI bridge and the service range in kube-proxy's rules there; the host routes both
//! through the node, so tests on the host reach pods and Services directly. Nothing of it
//! leaves this machine.

use std::net::Ipv4Addr;
use std::process::Command;

use anyhow::{Context as _, bail};

/// Addresses and names of a node cluster. One per machine: the names are fixed so that a
/// leftover of a killed run is recognised and removed.
#[derive(Debug, Clone)]
pub struct Layout {
    pub netns: String,
    /// The host end of the veth pair.
    pub host_veth: String,
    pub host_ip: Ipv4Addr,
    pub node_ip: Ipv4Addr,
    pub pod_cidr: String,
    pub service_cidr: String,
    /// The `kubernetes` Service's ClusterIP: the first of the service range.
    pub kubernetes_ip: Ipv4Addr,
    /// The cluster DNS Service's ClusterIP (kubelet's `clusterDNS`).
    pub dns_ip: Ipv4Addr,
}

impl Default for Layout {
    fn default() -> Self {
        Self {
            netns: "terdut-node".into(),
            host_veth: "terdut-node0".into(),
            host_ip: Ipv4Addr::new(10, 200, 0, 1),
            node_ip: Ipv4Addr::new(10, 200, 0, 2),
            pod_cidr: "10.244.0.0/24".into(),
            service_cidr: "10.96.0.0/24".into(),
            kubernetes_ip: Ipv4Addr::new(10, 96, 0, 1),
            dns_ip: Ipv4Addr::new(10, 96, 0, 10),
        }
    }
}

fn run(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .with_context(|| format!("running {}", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "{} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Runs `args` inside the node's network namespace.
fn in_node(layout: &Layout, args: &[&str]) -> anyhow::Result<()> {
    let mut full = vec!["ip", "netns", "exec", &layout.netns];
    full.extend_from_slice(args);
    run(&full)
}

/// Whether the namespace exists (a node is up, or a killed run left it).
pub fn exists(layout: &Layout) -> bool {
    std::path::Path::new("/run/netns")
        .join(&layout.netns)
        .exists()
}

/// Creates the namespace, the link and the routes.
pub fn create(layout: &Layout) -> anyhow::Result<()> {
    let (ns, veth) = (layout.netns.as_str(), layout.host_veth.as_str());
    let host = format!("{}/30", layout.host_ip);
    let node = format!("{}/30", layout.node_ip);
    let gw = layout.host_ip.to_string();
    let via = layout.node_ip.to_string();
    run(&["ip", "netns", "add", ns])?;
    run(&[
        "ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns,
    ])?;
    run(&["ip", "addr", "add", &host, "dev", veth])?;
    run(&["ip", "link", "set", veth, "up"])?;
    in_node(layout, &["ip", "link", "set", "lo", "up"])?;
    in_node(layout, &["ip", "addr", "add", &node, "dev", "eth0"])?;
    in_node(layout, &["ip", "link", "set", "eth0", "up"])?;
    in_node(layout, &["ip", "route", "add", "default", "via", &gw])?;
    // The node routes between its pods, its Services and the host; bridged pod-to-pod
    // traffic must pass iptables so that a Service's DNAT is undone on the way back.
    in_node(layout, &["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
    in_node(
        layout,
        &["sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1"],
    )?;
    for range in [&layout.pod_cidr, &layout.service_cidr] {
        run(&["ip", "route", "add", range, "via", &via, "dev", veth])?;
    }
    Ok(())
}
