//! A single-node cluster (docs/node.md): a control plane like [`ControlPlane::shared`]'s, but
//! reachable from pods, plus kube-scheduler, and a node in a network namespace of its own
//! running containerd with runc, the kubelet, kube-proxy and CoreDNS as the cluster DNS. Pods
//! get addresses from the CNI bridge; images come from tars imported into containerd, or from an
//! OCI registry beside the node ([`NodeOptions::registry`], registry.rs) that containerd pulls
//! from. Everything stops with [`NodeCluster::stop`], or when this process is gone.
//!
//! ```no_run
//! # async fn t() -> anyhow::Result<()> {
//! let tars = vec!["/path/registry.k8s.io_pause_3.10.1.tar".into()];
//! let opts = terdut_testenv::NodeOptions { images: tars, registry: false };
//! let cluster = terdut_testenv::NodeCluster::start(opts).await?;
//! let client = cluster.control_plane().client().await?;
//! # Ok(()) }
//! ```

mod config;
mod faults;
mod net;
mod pki;
mod registry;

pub use config::{CLUSTER_DOMAIN, PAUSE_IMAGE};
pub use faults::NodeComponent;
pub use net::Layout;
pub use registry::Registry;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, bail};

use crate::ControlPlane;
use crate::binaries::{bin_dir, tool};
use crate::process::{self, NodeApiserver, random_suffix};

/// The node's name, as the kubelet registers it.
pub const NODE_NAME: &str = "terdut-node";

const INIT: &str = include_str!("init.sh");
const TEARDOWN: &str = include_str!("teardown.sh");
const CNI_PLUGINS: &str = "/usr/lib/cni";

/// What the node starts with.
#[derive(Debug, Default, Clone)]
pub struct NodeOptions {
    /// Image tars (`docker save`) imported into containerd before the node takes pods; the
    /// pause image ([`PAUSE_IMAGE`]) must be among them.
    pub images: Vec<PathBuf>,
    /// An OCI registry beside the node, which its containerd pulls from
    /// ([`NodeCluster::registry`]).
    pub registry: bool,
}

/// A running single-node cluster.
#[derive(Debug)]
pub struct NodeCluster {
    /// Held for as long as this cluster lives: one node per machine ([`node_lock`]).
    _lock: std::fs::File,
    cp: ControlPlane,
    layout: Layout,
    dir: PathBuf,
    cgroup: String,
    registry: Option<Registry>,
}

impl NodeCluster {
    /// Starts it all and returns once the node is Ready and the cluster DNS answers.
    pub async fn start(opts: NodeOptions) -> anyhow::Result<Self> {
        for b in [
            "kubelet",
            "kube-proxy",
            "kube-scheduler",
            "containerd",
            "containerd-shim-runc-v2",
            "ctr",
            "runc",
            "coredns",
        ] {
            if !bin_dir().join(b).is_file() {
                bail!("{b} is missing: run `bash e2e/control-plane/build.sh node`");
            }
        }
        for p in ["bridge", "host-local", "loopback", "portmap"] {
            if !Path::new(CNI_PLUGINS).join(p).is_file() {
                bail!("CNI plugin {p} is missing: apt-get install containernetworking-plugins");
            }
        }
        let lock = node_lock().await?;
        let layout = Layout::default();
        wait_for_leftover_teardown(&layout).await;
        if net::exists(&layout) {
            let pids = output(&["ip", "netns", "pids", &layout.netns])?;
            if !pids.trim().is_empty() {
                bail!(
                    "a node is already running here (network namespace {}); stop it first",
                    layout.netns
                );
            }
            // A killed run's leftover: nothing lives in it any more.
            let _ = output(&["ip", "netns", "del", &layout.netns]);
            let _ = output(&["ip", "link", "del", &layout.host_veth]);
        }
        let suffix = random_suffix();
        let dir = std::env::temp_dir().join(format!("terdut-node-{suffix}"));
        for d in ["config/cni", "config/certs.d", "state", "logs", "pki"] {
            std::fs::create_dir_all(dir.join(d))?;
        }
        let cgroup = format!("terdut-node-{suffix}");
        std::fs::write(dir.join("teardown.sh"), TEARDOWN)?;
        let teardown = teardown_command(&dir, &layout, &cgroup);
        // From here on this process dying tears down whatever exists by then.
        process::watchdog_command(&teardown)?;
        let started = std::time::Instant::now();
        if opts.registry {
            registry::binary()?;
        }
        let mut cluster = match Self::start_control_plane(lock, layout, dir, cgroup).await {
            Ok(c) => c,
            Err(e) => {
                run_teardown(&teardown);
                return Err(e.context("starting the node cluster's control plane"));
            }
        };
        match cluster.start_node(&opts).await {
            Ok(registry) => {
                cluster.registry = registry;
                tracing::info!(took = ?started.elapsed(), "node cluster up");
                Ok(cluster)
            }
            Err(e) => {
                let _ = std::fs::write(cluster.dir.join("failed"), "");
                let logs = format!("{}.logs", cluster.dir.display());
                cluster.stop();
                Err(e.context(format!("starting the node (its logs: {logs})")))
            }
        }
    }

