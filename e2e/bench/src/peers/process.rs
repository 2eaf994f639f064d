//! The peers as processes of their own: (a) the release operator binary, (b) the kube-runtime
//! Controller peer (`terdut-peer-kube`), (d) the controller-runtime peer (`terdut-peer-go`),
//! each with the same flags where they have them, as the audited operator identity, and what
//! the bench reads of them: CPU seconds, RSS and its peak (`/proc`), and for (a) its metrics.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One of the implementations compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum Peer {
    /// This operator: the actor tree.
    A,
    /// This operator as an earlier commit built it (`--operator-before`): the same flags, for a
    /// before/after of a refactor on one control plane and one set of stand-ins.
    A0,
    /// kube-runtime `Controller`s (idiomatic: predicates, `finalizer()`), at (a)'s concurrency.
    B,
    /// controller-runtime, `MaxConcurrentReconciles` 1 (the seed design).
    D1,
    /// controller-runtime, `MaxConcurrentReconciles` as (a)'s.
    DN,
}

impl Peer {
    pub fn label(self) -> &'static str {
        match self {
            Self::A => "a",
            Self::A0 => "a0",
            Self::B => "b",
            Self::D1 => "d1",
            Self::DN => "dN",
        }
    }

    pub fn parse(s: &str) -> anyhow::Result<Self> {
        Ok(match s.trim() {
            "a" => Self::A,
            "a0" => Self::A0,
            "b" => Self::B,
            "d1" => Self::D1,
            "dN" | "dn" => Self::DN,
            other => anyhow::bail!("unknown peer {other:?} (a, a0, b, d1, dN)"),
        })
    }

    /// Whether the peer reconciles TerdutServers itself (else the bench makes their key Secrets).
    pub fn has_server_actors(self) -> bool {
        matches!(self, Self::A | Self::A0 | Self::B)
    }
}

/// Where the binaries are and what every peer is given.
#[derive(Clone, Debug)]
pub struct Launch {
    pub operator_bin: PathBuf,
    /// (a0)'s binary, and the allocator library it shipped preloaded with (its image's
    /// `LD_PRELOAD`), if any.
    pub operator_before: Option<(PathBuf, Option<PathBuf>)>,
    pub peer_kube_bin: PathBuf,
    pub peer_go_bin: Option<PathBuf>,
    pub kubeconfig: PathBuf,
    pub resync: Duration,
    pub concurrency: u16,
    pub logs: PathBuf,
}

/// A running peer.
pub struct Running {
    pub peer: Peer,
    child: Child,
    pub metrics_port: Option<u16>,
}

