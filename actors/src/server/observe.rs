//! The observing half of a TerdutServer pass. The owned objects come from the informer caches,
//! which show only what carries the operator's labels; so before the operator creates or
//! applies one, a live metadata read of its name says whether something it does not control
//! is there (docs/design.md §1: a Deployment or Service the terdut-server chart installed is never
//! taken over). Live reads too: the Secrets the spec names (whether they and their keys
//! exist, and their version, never a value kept), and the Zalando `postgresql` with its master
//! Service or the CloudNativePG `Cluster` with its `-rw` Service (docs/design.md §8: those CRDs
//! are optional and not watched). In steady state every owned object is in the cache and the
//! only live reads are the named Secrets and the named cluster.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::reflector::ObjectRef;
use terdut_crds::v1alpha1::TerdutServer;
use terdut_crds::v1alpha1::server::TeamCounts;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::NamespaceResourceScope;
use serde::de::DeserializeOwned;

use super::cnpg::{self, CnpgObservation, RwService, rw_service_name};
use super::database::{ClusterObservation, MasterService, cluster_ref};
use super::names::{deployment_name, key_secret_name, pdb_name, service_name};
use super::plan::{Observed, Unlisted};
use super::references::{Checked, Found, SecretVersion};
use crate::consent::{Consent, decide};
use crate::context::Ctx;
use crate::error::{KubeCall, ReconcileError};
use crate::key::ObjectKey;

/// Owned observations; [`Self::as_observed`] lends them to the pure planner.
#[derive(Debug, Default)]
pub struct Observation {
    pub key_secret: Option<Arc<Secret>>,
    pub database_cluster: Option<ClusterObservation>,
    pub cnpg_cluster: Option<CnpgObservation>,
    pub deployment: Option<Arc<Deployment>>,
    pub service: Option<Arc<Service>>,
    pub pdb: Option<Arc<PodDisruptionBudget>>,
    pub unlisted: UnlistedMeta,
    pub references: Vec<Checked>,
    pub cluster_domain: String,
    pub url: String,
    pub teams: TeamCounts,
}

/// The metadata of objects the caches do not show (see `plan::Unlisted`).
#[derive(Debug, Default)]
pub struct UnlistedMeta {
    pub deployment: Option<ObjectMeta>,
    pub service: Option<ObjectMeta>,
    pub pdb: Option<ObjectMeta>,
    pub key_secret: Option<ObjectMeta>,
}

impl Observation {
    pub fn as_observed(&self) -> Observed<'_> {
        Observed {
            key_secret: self.key_secret.as_deref(),
            database_cluster: self.database_cluster.as_ref(),
            cnpg_cluster: self.cnpg_cluster.as_ref(),
            deployment: self.deployment.as_deref(),
            service: self.service.as_deref(),
            pdb: self.pdb.as_deref(),
            unlisted: Unlisted {
                deployment: self.unlisted.deployment.as_ref(),
                service: self.unlisted.service.as_ref(),
                pdb: self.unlisted.pdb.as_ref(),
                key_secret: self.unlisted.key_secret.as_ref(),
            },
            references: &self.references,
            cluster_domain: &self.cluster_domain,
            url: &self.url,
            teams: self.teams.clone(),
        }
    }
}