    /// The link, the certificates, etcd, kube-apiserver, kube-controller-manager and
    /// kube-scheduler, and the objects the node needs before any pod.
    async fn start_control_plane(
        lock: std::fs::File,
        layout: Layout,
        dir: PathBuf,
        cgroup: String,
    ) -> anyhow::Result<Self> {
        net::create(&layout)?;
        let l = &layout;
        let pki = pki::create(
            &dir.join("pki"),
            l.kubernetes_ip,
            l.host_ip,
            l.node_ip,
            NODE_NAME,
        )?;
        let tokens = Tokens::new();
        let cp = process::start(process::Options {
            controller_manager: true,
            node: Some(NodeApiserver {
                address: l.host_ip,
                service_cidr: l.service_cidr.clone(),
                ca_crt: pki.ca_crt.clone(),
                serving_crt: pki.apiserver_crt.clone(),
                serving_key: pki.apiserver_key.clone(),
                kubelet_client_crt: pki.kubelet_client_crt.clone(),
                kubelet_client_key: pki.kubelet_client_key.clone(),
                tokens: tokens.lines(),
            }),
        })
        .await?;
        let cluster = Self {
            _lock: lock,
            cp,
            layout,
            dir,
            cgroup,
            registry: None,
        };
        let result = cluster
            .start_scheduler()
            .and_then(|()| cluster.bootstrap_objects())
            .and_then(|()| cluster.write_config(&pki, &tokens));
        if let Err(e) = result {
            cluster.cp.stop();
            return Err(e);
        }
        Ok(cluster)
    }

    /// The registry (when asked for), then containerd, the kubelet, kube-proxy and CoreDNS in
    /// the node's namespaces, the images.
    async fn start_node(&self, opts: &NodeOptions) -> anyhow::Result<Option<Registry>> {
        let registry = if opts.registry {
            Some(self.start_registry().await?)
        } else {
            None
        };
        self.create_cgroup_root()?;
        self.spawn_init()?;
        self.import_images(&opts.images).await?;
        self.wait_ready().await?;
        Ok(registry)
    }

    /// The registry on the host end of the link, stopped with the control plane.
    async fn start_registry(&self) -> anyhow::Result<Registry> {
        let registry =
            registry::write_config(&self.dir, self.layout.host_ip, &self.dir.join("pki"))?;
        let log = self.dir.join("logs/registry.log");
        let pid = process::spawn(
            &registry::binary()?,
            &[
                "serve".into(),
                self.dir.join("config/registry.yml").display().to_string(),
            ],
            &log,
        )?;
        self.cp.adopt(pid)?;
        let ip = self.layout.host_ip;
        process::wait_http("the registry", || registry::listening(ip), &log).await?;
        Ok(registry)
    }

    /// The OCI registry beside the node, when [`NodeOptions::registry`] asked for one.
    pub fn registry(&self) -> Option<&Registry> {
        self.registry.as_ref()
    }

