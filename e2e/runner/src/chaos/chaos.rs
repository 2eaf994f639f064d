//! What a run holds: its plan, clients, the workload model and its generators, the processes
//! it kills (the operator, the stand-in, the pair of replicas) and its verdicts; and the
//! bring-up (namespace, operator, TerdutServer, stand-in keyed with the operator's key).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::Context as _;
use terdut_crds::v1alpha1::TerdutServer;
use terdut_standin::AdminClient;
use terdut_testenv::Restartable;
use terdut_testenv::local_cluster::LocalCluster;

use crate::args::Plan;
use crate::cluster::Kube;
use crate::counts::Counts;
use crate::pair::Pair;
use crate::pyrandom::PyRandom;
use crate::report::{Report, log};
use crate::workload::{Model, NS, SERVER, USERS};

/// The operator key Secret of a TerdutServer is `<server>-operator-key`, the key under
/// `token` (docs/design.md §6).
const OPERATOR_KEY_SUFFIX: &str = "-operator-key";
const OPERATOR_KEY: &str = "token";

pub struct Chaos {
    pub plan: Plan,
    pub kube: Kube,
    pub admin: AdminClient,
    /// For the operators' `/metrics` and `/readyz` and the stand-in's `/healthz`: no pooled
    /// connections, the processes behind them die all the time.
    pub http: reqwest::Client,
    pub model: Model,
    /// The generator of kill moments and failover order, apart from the workload's.
    pub kill_rng: PyRandom,
    pub counts: Arc<Counts>,
    pub report: Report,
    /// The single `--leader-elect=false` operator; the killers share it.
    pub operator: Arc<Mutex<Restartable>>,
    pub operator_log: PathBuf,
    pub standin: Option<Restartable>,
    pub pair: Pair,
    pub pair_up: bool,
    pub cluster: Option<LocalCluster>,
    pub metrics_url: String,
    pub work: PathBuf,
    standin_bin: PathBuf,
    /// Every webhook key read, to prove none reached an operator log; never printed.
    pub seen_keys: HashSet<String>,
    pub operator_key: Option<String>,
}

impl std::fmt::Debug for Chaos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chaos")
            .field("plan", &self.plan)
            .finish_non_exhaustive()
    }
}

fn env_path(name: &str) -> anyhow::Result<PathBuf> {
    std::env::var_os(name)
        .map(PathBuf::from)
        .with_context(|| format!("{name} is not set (e2e/chaos.sh sets it)"))
}

impl Chaos {
    /// From the environment e2e/chaos.sh sets: KUBECONFIG (admin), WORK, TARGET_BIN,
    /// STANDIN_BIN, OPERATOR_HTTP_PORT, LOCAL_CLUSTER_PID.
    pub async fn new(plan: Plan) -> anyhow::Result<Self> {
        terdut_standin::init_tls();
        let work = env_path("WORK")?;
        let target = env_path("TARGET_BIN")?;
        let http_port: u16 = std::env::var("OPERATOR_HTTP_PORT")
            .unwrap_or_else(|_| "19464".into())
            .parse()
            .context("OPERATOR_HTTP_PORT")?;
        let operator_kubeconfig = work.join("operator.kubeconfig");
        let operator_bin = target.join("terdut-operator");
        let operator_log = work.join("operator.log");
        let operator = Restartable::new("chaos: operator", &operator_bin, &operator_log)
            .args([
                "--leader-elect=false".to_owned(),
                "--test-hooks".into(),
                "--log-format=text".into(),
                "--http-addr".into(),
                format!("127.0.0.1:{http_port}"),
                "--server-url-template".into(),
                "http://127.0.0.1:{port}".into(),
            ])
            .env("KUBECONFIG", &operator_kubeconfig)
            .env("RUST_BACKTRACE", "0");
        let cluster = match std::env::var("LOCAL_CLUSTER_PID") {
            Ok(pid) => Some(LocalCluster::new(
                pid.parse().context("LOCAL_CLUSTER_PID")?,
                &env_path("KUBECONFIG")?,
            )),
            Err(_) => None,
        };
        // Two generators, as the run was first written: the workload's and the killers'.
        let rng = PyRandom::new(plan.seed);
        let kill_rng = PyRandom::new(plan.seed + 1);
        Ok(Self {
            kube: Kube::connect().await?,
            admin: AdminClient::new(format!("http://127.0.0.1:{}", plan.port), None),
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .timeout(Duration::from_secs(5))
                .build()?,
            model: Model::new(rng, plan.hook_every),
            kill_rng,
            counts: Arc::default(),
            report: Report::default(),
            operator: Arc::new(Mutex::new(operator)),
            operator_log,
            standin: None,
            pair: Pair::new(
                &operator_bin,
                &work,
                &operator_kubeconfig,
                [http_port + 1, http_port + 2],
            ),
            pair_up: false,
            cluster,
            metrics_url: format!("http://127.0.0.1:{http_port}/metrics"),
            standin_bin: env_path("STANDIN_BIN")?,
            work,
            seen_keys: HashSet::new(),
            operator_key: None,
            plan,
        })
    }