pub async fn observe(ctx: &Ctx, server: &TerdutServer) -> Result<Observation, ReconcileError> {
    let key = ObjectKey::of(server);
    let (ns, name) = (key.namespace.as_str(), key.name.as_str());
    let s = &ctx.stores;
    let database_cluster = match cluster_ref(&server.spec.database) {
        Some(r) => Some(zalando(ctx, ns, &r.name).await?),
        None => None,
    };
    let cnpg_cluster = match &server.spec.database.cnpg_cluster_ref {
        Some(r) => Some(cnpg(ctx, ns, &r.name).await?),
        None => None,
    };
    let deployment = s
        .deployments
        .get(&ObjectRef::new(&deployment_name(name)).within(ns));
    let service = s
        .services
        .get(&ObjectRef::new(&service_name(name)).within(ns));
    let pdb = s.pdbs.get(&ObjectRef::new(&pdb_name(name)).within(ns));
    // The cache holds the key Secret's metadata only (`cached.rs`); its data is read live,
    // and only from a Secret this server controls.
    let cached_key = s
        .secrets
        .get(&ObjectRef::new(&key_secret_name(name)).within(ns))
        .map(|m| m.metadata.clone());
    let mut key_secret = None;
    let mut unlisted = UnlistedMeta::default();
    if deployment.is_none() {
        unlisted.deployment = metadata::<Deployment>(ctx, ns, &deployment_name(name)).await?;
    }
    if service.is_none() {
        unlisted.service = metadata::<Service>(ctx, ns, &service_name(name)).await?;
    }
    if pdb.is_none() && server.spec.pod.disruption_budget.is_some() {
        unlisted.pdb = metadata::<PodDisruptionBudget>(ctx, ns, &pdb_name(name)).await?;
    }
    let key_meta = match cached_key {
        Some(meta) => Some(meta),
        // Not cached: ours without our label (or the cache lags its create), or anyone else's.
        None => metadata::<Secret>(ctx, ns, &key_secret_name(name)).await?,
    };
    if let Some(meta) = key_meta {
        // Ours: read it. Anyone else's is known by its metadata only: its data is never read.
        if controlled_by(&meta, server) {
            key_secret = full::<Secret>(ctx, ns, &key_secret_name(name))
                .await?
                .map(Arc::new);
        } else {
            unlisted.key_secret = Some(meta);
        }
    }
    let mut references = vec![];
    for r in super::references::references(&server.spec, cnpg_cluster.as_ref()) {
        let found = referenced_secret(ctx, ns, &r.name, &r.key).await?;
        references.push(Checked {
            reference: r,
            found,
        });
    }
    Ok(Observation {
        key_secret,
        database_cluster,
        cnpg_cluster,
        deployment,
        service,
        pdb,
        unlisted,
        references,
        cluster_domain: ctx.config.cluster_domain.clone(),
        url: ctx
            .config
            .server_url(name, ns, server.spec.networking.service_port),
        teams: team_counts(ctx, server),
    })
}

/// Whether `meta` has a controller reference to `server`.
fn controlled_by(meta: &ObjectMeta, server: &TerdutServer) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && Some(&o.uid) == server.metadata.uid.as_ref())
}

/// The metadata of `name` of kind `K`, read live (a metadata-only GET: a Secret's data never
/// leaves the API server for it).
pub(crate) async fn live_metadata<K>(
    ctx: &Ctx,
    ns: &str,
    name: &str,
) -> Result<Option<ObjectMeta>, ReconcileError>
where
    K: kube::Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    metadata::<K>(ctx, ns, name).await
}

/// `name` of kind `K`, read live.
pub(crate) async fn live_object<K>(
    ctx: &Ctx,
    ns: &str,
    name: &str,
) -> Result<Option<K>, ReconcileError>
where
    K: kube::Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    full::<K>(ctx, ns, name).await
}

async fn metadata<K>(ctx: &Ctx, ns: &str, name: &str) -> Result<Option<ObjectMeta>, ReconcileError>
where
    K: kube::Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::namespaced(ctx.kube.clone(), ns)
        .get_metadata_opt(name)
        .await
        .map(|m| m.map(|m| m.metadata))
        .map_err(|e| {
            ReconcileError::kube(
                KubeCall::ReadServerObject,
                format!("{} {ns}/{name}", K::kind(&())),
                e,
            )
        })
}

async fn full<K>(ctx: &Ctx, ns: &str, name: &str) -> Result<Option<K>, ReconcileError>
where
    K: kube::Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::namespaced(ctx.kube.clone(), ns)
        .get_opt(name)
        .await
        .map_err(|e| {
            ReconcileError::kube(
                KubeCall::ReadServerObject,
                format!("{} {ns}/{name}", K::kind(&())),
                e,
            )
        })
}

/// Whether the Secret `name` exists with `key`, and which version of it was read. Only the key
/// names and the metadata are looked at; the values are dropped with the object, unread
/// (docs/security.md).
async fn referenced_secret(
    ctx: &Ctx,
    ns: &str,
    name: &str,
    key: &str,
) -> Result<Found, ReconcileError> {
    Ok(match full::<Secret>(ctx, ns, name).await? {
        None => Found::NoSecret,
        Some(s) => {
            let has = s.data.as_ref().is_some_and(|d| d.contains_key(key))
                || s.string_data.as_ref().is_some_and(|d| d.contains_key(key));
            if has {
                Found::Present(SecretVersion::of(&s.metadata))
            } else {
                Found::NoKey
            }
        }
    })
}

pub use crate::key::team_server_key;

