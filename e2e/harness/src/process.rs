//! Starting etcd, kube-apiserver and kube-controller-manager with envtest's flags, and the
//! watchdog that stops them when the test process ends.

use std::fs::{File, OpenOptions};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use rand::Rng as _;

use crate::{ControlPlane, audit, binaries::tool, kubeconfig};

pub(crate) struct Options {
    pub controller_manager: bool,
    /// Set for a control plane that a node (kubelet, pods) talks to: see [`NodeApiserver`].
    pub node: Option<NodeApiserver>,
}

/// What a control plane with a node behind it needs beyond the loopback one: pods reach the
/// kube-apiserver through the `kubernetes` Service, so it binds and advertises an address they
/// can route to (the default endpoint reconciler then publishes it), serves a certificate of
/// the cluster's CA for the Service's IP, admits ServiceAccount tokens, authorizes the kubelet
/// as a node, and kube-controller-manager runs every controller pods need.
#[derive(Debug, Clone)]
pub(crate) struct NodeApiserver {
    pub address: std::net::Ipv4Addr,
    pub service_cidr: String,
    pub ca_crt: PathBuf,
    pub serving_crt: PathBuf,
    pub serving_key: PathBuf,
    /// The client certificate the kube-apiserver presents to the kubelet (logs, exec).
    pub kubelet_client_crt: PathBuf,
    pub kubelet_client_key: PathBuf,
    /// More lines of the static token file: the kubelet's and kube-proxy's identities.
    pub tokens: Vec<String>,
}

pub(crate) fn random_suffix() -> String {
    let mut rng = rand::rng();
    (0..6)
        .map(|_| char::from(b'a' + rng.random_range(0..26u8)))
        .collect()
}

pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

pub(crate) fn spawn(bin: &Path, args: &[String], log: &Path) -> anyhow::Result<u32> {
    Ok(spawn_child(bin, args, File::create(log)?)?.id())
}

fn spawn_child(bin: &Path, args: &[String], out: File) -> anyhow::Result<Child> {
    Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))
}

/// How [`ControlPlane::restart_apiserver`] stops the running kube-apiserver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopMode {
    /// SIGTERM: the apiserver stops listening and closes its watches; SIGKILL after 10 s.
    Graceful,
    /// SIGKILL: connections drop mid-stream, as in a crash.
    Kill,
}

/// The kube-apiserver child and everything needed to start it again identically.
#[derive(Debug)]
pub(crate) struct Apiserver {
    bin: PathBuf,
    args: Vec<String>,
    log: PathBuf,
    child: Mutex<Option<Child>>,
}