    /// The control plane: admin client, kubeconfig, kubectl.
    pub fn control_plane(&self) -> &ControlPlane {
        &self.cp
    }

    /// Addresses and names (node IP, pod and service ranges, DNS address).
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The node's folder; `logs/` holds containerd's, the kubelet's, kube-proxy's, CoreDNS'.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stops the node (every process in it, its network namespace, its cgroups, its folder)
    /// and the control plane. Idempotent.
    pub fn stop(&self) {
        run_teardown(&teardown_command(&self.dir, &self.layout, &self.cgroup));
        self.cp.stop();
    }

    fn start_scheduler(&self) -> anyhow::Result<()> {
        let kc = self.cp.kubeconfig().display().to_string();
        let pid = process::spawn(
            &tool("kube-scheduler")?,
            &[
                format!("--kubeconfig={kc}"),
                format!("--authentication-kubeconfig={kc}"),
                format!("--authorization-kubeconfig={kc}"),
                "--leader-elect=false".into(),
                format!("--secure-port={}", process::free_port()?),
                "--bind-address=127.0.0.1".into(),
            ],
            &self.cp.dir().join("logs/kube-scheduler.log"),
        )?;
        self.cp.adopt(pid)
    }

    /// Before any pod: the cluster DNS Service at its fixed address (CoreDNS runs on the node
    /// itself, so its endpoints are the node's address), and what CoreDNS may read.
    fn bootstrap_objects(&self) -> anyhow::Result<()> {
        let l = &self.layout;
        let yaml = format!(
            r#"apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {{k8s-app: kube-dns, kubernetes.io/name: CoreDNS}}
spec:
  clusterIP: {dns}
  ports:
    - {{name: dns, port: 53, protocol: UDP, targetPort: 53}}
    - {{name: dns-tcp, port: 53, protocol: TCP, targetPort: 53}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kube-dns-node
  namespace: kube-system
  labels:
    kubernetes.io/service-name: kube-dns
    endpointslice.kubernetes.io/managed-by: terdut-testenv
addressType: IPv4
endpoints:
  - addresses: ["{node}"]
    conditions: {{ready: true}}
    nodeName: {NODE_NAME}
ports:
  - {{name: dns, port: 53, protocol: UDP}}
  - {{name: dns-tcp, port: 53, protocol: TCP}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:coredns
rules:
  - apiGroups: [""]
    resources: [endpoints, services, pods, namespaces]
    verbs: [list, watch]
  - apiGroups: [discovery.k8s.io]
    resources: [endpointslices]
    verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: system:coredns
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:coredns}}
subjects:
  - {{apiGroup: rbac.authorization.k8s.io, kind: User, name: system:coredns}}
"#,
            dns = l.dns_ip,
            node = l.node_ip,
        );
        let file = self.dir.join("config/bootstrap.yaml");
        std::fs::write(&file, yaml)?;
        let (ok, out) = self
            .cp
            .kubectl(&["apply", "-f", &file.display().to_string()])?;
        if !ok {
            bail!("applying the cluster DNS Service: {out}");
        }
        Ok(())
    }

    fn write_config(&self, pki: &pki::Pki, tokens: &Tokens) -> anyhow::Result<()> {
        let (w, l) = (&self.dir, &self.layout);
        let c = w.join("config");
        let server = &self.cp.server;
        let write = |name: &str, text: String| std::fs::write(c.join(name), text);
        write("containerd.toml", config::containerd(w, &bin_dir()))?;
        write("cni/10-terdut.conflist", config::cni(l, w))?;
        write("kubelet.yaml", config::kubelet(l, w, &self.cgroup))?;
        write("kube-proxy.yaml", config::kube_proxy(l, w, NODE_NAME))?;
        write("Corefile", config::corefile(l, w))?;
        // No upstream resolver: the node reaches nothing outside this machine.
        write("resolv.conf", String::new())?;
        let kc = |user: &str, token: &str| config::kubeconfig(server, &pki.ca_crt, user, token);
        write("kubelet.kubeconfig", kc("kubelet", &tokens.kubelet))?;
        write(
            "kube-proxy.kubeconfig",
            kc("kube-proxy", &tokens.kube_proxy),
        )?;
        write("coredns.kubeconfig", kc("coredns", &tokens.coredns))?;
        std::fs::write(w.join("init.sh"), INIT)?;
        Ok(())
    }