/// TerdutTeams naming this server, by consent outcome: the TerdutServer's status counts the
/// accepted and the refused teams (docs/design.md §4.6).
fn team_counts(ctx: &Ctx, server: &TerdutServer) -> TeamCounts {
    let me = ObjectKey::of(server);
    let mut counts = TeamCounts::default();
    for team in ctx.stores.teams.state() {
        if team_server_key(&team) != me {
            continue;
        }
        let team_ns = team.metadata.namespace.clone().unwrap_or_default();
        let labels = ctx
            .stores
            .namespaces
            .get(&ObjectRef::new(&team_ns))
            .map(|n| n.metadata.labels.clone().unwrap_or_default());
        match decide(
            &me.namespace,
            &me.name,
            &server.spec.allowed_teams,
            &team_ns,
            labels.as_ref(),
        ) {
            Consent::Allowed => counts.accepted += 1,
            Consent::Refused(_) => counts.refused += 1,
        }
    }
    counts
}

/// Whether `group_version` serves `plural`: discovery, so "the CRD is not installed" and "the
/// cluster does not exist" are told apart (both are a 404 on the object path).
async fn served(ctx: &Ctx, group_version: &str, plural: &str) -> Result<bool, ReconcileError> {
    match ctx.kube.list_api_group_resources(group_version).await {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == plural)),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(false),
        Err(e) => Err(ReconcileError::kube(
            KubeCall::DiscoverGroup,
            group_version,
            e,
        )),
    }
}

/// Looks up the Zalando cluster.
async fn zalando(ctx: &Ctx, ns: &str, name: &str) -> Result<ClusterObservation, ReconcileError> {
    if !served(ctx, "acid.zalan.do/v1", "postgresqls").await? {
        return Ok(ClusterObservation::CrdAbsent);
    }
    let gvk = GroupVersionKind::gvk("acid.zalan.do", "v1", "postgresql");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "postgresqls");
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.kube.clone(), ns, &ar);
    match api.get_opt(name).await {
        Ok(Some(obj)) => {
            let master = master_service(ctx, ns, name).await?;
            Ok(ClusterObservation::from_object(&obj.data, master))
        }
        Ok(None) => Ok(ClusterObservation::Missing),
        Err(e) => Err(ReconcileError::kube(
            KubeCall::ReadZalandoCluster,
            format!("postgresql {ns}/{name}"),
            e,
        )),
    }
}

/// The master Service the postgres-operator made for cluster `name` (it carries the cluster's
/// name), with its Postgres port: where the DSN points, read from the cluster.
async fn master_service(
    ctx: &Ctx,
    ns: &str,
    name: &str,
) -> Result<Option<MasterService>, ReconcileError> {
    let Some(svc) = full::<Service>(ctx, ns, name).await? else {
        return Ok(None);
    };
    let ports = svc.spec.and_then(|s| s.ports).unwrap_or_default();
    let port = ports
        .iter()
        .find(|p| p.name.as_deref() == Some("postgresql"))
        .or(ports.first())
        .map(|p| p.port);
    Ok(port.map(|port| MasterService {
        name: name.to_owned(),
        port,
    }))
}

/// Looks up the CloudNativePG Cluster and, once it exists, its `-rw` Service.
async fn cnpg(ctx: &Ctx, ns: &str, name: &str) -> Result<CnpgObservation, ReconcileError> {
    let group_version = format!("{}/{}", cnpg::GROUP, cnpg::VERSION);
    if !served(ctx, &group_version, cnpg::PLURAL).await? {
        return Ok(CnpgObservation::CrdAbsent);
    }
    let gvk = GroupVersionKind::gvk(cnpg::GROUP, cnpg::VERSION, cnpg::KIND);
    let ar = ApiResource::from_gvk_with_plural(&gvk, cnpg::PLURAL);
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.kube.clone(), ns, &ar);
    match api.get_opt(name).await {
        Ok(Some(obj)) => {
            let rw = rw_service(ctx, ns, name).await?;
            Ok(CnpgObservation::from_object(name, &obj.data, rw))
        }
        Ok(None) => Ok(CnpgObservation::Missing),
        Err(e) => Err(ReconcileError::kube(
            KubeCall::ReadCnpgCluster,
            format!("Cluster {ns}/{name} (postgresql.cnpg.io)"),
            e,
        )),
    }
}

/// The `-rw` Service CloudNativePG made for Cluster `name`, with its Postgres port.
async fn rw_service(ctx: &Ctx, ns: &str, name: &str) -> Result<Option<RwService>, ReconcileError> {
    let svc_name = rw_service_name(name);
    let Some(svc) = full::<Service>(ctx, ns, &svc_name).await? else {
        return Ok(None);
    };
    let ports = svc.spec.and_then(|s| s.ports).unwrap_or_default();
    let port = ports
        .iter()
        .find(|p| p.name.as_deref() == Some("postgres"))
        .or(ports.first())
        .map(|p| p.port);
    Ok(port.map(|port| RwService {
        name: svc_name,
        port,
    }))
}
