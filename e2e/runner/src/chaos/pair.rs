//! Two operator replicas with leader election (Lease `terdut-system/terdut-operator`,
//! identities `chaos-a` and `chaos-b`) and the failover of their leader: measured from the
//! signal to the other replica holding the Lease, and to its `/readyz` answering
//! `ready: leader` (caches synced, reconciling).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::bail;
use terdut_testenv::Restartable;

use crate::cluster::{Kube, LEASE_NS};

/// How long a failover (or the pair's first election) may take before the run gives up.
const FAILOVER_LIMIT: Duration = Duration::from_secs(60);
/// How long a SIGTERMed replica gets to exit before it is SIGKILLed.
const REAP_LIMIT: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub struct Replica {
    pub identity: String,
    port: u16,
    pub proc: Restartable,
}

/// Replicas `chaos-a` and `chaos-b`.
#[derive(Debug)]
pub struct Pair {
    pub replicas: [Replica; 2],
    /// Replicas that exited without being signalled by the run.
    pub exits: u64,
}

impl Pair {
    /// `operator`: the binary; `ports`: the two replicas' HTTP ports.
    pub fn new(operator: &Path, work: &Path, operator_kubeconfig: &Path, ports: [u16; 2]) -> Self {
        let replica = |n: &str, port: u16| Replica {
            identity: format!("chaos-{n}"),
            port,
            proc: Restartable::new(
                format!("chaos: operator-{n}"),
                operator,
                work.join(format!("operator-{n}.log")),
            )
            .args([
                "--leader-elect=true".to_owned(),
                format!("--lease-namespace={LEASE_NS}"),
                "--test-hooks".into(),
                "--log-format=text".into(),
                "--http-addr".into(),
                format!("127.0.0.1:{port}"),
                "--server-url-template".into(),
                "http://127.0.0.1:{port}".into(),
            ])
            .env("KUBECONFIG", operator_kubeconfig)
            .env("RUST_BACKTRACE", "0")
            .env("POD_NAME", format!("chaos-{n}")),
        };
        Self {
            replicas: [replica("a", ports[0]), replica("b", ports[1])],
            exits: 0,
        }
    }

    fn index(&self, identity: Option<&str>) -> Option<usize> {
        self.replicas
            .iter()
            .position(|r| Some(r.identity.as_str()) == identity)
    }

    /// Starts both; returns the identity of the first ready leader.
    pub async fn start(&mut self, kube: &Kube, http: &reqwest::Client) -> anyhow::Result<String> {
        for r in &mut self.replicas {
            r.proc.start()?;
        }
        let started = Instant::now();
        while started.elapsed() < FAILOVER_LIMIT {
            let holder = kube.lease_holder().await;
            if let Some(i) = self.index(holder.as_deref())
                && readyz(http, self.replicas[i].port).await == "ready: leader"
            {
                return Ok(self.replicas[i].identity.clone());
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        bail!("no replica became a ready leader")
    }

    /// Starts any replica found dead (and counts it: nobody signalled it).
    pub fn restart_dead(&mut self) -> anyhow::Result<()> {
        for r in &mut self.replicas {
            if !r.proc.running() {
                self.exits += 1;
                r.proc.start()?;
            }
        }
        Ok(())
    }

    /// Signals the leader; returns (seconds until the other holds the Lease, seconds until
    /// it reconciles) and starts the old leader again as the standby.
    pub async fn failover(
        &mut self,
        kube: &Kube,
        http: &reqwest::Client,
        graceful: bool,
    ) -> anyhow::Result<(f64, f64)> {
        let mut holder = kube.lease_holder().await;
        // A failed read is no verdict on the Lease.
        for _ in 0..10 {
            if self.index(holder.as_deref()).is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            holder = kube.lease_holder().await;
        }
        let Some(old) = self.index(holder.as_deref()) else {
            bail!("lease held by {holder:?}, not by a replica");
        };
        let new = 1 - old;
        if !self.replicas[new].proc.running() {
            self.exits += 1;
            self.replicas[new].proc.start()?;
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        let started = Instant::now();
        let leader = &mut self.replicas[old].proc;
        if leader.running() {
            if graceful {
                leader.terminate()?;
            } else {
                leader.kill();
            }
        }
        let (mut lease_at, mut ready_at) = (None, None);
        let new_identity = self.replicas[new].identity.clone();
        while started.elapsed() < FAILOVER_LIMIT && ready_at.is_none() {
            if lease_at.is_none() && kube.lease_holder().await.as_deref() == Some(&new_identity) {
                lease_at = Some(started.elapsed().as_secs_f64());
            }
            if lease_at.is_some() && readyz(http, self.replicas[new].port).await == "ready: leader"
            {
                ready_at = Some(started.elapsed().as_secs_f64());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (Some(lease_s), Some(ready_s)) = (lease_at, ready_at) else {
            bail!(
                "{new_identity} did not take over within {FAILOVER_LIMIT:?} (lease at {lease_at:?})"
            );
        };
        let old = &mut self.replicas[old].proc;
        old.reap(REAP_LIMIT);
        old.start()?;
        Ok((lease_s, ready_s))
    }
}

/// `/readyz`'s body; empty while standing by (503) or starting (refused).
async fn readyz(http: &reqwest::Client, port: u16) -> String {
    let body = async {
        http.get(format!("http://127.0.0.1:{port}/readyz"))
            .timeout(Duration::from_secs(1))
            .send()
            .await?
            .error_for_status()?
            .text()
            .await
    };
    body.await.map(|t| t.trim().to_owned()).unwrap_or_default()
}
