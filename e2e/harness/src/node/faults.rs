//! The faults a node has, made for real on the node (docs/reliability.md "Node faults"): its
//! components stopped and started again (the processes themselves, signalled), a packet
//! filter in its network namespace, the kernel's memory limit of a container's cgroup, and the
//! whole node restarted as a machine reboots. The fault tests in e2e/runner/src/nodechaos/
//! drive them; what they check is theirs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::Api;

use super::{NODE_NAME, NodeCluster, http_ok, output};
use crate::binaries::tool;
use crate::signal::{self, Signal};

/// A process the node's first process supervises (init.sh).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeComponent {
    Containerd,
    Kubelet,
    KubeProxy,
    Coredns,
}

impl NodeComponent {
    /// Its binary's name, which is also its name in init.sh and its log's.
    pub fn name(self) -> &'static str {
        match self {
            Self::Containerd => "containerd",
            Self::Kubelet => "kubelet",
            Self::KubeProxy => "kube-proxy",
            Self::Coredns => "coredns",
        }
    }
}

/// How long a signalled component gets to exit before it is SIGKILLed.
const EXIT_LIMIT: Duration = Duration::from_secs(30);
/// How long a component, or the rebooted node, gets to serve again.
const BACK_LIMIT: Duration = Duration::from_secs(120);

