//! The run's own kube client (the admin kubeconfig): server-side applies of the workload under
//! field manager `chaos`, deletions, and the reads the checks make, each read retried so that a
//! read through a restarting kube-apiserver is never taken for an empty cluster.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde::de::DeserializeOwned;
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutServer, TerdutTeam};

use crate::workload::{Changes, Kind, Manifest, NS};

/// Where the operator's leader election keeps its Lease (the chart's namespace and name).
pub const LEASE_NS: &str = "terdut-system";
pub const LEASE: &str = "terdut-operator";
const FIELD_MANAGER: &str = "chaos";

#[derive(Clone)]
pub struct Kube {
    pub client: Client,
}

impl std::fmt::Debug for Kube {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Kube")
    }
}

impl Kube {
    /// The client of `KUBECONFIG`; a request through a dead apiserver fails within seconds
    /// instead of hanging.
    pub async fn connect() -> anyhow::Result<Self> {
        let mut config = kube::Config::infer().await?;
        config.connect_timeout = Some(Duration::from_secs(5));
        config.read_timeout = Some(Duration::from_secs(15));
        Ok(Self {
            client: Client::try_from(config)?,
        })
    }

    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), NS)
    }

    pub async fn create_namespace(&self, name: &str) -> anyhow::Result<()> {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(self.client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .with_context(|| format!("creating namespace {name}"))?;
        Ok(())
    }

    pub async fn apply_server(&self, server: &TerdutServer) -> anyhow::Result<()> {
        let name = server.metadata.name.clone().unwrap_or_default();
        self.api::<TerdutServer>()
            .patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Apply(server),
            )
            .await
            .with_context(|| format!("applying TerdutServer {name}"))?;
        Ok(())
    }

    /// Server-side apply of every manifest, in order.
    pub async fn apply(&self, manifests: &[Manifest]) -> anyhow::Result<()> {
        let pp = PatchParams::apply(FIELD_MANAGER);
        for m in manifests {
            let name = m.name().to_owned();
            match m {
                Manifest::Team(t) => self
                    .api::<TerdutTeam>()
                    .patch(&name, &pp, &Patch::Apply(&**t))
                    .await
                    .map(drop),
                Manifest::Source(s) => self
                    .api::<TerdutAlertSource>()
                    .patch(&name, &pp, &Patch::Apply(&**s))
                    .await
                    .map(drop),
            }
            .with_context(|| format!("applying {name}"))?;
        }
        Ok(())
    }

    /// A wave's changes: its applies, then its deletions (a 404 is an error).
    pub async fn send(&self, changes: &Changes) -> anyhow::Result<()> {
        self.apply(&changes.apply).await?;
        self.delete(&changes.delete, false).await
    }

    /// Deletes without waiting for finalizers; `missing_ok`: a 404 is not an error.
    pub async fn delete(
        &self,
        deletions: &[(Kind, String)],
        missing_ok: bool,
    ) -> anyhow::Result<()> {
        let dp = DeleteParams::default();
        for (kind, name) in deletions {
            let result = match kind {
                Kind::Team => self.api::<TerdutTeam>().delete(name, &dp).await.map(drop),
                Kind::Source => self
                    .api::<TerdutAlertSource>()
                    .delete(name, &dp)
                    .await
                    .map(drop),
            };
            match result {
                Err(kube::Error::Api(s)) if missing_ok && s.code == 404 => {}
                other => other.with_context(|| format!("deleting {kind:?} {name}"))?,
            }
        }
        Ok(())
    }

    /// [`apply`](Self::apply) and [`delete`](Self::delete) through a freshly restarted
    /// apiserver: its first seconds of answers can still be errors while it warms up.
    pub async fn apply_retrying(
        &self,
        manifests: &[Manifest],
        deletions: &[(Kind, String)],
    ) -> anyhow::Result<()> {
        const TRIES: u32 = 20;
        let mut attempt = 0;
        loop {
            let result = async {
                self.apply(manifests).await?;
                self.delete(deletions, true).await
            }
            .await;
            attempt += 1;
            match result {
                Err(_) if attempt < TRIES => {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                other => return other,
            }
        }
    }

    async fn list<K>(&self) -> anyhow::Result<Vec<K>>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
        <K as kube::Resource>::DynamicType: Default,
    {
        const TRIES: u64 = 10;
        let api = self.api::<K>();
        let mut last = None;
        for attempt in 0..TRIES {
            match api.list(&ListParams::default()).await {
                Ok(list) => return Ok(list.items),
                Err(e) => last = Some(e),
            }
            tokio::time::sleep(Duration::from_secs(1 + attempt)).await;
        }
        Err(anyhow::anyhow!(
            "listing {} failed {TRIES} times: {:?}",
            K::plural(&Default::default()),
            last
        ))
    }

    /// Every TerdutTeam of the run, by name.
    pub async fn teams(&self) -> anyhow::Result<BTreeMap<String, TerdutTeam>> {
        Ok(by_name(self.list::<TerdutTeam>().await?))
    }

    pub async fn sources(&self) -> anyhow::Result<BTreeMap<String, TerdutAlertSource>> {
        Ok(by_name(self.list::<TerdutAlertSource>().await?))
    }

    pub async fn secrets(&self) -> anyhow::Result<Vec<Secret>> {
        self.list::<Secret>().await
    }

    pub async fn secret(&self, name: &str) -> anyhow::Result<Option<Secret>> {
        Ok(self.api::<Secret>().get_opt(name).await?)
    }

    /// Who holds the operator's Lease; `None` when it cannot be read or nobody does.
    pub async fn lease_holder(&self) -> Option<String> {
        let lease = Api::<Lease>::namespaced(self.client.clone(), LEASE_NS)
            .get_opt(LEASE)
            .await
            .ok()??;
        lease.spec?.holder_identity.filter(|h| !h.is_empty())
    }

    /// The kube-apiserver's own `/metrics`; empty when it cannot be read.
    pub async fn apiserver_metrics(&self) -> String {
        let Ok(request) = http::Request::get("/metrics").body(vec![]) else {
            return String::new();
        };
        self.client.request_text(request).await.unwrap_or_default()
    }
}

fn by_name<K: kube::Resource>(items: Vec<K>) -> BTreeMap<String, K> {
    items
        .into_iter()
        .map(|o| (o.meta().name.clone().unwrap_or_default(), o))
        .collect()
}