impl Launch {
    /// Starts `peer` watching `namespace` (with `selector`, (a) only).
    pub fn start(
        &self,
        peer: Peer,
        namespace: &str,
        selector: Option<&str>,
        tag: &str,
    ) -> anyhow::Result<Running> {
        let resync = format!("{}s", self.resync.as_secs());
        let n = self.concurrency.to_string();
        let port = super::super::fixtures::free_port()?;
        let (bin, args, metrics_port): (&Path, Vec<String>, Option<u16>) = match peer {
            Peer::A | Peer::A0 => {
                let mut a = vec![
                    "--leader-elect=false".into(),
                    "--log-format=text".into(),
                    "--log-level=warn".into(),
                    format!("--http-addr=127.0.0.1:{port}"),
                    "--server-url-template=http://127.0.0.1:{port}".into(),
                    format!("--watch-namespaces={namespace}"),
                    // Its team records and instance claim live in its own namespace (in a pod
                    // POD_NAMESPACE): the watched one here, as in the in-process run.
                    format!("--lease-namespace={namespace}"),
                    format!("--resync={resync}"),
                    format!("--max-concurrent-reconciles={n}"),
                ];
                if let Some(s) = selector {
                    a.push(format!("--selector={s}"));
                }
                let bin = match (peer, &self.operator_before) {
                    (Peer::A, _) => &self.operator_bin,
                    (_, Some((before, _))) => before,
                    (_, None) => anyhow::bail!("no --operator-before binary given"),
                };
                (bin.as_path(), a, Some(port))
            }
            Peer::B => (
                &self.peer_kube_bin,
                vec![
                    format!("--watch-namespace={namespace}"),
                    "--server-url-template=http://127.0.0.1:{port}".into(),
                    format!("--resync={resync}"),
                    format!("--max-concurrent-reconciles={n}"),
                ],
                None,
            ),
            Peer::D1 | Peer::DN => (
                self.peer_go_bin
                    .as_deref()
                    .ok_or_else(|| anyhow::anyhow!("no --peer-go binary given"))?,
                vec![
                    format!("--watch-namespace={namespace}"),
                    "--server-url-template=http://127.0.0.1:{port}".into(),
                    format!("--resync={resync}"),
                    format!(
                        "--max-concurrent-reconciles={}",
                        if peer == Peer::D1 { "1" } else { n.as_str() }
                    ),
                ],
                None,
            ),
        };
        std::fs::create_dir_all(&self.logs)?;
        let log = std::fs::File::create(self.logs.join(format!("{}-{tag}.log", peer.label())))?;
        let mut command = Command::new(bin);
        if let (Peer::A0, Some((_, Some(preload)))) = (peer, &self.operator_before) {
            command
                .env("LD_PRELOAD", preload)
                .env("MALLOC_CONF", "background_thread:true");
        }
        let child = command
            .args(&args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("RUST_LOG", "warn,kube_client::client::tls=error")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .map_err(|e| anyhow::anyhow!("starting {}: {e}", bin.display()))?;
        Ok(Running {
            peer,
            child,
            metrics_port,
        })
    }
}

impl Running {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the peer at once (SIGKILL: a failover, not a graceful hand-over).
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Whether it still runs.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// User + system CPU seconds so far (`/proc/<pid>/stat`, clock ticks of 1/100 s).
    pub fn cpu_secs(&self) -> f64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap_or_default();
        // The command name may hold spaces: fields count from after its closing parenthesis.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        // utime and stime are fields 14 and 15 of stat(5); here 12 and 13 after the name.
        (ticks(11) + ticks(12)) / 100.0
    }

    /// `VmRSS` and `VmHWM` in MiB.
    pub fn rss_mib(&self) -> (f64, f64) {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        let kib = |field: &str| {
            status
                .lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        (kib("VmRSS:") / 1024.0, kib("VmHWM:") / 1024.0)
    }

    /// (a)'s actors alive (team and source), from its /metrics; `None` for the other peers.
    pub async fn actors_alive(&self) -> Option<f64> {
        let port = self.metrics_port?;
        let text = http_get(port, "/metrics").await.ok()?;
        let mut alive = 0.0;
        for line in text.lines() {
            if line.starts_with("terdut_operator_actors_active{")
                && (line.contains("kind=\"team\"") || line.contains("kind=\"source\""))
            {
                alive += line
                    .rsplit(' ')
                    .next()
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or(0.0);
            }
        }
        Some(alive)
    }

    /// (a)'s heap figures from its /metrics (`heap_bytes`), in MiB.
    pub async fn heap(&self) -> Value {
        let Some(port) = self.metrics_port else {
            return Value::Null;
        };
        let text = http_get(port, "/metrics").await.unwrap_or_default();
        let mut out = serde_json::Map::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("terdut_operator_heap_bytes{") {
                let state = if rest.contains("state=\"in_use\"") {
                    "in_use_mib"
                } else {
                    "free_mib"
                };
                let v = rest
                    .rsplit(' ')
                    .next()
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or(0.0);
                out.insert(state.into(), json!((v / 1048576.0 * 10.0).round() / 10.0));
            }
        }
        Value::Object(out)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain HTTP/1.0 GET on loopback (the bench has no HTTP client of its own).
async fn http_get(port: u16, path: &str) -> anyhow::Result<String> {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .await?;
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf)).await??;
    let text = String::from_utf8_lossy(&buf).into_owned();
    Ok(text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default())
}