impl NodeCluster {
    /// The host's pid of the running `component` (the process whose executable is its binary,
    /// among the node's processes), if it runs.
    pub fn pid_of(&self, component: NodeComponent) -> anyhow::Result<Option<u32>> {
        let pids = output(&["ip", "netns", "pids", &self.layout.netns])?;
        for pid in pids.split_whitespace() {
            let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) else {
                continue;
            };
            // A binary rebuilt while it runs reads "<path> (deleted)".
            let name = exe.file_name().map(|n| n.to_string_lossy().into_owned());
            let name = name.as_deref().map(|n| n.trim_end_matches(" (deleted)"));
            if name == Some(component.name()) {
                return Ok(Some(pid.parse()?));
            }
        }
        Ok(None)
    }

    /// Stops `component` with `signal` (SIGKILL after 30 s) and keeps it stopped until
    /// [`Self::start_component`]: init.sh starts a component again only once its hold file
    /// is gone.
    pub async fn stop_component(
        &self,
        component: NodeComponent,
        signal: Signal,
    ) -> anyhow::Result<()> {
        let pid = self
            .pid_of(component)?
            .with_context(|| format!("{} is not running on the node", component.name()))?;
        std::fs::write(self.hold_file(component), "")?;
        signal::send(pid, signal)?;
        let started = Instant::now();
        while Path::new(&format!("/proc/{pid}")).exists() {
            if started.elapsed() > EXIT_LIMIT {
                let _ = signal::send(pid, Signal::Kill);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// Lets init.sh start `component` again and waits until it serves: containerd answers on
    /// its socket, the kubelet has renewed the node's Lease since, CoreDNS is ready.
    pub async fn start_component(&self, component: NodeComponent) -> anyhow::Result<()> {
        let since = k8s_openapi::jiff::Timestamp::now();
        let hold = self.hold_file(component);
        if hold.exists() {
            std::fs::remove_file(&hold)?;
        }
        let started = Instant::now();
        loop {
            if self.pid_of(component)?.is_some() && self.serves(component, since).await {
                return Ok(());
            }
            if started.elapsed() > BACK_LIMIT {
                bail!(
                    "{} did not serve again within {BACK_LIMIT:?} (its log: {})",
                    component.name(),
                    self.dir
                        .join(format!("logs/{}.log", component.name()))
                        .display()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Stops `component` with `signal` and starts it again at once; the time until it
    /// serves again.
    pub async fn restart_component(
        &self,
        component: NodeComponent,
        signal: Signal,
    ) -> anyhow::Result<Duration> {
        let started = Instant::now();
        self.stop_component(component, signal).await?;
        self.start_component(component).await?;
        Ok(started.elapsed())
    }

    fn hold_file(&self, component: NodeComponent) -> PathBuf {
        self.dir.join("hold").join(component.name())
    }

    async fn serves(&self, component: NodeComponent, since: k8s_openapi::jiff::Timestamp) -> bool {
        match component {
            NodeComponent::Containerd => self.ctr(&["version"]).is_ok(),
            NodeComponent::Kubelet => self.kubelet_renewed_since(since).await,
            NodeComponent::KubeProxy => true,
            NodeComponent::Coredns => http_ok(self.layout.node_ip, 8182, "/ready"),
        }
    }

    /// The node's Lease (kube-node-lease) renewed at or after `since`: the kubelet talks to
    /// the API server again.
    async fn kubelet_renewed_since(&self, since: k8s_openapi::jiff::Timestamp) -> bool {
        let Ok(client) = self.cp.client().await else {
            return false;
        };
        let lease = Api::<Lease>::namespaced(client, "kube-node-lease")
            .get_opt(NODE_NAME)
            .await;
        let renewed = lease
            .ok()
            .flatten()
            .and_then(|l| l.spec)
            .and_then(|s| s.renew_time);
        // The Lease carries microseconds; `since` was taken with more.
        renewed.is_some_and(|t| t.0.as_microsecond() >= since.as_microsecond())
    }

    /// `iptables -w <args>` in the node's network namespace, where kube-proxy writes its
    /// rules and where every packet between a pod and anything else is forwarded.
    pub fn iptables(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.layout.netns, "iptables", "-w"])
            .args(args)
            .output()
            .context("running iptables in the node")?;
        if !out.status.success() {
            bail!(
                "iptables {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The cgroup directory of a container (its id without the `containerd://` prefix) in
    /// one v1 hierarchy, e.g. `memory`: `<hierarchy>/<node's cgroup root>/kubepods/.../<id>`.
    pub fn container_cgroup(&self, hierarchy: &str, container_id: &str) -> anyhow::Result<PathBuf> {
        let root = Path::new("/sys/fs/cgroup")
            .join(hierarchy)
            .join(&self.cgroup);
        find_dir(&root, container_id, 6)?.with_context(|| {
            format!(
                "no cgroup of container {container_id} under {}",
                root.display()
            )
        })
    }

    /// Where the kubelet writes the containers' logs: `<ns>_<pod>_<uid>/<container>/<n>.log`.
    pub fn pod_logs_dir(&self) -> PathBuf {
        self.dir.join("state/pod-logs")
    }

    /// The whole node restarted, as a machine reboots: [`Self::power_off`], then
    /// [`Self::boot`]. The control plane keeps running.
    pub async fn reboot(&self) -> anyhow::Result<Duration> {
        let started = Instant::now();
        self.power_off().await?;
        self.boot().await?;
        Ok(started.elapsed())
    }

    /// Every process on the node dies at once (containerd, the kubelet, kube-proxy, CoreDNS
    /// and every container, SIGKILL), and what lives in memory goes: its network setup (bridge,
    /// pod links, iptables rules, conntrack), its mounts, its cgroups, containerd's runtime
    /// state. What is on disk stays: containerd's images and metadata, the kubelet's pods and
    /// volumes, the pod logs.
    pub async fn power_off(&self) -> anyhow::Result<()> {
        self.kill_all().await?;
        self.reset_volatile_state()
    }

    /// Starts a powered-off node again; returns once it is Ready with a kubelet that has
    /// renewed its Lease since, and CoreDNS answers.
    pub async fn boot(&self) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let since = k8s_openapi::jiff::Timestamp::now();
        self.spawn_init()?;
        let log = self.dir.join("logs/containerd.log");
        crate::process::wait_http("containerd", || self.ctr(&["version"]).is_ok(), &log).await?;
        let deadline = Instant::now() + BACK_LIMIT;
        while !(self.kubelet_renewed_since(since).await && self.node_ready().await) {
            if Instant::now() > deadline {
                bail!("the node was not Ready again within {BACK_LIMIT:?} of its start");
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        while !http_ok(self.layout.node_ip, 8182, "/ready") {
            if Instant::now() > deadline {
                bail!("CoreDNS was not ready again within {BACK_LIMIT:?} of the start");
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Ok(started.elapsed())
    }

    /// Every process of the node SIGKILLed, and gone: its first process takes the PID
    /// namespace with it, and with it every container.
    async fn kill_all(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + EXIT_LIMIT;
        loop {
            let pids = output(&["ip", "netns", "pids", &self.layout.netns])?;
            let pids: Vec<u32> = pids
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect();
            let in_cgroups = cgroup_procs(&Path::new("/sys/fs/cgroup/memory").join(&self.cgroup));
            if pids.is_empty() && in_cgroups == 0 {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "the node's processes did not all exit ({} in its namespace, {in_cgroups} in its cgroups)",
                    pids.len()
                );
            }
            for pid in pids {
                let _ = signal::send(pid, Signal::Kill);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// What a reboot clears: links other than `lo` and `eth0` (the CNI bridge, pod links),
    /// every iptables rule and chain, conntrack entries, the pods' cgroups (the node's cgroup
    /// roots stay, as the kubelet's configuration names them), containerd's runtime state and
    /// sockets, the hold files. The link to the host, its address and routes are the
    /// machine's own network configuration and stay.
    fn reset_volatile_state(&self) -> anyhow::Result<()> {
        let ns = self.layout.netns.as_str();
        let links = output(&["ip", "netns", "exec", ns, "ip", "-o", "link", "show"])?;
        for link in links.lines() {
            // "3: cni0: <...>" or "5: vethabc@if2: <...>"
            let Some(name) = link.split(':').nth(1).map(str::trim) else {
                continue;
            };
            let name = name.split('@').next().unwrap_or(name);
            if name != "lo" && name != "eth0" {
                let _ = output(&["ip", "netns", "exec", ns, "ip", "link", "del", name]);
            }
        }
        for table in ["filter", "nat", "mangle", "raw"] {
            self.iptables(&["-t", table, "-F"])?;
            self.iptables(&["-t", table, "-X"])?;
        }
        if let Ok(conntrack) = which("conntrack") {
            let _ = Command::new("ip")
                .args(["netns", "exec", ns])
                .arg(conntrack)
                .arg("-F")
                .output();
        }
        for entry in std::fs::read_dir("/sys/fs/cgroup")? {
            let root = entry?.path().join(&self.cgroup);
            if root.is_dir() {
                remove_cgroups_below(&root)?;
            }
        }
        let state = self.dir.join("state");
        let _ = std::fs::remove_dir_all(state.join("containerd-run"));
        for sock in ["containerd.sock", "containerd.sock.ttrpc"] {
            let _ = std::fs::remove_file(state.join(sock));
        }
        let _ = std::fs::remove_dir_all(self.dir.join("hold"));
        Ok(())
    }

    async fn node_ready(&self) -> bool {
        let Ok(client) = self.cp.client().await else {
            return false;
        };
        let node = Api::<Node>::all(client).get_opt(NODE_NAME).await;
        node.ok()
            .flatten()
            .and_then(|n| n.status)
            .and_then(|s| s.conditions)
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    }
}

/// A directory named `name` at most `depth` levels below `root`.
fn find_dir(root: &Path, name: &str, depth: u32) -> anyhow::Result<Option<PathBuf>> {
    if depth == 0 || !root.is_dir() {
        return Ok(None);
    }
    for entry in std::fs::read_dir(root)? {
        let path = entry?.path();
        if !path.is_dir() {
            continue;
        }
        if path.file_name().is_some_and(|n| n == name) {
            return Ok(Some(path));
        }
        if let Some(found) = find_dir(&path, name, depth - 1)? {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

/// How many processes are in the cgroup `dir` and every cgroup below it.
fn cgroup_procs(dir: &Path) -> usize {
    let own = std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|s| s.lines().count())
        .unwrap_or(0);
    let below: usize = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .map(|p| cgroup_procs(&p))
                .sum()
        })
        .unwrap_or(0);
    own + below
}

/// Removes every cgroup below `root` (deepest first), keeping `root`. The kernel refuses
/// (EBUSY) for a moment after a cgroup's last process died: retried for up to 5 s.
fn remove_cgroups_below(root: &Path) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(root)? {
        let path = entry?.path();
        if path.is_dir() {
            remove_cgroups_below(&path)?;
            let mut tries = 0;
            while let Err(e) = std::fs::remove_dir(&path) {
                tries += 1;
                if tries > 50 {
                    return Err(e)
                        .with_context(|| format!("removing the cgroup {}", path.display()));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    Ok(())
}

fn which(name: &str) -> anyhow::Result<PathBuf> {
    tool(name).or_else(|_| {
        ["/usr/sbin", "/usr/bin", "/sbin"]
            .iter()
            .map(|d| Path::new(d).join(name))
            .find(|p| p.is_file())
            .with_context(|| format!("{name} not found"))
    })
}