    /// The kubelet's cgroup root, in every v1 hierarchy (it refuses one that is missing);
    /// a name of this node's own, so teardown removes exactly what the node made.
    fn create_cgroup_root(&self) -> anyhow::Result<()> {
        for entry in std::fs::read_dir("/sys/fs/cgroup")? {
            let h = entry?.path();
            if !h.join("cgroup.procs").exists() {
                continue;
            }
            let dir = h.join(&self.cgroup);
            std::fs::create_dir_all(&dir)?;
            // A v1 cpuset starts empty: give it its parent's CPUs and memory nodes.
            for f in ["cpuset.cpus", "cpuset.mems"] {
                if h.join(f).exists() {
                    std::fs::write(dir.join(f), std::fs::read_to_string(h.join(f))?)?;
                }
            }
        }
        Ok(())
    }

    fn spawn_init(&self) -> anyhow::Result<()> {
        let w = self.dir.display().to_string();
        let log = std::fs::File::create(self.dir.join("logs/init.log"))?;
        // nsenter, not `ip netns exec`: that remounts /sys for the namespace, and the fresh
        // sysfs has none of the cgroup hierarchies the kubelet and runc need.
        Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", self.layout.netns))
            .args([
                "--",
                "unshare",
                "--pid",
                "--fork",
                "--kill-child",
                "--mount-proc",
            ])
            .args(["bash", &format!("{w}/init.sh"), &w])
            .arg(bin_dir())
            .env("NODE_NAME", NODE_NAME)
            .env("NODE_IP", self.layout.node_ip.to_string())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting the node")?;
        Ok(())
    }

