//! What every step of a run shares: the mode, the clients, how the cluster is reached, the
//! verdicts.

use std::path::PathBuf;

use kube::Client;
use terdut_standin::AdminClient;

use crate::checks::Checks;
use crate::examples::{SERVER, SERVER_NS, SERVER_PORT};
use crate::kubectl::Kubectl;
use crate::reach::Reach;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// The local control plane; the operator and the stand-in as processes (`just e2e-local`).
    Local,
    /// The single-node cluster of this machine, with the images (`just e2e-node`).
    Node,
    /// A kind cluster with the images loaded (`just e2e`).
    Kind,
    /// The faults a node has, on this machine's node (`just node-chaos`, docs/reliability.md).
    NodeChaos,
    /// `helm upgrade` from the previous version and `helm rollback`, on this machine's node
    /// (`just upgrade-check`, docs/upgrade.md).
    Upgrade,
}

pub struct Run {
    pub mode: Mode,
    pub client: Client,
    /// The same without kube's retries of 429 and 503: an eviction a disruption budget
    /// refuses answers 429, which is the verdict, not something to retry for minutes.
    pub client_no_retry: Client,
    pub kubectl: Kubectl,
    pub reach: Reach,
    pub checks: Checks,
    pub http: reqwest::Client,
    /// `promtool check metrics` over the operator's /metrics, when promtool is at hand.
    pub promtool: Option<PathBuf>,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Run")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl Run {
    pub fn new(
        mode: Mode,
        config: kube::Config,
        kubectl: Kubectl,
        reach: Reach,
    ) -> anyhow::Result<Self> {
        terdut_standin::init_tls();
        let client = Client::try_from(config.clone())?;
        let mut no_retry = config;
        no_retry.default_retry = false;
        Ok(Self {
            mode,
            client,
            client_no_retry: Client::try_from(no_retry)?,
            kubectl,
            reach,
            checks: Checks::default(),
            // No pooled connections: one kept alive through a ClusterIP outlives the pod it was
            // translated to, and after a roll its packets go nowhere until the timeout.
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .connect_timeout(std::time::Duration::from_secs(3))
                .timeout(std::time::Duration::from_secs(10))
                .build()
                .expect("a reqwest client with only a timeout set builds"),
            promtool: None,
        })
    }

    /// The client config of a kubeconfig file.
    pub async fn config_of(path: &std::path::Path) -> anyhow::Result<kube::Config> {
        let kc = kube::config::Kubeconfig::read_from(path)?;
        Ok(
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await?,
        )
    }

    /// Base URL of the example TerdutServer's API: its Service (or the local stand-in).
    pub async fn server_url(&self) -> anyhow::Result<String> {
        self.reach
            .service(&self.client, SERVER_NS, SERVER, SERVER_PORT)
            .await
    }

    /// Waits until the server answers through its Service: a Service's address works only
    /// once kube-proxy has written its rules, a moment after its pods turn Ready. The address
    /// is asked for on every try: a port-forward (kind) ends with the pod it went to.
    pub async fn wait_server(&self) -> anyhow::Result<()> {
        crate::wait::until(
            "the server through its Service",
            std::time::Duration::from_secs(60),
            || async {
                let url = format!("{}/healthz", self.server_url().await?);
                Ok(self
                    .http
                    .get(&url)
                    .send()
                    .await?
                    .status()
                    .is_success()
                    .then_some(()))
            },
        )
        .await
    }

    /// The stand-in's test-only admin surface, through the same Service.
    pub async fn admin(&self) -> anyhow::Result<AdminClient> {
        Ok(AdminClient::new(self.server_url().await?, None))
    }
}