impl Apiserver {
    /// Stops the apiserver (`mode`), waits until it has exited, starts it with the same
    /// arguments (same port, same etcd, same certificates and keys) and returns its new pid.
    /// The new process gets a watchdog of its own, like the first.
    pub(crate) fn restart(&self, mode: StopMode, dir: &Path) -> anyhow::Result<u32> {
        let mut guard = self
            .child
            .lock()
            .map_err(|_| anyhow::anyhow!("apiserver lock poisoned"))?;
        if let Some(mut child) = guard.take() {
            match mode {
                StopMode::Kill => {
                    let _ = child.kill();
                }
                StopMode::Graceful => {
                    let _ = Command::new("kill")
                        .args(["-TERM", &child.id().to_string()])
                        .status();
                }
            }
            // It stops listening at once but can linger ~30 s (draining); a graceful stop is
            // the clean close its clients see, not how long the process takes to exit.
            let deadline = Instant::now() + Duration::from_secs(10);
            while child.try_wait()?.is_none() {
                if Instant::now() > deadline {
                    let _ = child.kill();
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let out = OpenOptions::new().append(true).open(&self.log)?;
        let child = spawn_child(&self.bin, &self.args, out)?;
        let pid = child.id();
        *guard = Some(child);
        watchdog(&[pid], dir)?;
        Ok(pid)
    }

    /// Stops it for good (SIGTERM, SIGKILL after 10 s) and waits until it has exited.
    pub(crate) fn stop(&self) {
        let Ok(mut guard) = self.child.lock() else {
            return;
        };
        if let Some(mut child) = guard.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while let Ok(None) = child.try_wait() {
                if Instant::now() > deadline {
                    let _ = child.kill();
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// Runs the shell `command` once this test process is gone (or was killed).
pub(crate) fn watchdog_command(command: &str) -> anyhow::Result<()> {
    let me = std::process::id();
    Command::new("bash")
        .args([
            "-c",
            &format!("while kill -0 {me} 2>/dev/null; do sleep 0.5; done; {command}"),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting the watchdog")?;
    Ok(())
}

/// Stops `pids` and removes `dir` once this test process is gone (or was killed).
pub(crate) fn watchdog(pids: &[u32], dir: &Path) -> anyhow::Result<()> {
    let me = std::process::id();
    let pids = pids
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(" ");
    let script = format!(
        "while kill -0 {me} 2>/dev/null; do sleep 0.5; done; kill {pids} 2>/dev/null; \
         sleep 2; kill -9 {pids} 2>/dev/null; rm -rf '{}'",
        dir.display()
    );
    Command::new("bash")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting the watchdog")?;
    Ok(())
}

pub(crate) async fn wait_http(
    what: &str,
    probe: impl Fn() -> bool,
    log: &Path,
) -> anyhow::Result<()> {
    for _ in 0..600 {
        if probe() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let tail = std::fs::read_to_string(log).unwrap_or_default();
    let tail: String = tail
        .lines()
        .rev()
        .take(30)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n");
    bail!("{what} did not become ready in 60s; last log lines:\n{tail}")
}

/// Whether the process logging to `log` failed to bind a port someone else holds.
fn port_taken(log: &Path) -> bool {
    std::fs::read_to_string(log).is_ok_and(|l| l.contains("address already in use"))
}

/// A plain-HTTP GET on loopback returning true on a 200 (etcd's /health).
fn http_ok(port: u16, path: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").is_err() {
        return false;
    }
    let mut buf = String::new();
    let _ = s.read_to_string(&mut buf);
    buf.starts_with("HTTP/1.0 200") || buf.starts_with("HTTP/1.1 200")
}

pub(crate) fn openssl(args: &[&str], cwd: &Path) -> anyhow::Result<()> {
    let st = Command::new("openssl")
        .args(args)
        .current_dir(cwd)
        .stderr(Stdio::null())
        .status()
        .context("running openssl (install it: apt-get install openssl)")?;
    if !st.success() {
        bail!("openssl {args:?} failed");
    }
    Ok(())
}

/// Waits until the kube-apiserver behind `kubeconfig` answers `/readyz` (60 s at most).
pub(crate) async fn wait_apiserver(kubeconfig: &Path, log: &Path) -> anyhow::Result<()> {
    let kubectl = tool("kubectl")?;
    let ready = || {
        Command::new(&kubectl)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["get", "--raw", "/readyz"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    wait_http("kube-apiserver", ready, log).await
}

pub(crate) async fn start(opts: Options) -> anyhow::Result<ControlPlane> {
    let (etcd, apiserver) = (tool("etcd")?, tool("kube-apiserver")?);
    let dir: PathBuf = std::env::temp_dir().join(format!("terdut-cp-{}", random_suffix()));
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs)?;
    let mut pids = vec![];

    // etcd. A port `free_port` saw free can be bound by another process (a parallel test
    // lane starting its own control plane) before etcd binds it: etcd then exits at once with
    // "address already in use", and the start is tried again on fresh ports.
    let etcd_log = logs.join("etcd.log");
    let mut attempt = 0;
    let client_port = loop {
        attempt += 1;
        let (client_port, peer_port) = (free_port()?, free_port()?);
        let etcd_url = format!("http://127.0.0.1:{client_port}");
        let pid = spawn(
            &etcd,
            &[
                // A fresh data dir per attempt: a failed one may have begun its own.
                format!(
                    "--data-dir={}",
                    dir.join(format!("etcd-{attempt}")).display()
                ),
                format!("--listen-client-urls={etcd_url}"),
                format!("--advertise-client-urls={etcd_url}"),
                format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
                format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"),
                format!("--initial-cluster=default=http://127.0.0.1:{peer_port}"),
                "--unsafe-no-fsync=true".into(),
                "--log-level=warn".into(),
            ],
            &etcd_log,
        )?;
        let started = wait_http(
            "etcd",
            || http_ok(client_port, "/health") || port_taken(&etcd_log),
            &etcd_log,
        )
        .await;
        if started.is_ok() && http_ok(client_port, "/health") {
            pids.push(pid);
            break client_port;
        }
        if attempt < 3 && port_taken(&etcd_log) {
            eprintln!("[control-plane] etcd's port was taken before it bound it; trying others");
            continue;
        }
        started?;
        bail!(
            "etcd did not answer /health; its log: {}",
            etcd_log.display()
        );
    };
    let etcd_url = format!("http://127.0.0.1:{client_port}");
    watchdog(&pids, &dir)?;

    // kube-apiserver: static token auth (admin in system:masters), self-signed serving cert.
    openssl(&["genrsa", "-out", "sa.key", "2048"], &dir)?;
    openssl(&["rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub"], &dir)?;
    let token = format!("admin-{}{}", random_suffix(), random_suffix());
    let operator_token = format!("operator-{}{}", random_suffix(), random_suffix());
    std::fs::write(
        dir.join("tokens.csv"),
        std::iter::once(format!("{token},admin,uid-admin,\"system:masters\""))
            .chain(std::iter::once(audit::operator_token_line(&operator_token)))
            .chain(opts.node.iter().flat_map(|n| n.tokens.iter().cloned()))
            .map(|line| line + "\n")
            .collect::<String>(),
    )?;
    let port = free_port()?;
    let host = opts
        .node
        .as_ref()
        .map_or("127.0.0.1".to_owned(), |n| n.address.to_string());
    let server = format!("https://{host}:{port}");
    let mut apiserver_args: Vec<String> = vec![
        format!("--etcd-servers={etcd_url}"),
        format!("--cert-dir={}", dir.join("certs").display()),
        format!("--secure-port={port}"),
        format!("--bind-address={host}"),
        format!("--advertise-address={host}"),
        "--allow-privileged=true".into(),
        format!("--token-auth-file={}", dir.join("tokens.csv").display()),
        format!("--service-account-issuer={server}/"),
        format!(
            "--service-account-key-file={}",
            dir.join("sa.pub").display()
        ),
        format!(
            "--service-account-signing-key-file={}",
            dir.join("sa.key").display()
        ),
        "--v=0".into(),
    ];
    apiserver_args.extend(audit::apiserver_args(&dir, &random_suffix())?);
    match &opts.node {
        None => apiserver_args.extend([
            // 1.37 refuses a loopback advertise address with the endpoint reconciler.
            "--endpoint-reconciler-type=none".to_owned(),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            "--disable-admission-plugins=ServiceAccount".into(),
            // As on OpenShift: setting ownerReferences needs delete on the object and
            // blockOwnerDeletion update on the owner's finalizers (rbac-audit relies on it).
            "--enable-admission-plugins=OwnerReferencesPermissionEnforcement".into(),
            "--authorization-mode=RBAC".into(),
        ]),
        Some(node) => apiserver_args.extend([
            format!("--service-cluster-ip-range={}", node.service_cidr),
            "--enable-admission-plugins=NodeRestriction,OwnerReferencesPermissionEnforcement"
                .into(),
            "--authorization-mode=Node,RBAC".into(),
            format!("--tls-cert-file={}", node.serving_crt.display()),
            format!("--tls-private-key-file={}", node.serving_key.display()),
            format!(
                "--kubelet-client-certificate={}",
                node.kubelet_client_crt.display()
            ),
            format!("--kubelet-client-key={}", node.kubelet_client_key.display()),
            format!("--kubelet-certificate-authority={}", node.ca_crt.display()),
            // The node's name resolves nowhere; its InternalIP is where the kubelet listens.
            "--kubelet-preferred-address-types=InternalIP".into(),
        ]),
    }
    let apiserver_log = logs.join("kube-apiserver.log");
    let child = spawn_child(&apiserver, &apiserver_args, File::create(&apiserver_log)?)?;
    pids.push(child.id());
    let apiserver_proc = Apiserver {
        bin: apiserver,
        args: apiserver_args,
        log: apiserver_log,
        child: Mutex::new(Some(child)),
    };
    watchdog(&pids, &dir)?;
    // The apiserver stops through its child handle (its pid changes on a restart).
    pids.pop();
    let kubeconfig_path = dir.join("admin.kubeconfig");
    let kubeconfig_text = match &opts.node {
        None => kubeconfig::render(&server, &token),
        Some(node) => kubeconfig::render_with_ca(&server, &token, &node.ca_crt),
    };
    std::fs::write(&kubeconfig_path, kubeconfig_text)?;
    let operator_kubeconfig = dir.join("operator.kubeconfig");
    std::fs::write(
        &operator_kubeconfig,
        kubeconfig::render(&server, &operator_token),
    )?;
    let cp = ControlPlane {
        server,
        kubeconfig: kubeconfig_path.clone(),
        dir: dir.clone(),
        apiserver: std::sync::Arc::new(apiserver_proc),
        pids: Mutex::new(pids),
    };
    wait_apiserver(&kubeconfig_path, &logs.join("kube-apiserver.log")).await?;

    if opts.controller_manager {
        let kcm = tool("kube-controller-manager")?;
        let mut args = vec![
            format!("--kubeconfig={}", kubeconfig_path.display()),
            format!("--authentication-kubeconfig={}", kubeconfig_path.display()),
            format!("--authorization-kubeconfig={}", kubeconfig_path.display()),
            "--leader-elect=false".into(),
            format!("--secure-port={}", free_port()?),
            "--bind-address=127.0.0.1".into(),
            "--concurrent-gc-syncs=5".into(),
            "--v=0".into(),
        ];
        match &opts.node {
            None => args.push("--controllers=garbage-collector-controller,namespace-controller,deployment-controller,replicaset-controller,clusterrole-aggregation-controller".into()),
            // Pods need them all: service accounts and their root CA, endpoint slices,
            // disruption budgets, node lifecycle, and the tokens' signing key.
            Some(node) => args.extend([
                "--controllers=*".to_owned(),
                format!(
                    "--service-account-private-key-file={}",
                    dir.join("sa.key").display()
                ),
                format!("--root-ca-file={}", node.ca_crt.display()),
                format!("--service-cluster-ip-range={}", node.service_cidr),
            ]),
        }
        cp.adopt(spawn(
            &kcm,
            &args,
            &logs.join("kube-controller-manager.log"),
        )?)?;
    }
    Ok(cp)
}