    pub fn operator(&self) -> anyhow::Result<MutexGuard<'_, Restartable>> {
        self.operator
            .lock()
            .map_err(|_| anyhow::anyhow!("the operator's lock is poisoned"))
    }

    pub fn standin_proc(&mut self) -> anyhow::Result<&mut Restartable> {
        self.standin
            .as_mut()
            .context("the stand-in was never started")
    }

    /// Waits until the stand-in answers `/healthz`.
    pub async fn wait_standin(&self) -> anyhow::Result<()> {
        let url = format!("http://127.0.0.1:{}/healthz", self.plan.port);
        wait_for("the stand-in", Duration::from_secs(30), || async {
            let r = self
                .http
                .get(&url)
                .timeout(Duration::from_secs(2))
                .send()
                .await;
            Ok(r.is_ok_and(|r| r.status().is_success()).then_some(()))
        })
        .await
    }

    /// Namespace, operator, TerdutServer, then the stand-in with the key the operator minted,
    /// and the users the ladders page.
    pub async fn bring_up(&mut self) -> anyhow::Result<()> {
        self.kube.create_namespace(NS).await?;
        self.operator()?.start()?;
        self.kube.apply_server(&server(self.plan.port)?).await?;
        let kube = self.kube.clone();
        let secret = wait_for(
            "the operator key Secret",
            Duration::from_secs(120),
            || async { kube.secret(&format!("{SERVER}{OPERATOR_KEY_SUFFIX}")).await },
        )
        .await?;
        let key = secret
            .data
            .as_ref()
            .and_then(|d| d.get(OPERATOR_KEY))
            .map(|v| String::from_utf8_lossy(&v.0).into_owned())
            .context("the operator key Secret has no token")?;
        let standin = Restartable::new(
            "chaos: standin",
            &self.standin_bin,
            self.work.join("standin.log"),
        )
        .args([
            "--listen".to_owned(),
            format!("127.0.0.1:{}", self.plan.port),
            "--admin".into(),
            "--data-file".into(),
            self.work.join("standin-data.json").display().to_string(),
        ])
        .env("TERDUT_OPERATOR_KEY", &key);
        self.operator_key = Some(key);
        self.standin.insert(standin).start()?;
        self.wait_standin().await?;
        self.admin.seed_users(USERS).await?;
        log(&format!(
            "up: TerdutServer {NS}/{SERVER}, stand-in at http://127.0.0.1:{}, operator with \
             --test-hooks",
            self.plan.port
        ));
        Ok(())
    }

    /// Kills whatever still runs.
    pub fn stop(&mut self) {
        if let Ok(mut op) = self.operator() {
            op.kill();
        }
        if let Some(s) = self.standin.as_mut() {
            s.kill();
        }
        for r in &mut self.pair.replicas {
            r.proc.kill();
        }
    }
}

/// The run's TerdutServer: the stand-in's port as its servicePort (the operator reaches
/// `http://127.0.0.1:{servicePort}`); its Deployment never gets a pod here.
fn server(port: u16) -> anyhow::Result<TerdutServer> {
    let mut s: TerdutServer = serde_json::from_value(serde_json::json!({
        "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutServer",
        "metadata": {"name": SERVER, "namespace": NS},
        "spec": {
            "image": {"tag": "v0.9.3"},
            "networking": {"hostname": "terdut.chaos.example", "servicePort": port},
            "database": {"dsn": "postgres://terdut@pg:5432/terdut",
                         "passwordSecretRef": {"name": "pg", "key": "password"}},
        },
    }))?;
    s.metadata.namespace = Some(NS.to_owned());
    Ok(s)
}

/// Polls `probe` every 0.5 s until it returns `Some`, for at most `limit`.
pub async fn wait_for<T, F, Fut>(what: &str, limit: Duration, mut probe: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Ok(Some(v)) = probe().await {
            return Ok(v);
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!("timed out after {limit:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