    fn ctr(&self, args: &[&str]) -> anyhow::Result<String> {
        let sock = self.dir.join("state/containerd.sock");
        let out = Command::new(tool("ctr")?)
            .arg("--address")
            .arg(&sock)
            .args(["--namespace", "k8s.io"])
            .args(args)
            .output()
            .context("running ctr")?;
        if !out.status.success() {
            bail!(
                "ctr {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// What `kind load` does: each tar into containerd's `k8s.io` namespace, unpacked.
    async fn import_images(&self, tars: &[PathBuf]) -> anyhow::Result<()> {
        let log = self.dir.join("logs/containerd.log");
        process::wait_http("containerd", || self.ctr(&["version"]).is_ok(), &log).await?;
        for tar in tars {
            self.ctr(&[
                "images",
                "import",
                "--digests",
                "--snapshotter",
                "overlayfs",
                &tar.display().to_string(),
            ])
            .with_context(|| format!("importing {}", tar.display()))?;
        }
        let images = self.ctr(&["images", "list", "--quiet"])?;
        if !images.lines().any(|l| l == PAUSE_IMAGE) {
            bail!(
                "the pause image {PAUSE_IMAGE} was not among the imported tars (e2e/images/build.sh)"
            );
        }
        Ok(())
    }

    /// The node Ready, and CoreDNS answering (it serves once it has synced with the API).
    async fn wait_ready(&self) -> anyhow::Result<()> {
        let kubelet_log = self.dir.join("logs/kubelet.log");
        let ready = || {
            self.cp
                .kubectl(&[
                    "get",
                    "node",
                    NODE_NAME,
                    "-o",
                    "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
                ])
                .is_ok_and(|(ok, out)| ok && out.trim() == "True")
        };
        wait(
            Duration::from_secs(120),
            "the node Ready",
            ready,
            &kubelet_log,
        )
        .await?;
        let coredns_log = self.dir.join("logs/coredns.log");
        let node_ip = self.layout.node_ip;
        let dns_ready = || http_ok(node_ip, 8182, "/ready");
        wait(
            Duration::from_secs(60),
            "CoreDNS ready",
            dns_ready,
            &coredns_log,
        )
        .await
    }
}

/// The node components' identities in the static token file: the kubelet as a node (the Node
/// authorizer and NodeRestriction then confine it), kube-proxy as the user its bootstrap
/// ClusterRoleBinding names, CoreDNS as the user of the ClusterRole made for it.
struct Tokens {
    kubelet: String,
    kube_proxy: String,
    coredns: String,
}

impl Tokens {
    fn new() -> Self {
        let t = |p: &str| format!("{p}-{}{}", random_suffix(), random_suffix());
        Self {
            kubelet: t("kubelet"),
            kube_proxy: t("proxy"),
            coredns: t("coredns"),
        }
    }

    fn lines(&self) -> Vec<String> {
        vec![
            format!(
                "{},system:node:{NODE_NAME},uid-node,\"system:nodes\"",
                self.kubelet
            ),
            format!("{},system:kube-proxy,uid-kube-proxy", self.kube_proxy),
            format!("{},system:coredns,uid-coredns", self.coredns),
        ]
    }
}

/// The machine's one node (its names are fixed) is taken in turn: an exclusive lock on a file
/// every run opens, waited for up to `TERDUT_NODE_WAIT_SECS` (default 1800), so a second run
/// (another checkout's tests, a demo) queues instead of failing or tearing the first one down.
/// The kernel drops the lock with the process that held it, however it ended.
async fn node_lock() -> anyhow::Result<std::fs::File> {
    let path = std::env::temp_dir().join("terdut-node.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    let wait = std::env::var("TERDUT_NODE_WAIT_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1800u64);
    let deadline = std::time::Instant::now() + Duration::from_secs(wait);
    let mut said = false;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) => {
                if std::time::Instant::now() >= deadline {
                    bail!(
                        "another run holds this machine's node ({}) after {wait} s of waiting",
                        path.display()
                    );
                }
                if !said {
                    eprintln!("[node] another run holds this machine's node; waiting for it");
                    said = true;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("locking {}", path.display()));
            }
        }
    }
}

/// The run that held the lock before may have just died: its watchdog tears its node down
/// within a few seconds of that. Give it the time before calling what is left a live node.
async fn wait_for_leftover_teardown(layout: &Layout) {
    for _ in 0..60 {
        if !net::exists(layout) {
            return;
        }
        let busy = output(&["ip", "netns", "pids", &layout.netns])
            .map(|p| !p.trim().is_empty())
            .unwrap_or(false);
        if !busy {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn teardown_command(dir: &Path, layout: &Layout, cgroup: &str) -> String {
    let d = dir.display();
    format!(
        "bash '{d}/teardown.sh' '{d}' '{}' '{}' '{cgroup}'",
        layout.netns, layout.host_veth
    )
}

fn run_teardown(command: &str) {
    let _ = Command::new("bash")
        .args(["-c", command])
        .stdin(Stdio::null())
        .status();
}

fn output(args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(args[0]).args(&args[1..]).output()?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A plain-HTTP GET answering 200.
fn http_ok(ip: std::net::Ipv4Addr, port: u16, path: &str) -> bool {
    use std::io::{Read, Write};
    let addr = std::net::SocketAddr::from((ip, port));
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if write!(s, "GET {path} HTTP/1.0\r\nHost: {ip}\r\n\r\n").is_err() {
        return false;
    }
    let mut buf = String::new();
    let _ = s.read_to_string(&mut buf);
    buf.starts_with("HTTP/1.0 200") || buf.starts_with("HTTP/1.1 200")
}

/// Polls `probe` until true or `limit`; on timeout, the error carries the tail of `log`.
async fn wait(
    limit: Duration,
    what: &str,
    probe: impl Fn() -> bool,
    log: &Path,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if probe() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(30).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    bail!(
        "{what}: not within {limit:?}; last lines of {}:\n{}",
        log.display(),
        tail.join("\n")
    )
}
