//! The observing half of a TerdutServer pass: everything comes from the informer caches except
//! the Zalando `postgresql` lookup, which is a live GET (DESIGN §8: that CRD is optional and not
//! watched).

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::reflector::ObjectRef;
use terdut_crds::v1alpha1::TerdutServer;
use terdut_crds::v1alpha1::server::TeamCounts;

use super::database::{ClusterObservation, cluster_ref};
use super::names::{deployment_name, key_secret_name, pdb_name, service_name};
use super::plan::Observed;
use crate::consent::{Consent, decide};
use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::key::ObjectKey;

/// Owned observations; [`Self::as_observed`] lends them to the pure planner.
#[derive(Debug, Default)]
pub struct Observation {
    pub key_secret: Option<Arc<Secret>>,
    pub database_cluster: Option<ClusterObservation>,
    pub deployment: Option<Arc<Deployment>>,
    pub service: Option<Arc<Service>>,
    pub pdb: Option<Arc<PodDisruptionBudget>>,
    pub teams: TeamCounts,
}

impl Observation {
    pub fn as_observed(&self) -> Observed<'_> {
        Observed {
            key_secret: self.key_secret.as_deref(),
            database_cluster: self.database_cluster.as_ref(),
            deployment: self.deployment.as_deref(),
            service: self.service.as_deref(),
            pdb: self.pdb.as_deref(),
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
    Ok(Observation {
        key_secret: s
            .secrets
            .get(&ObjectRef::new(&key_secret_name(name)).within(ns)),
        database_cluster,
        deployment: s
            .deployments
            .get(&ObjectRef::new(&deployment_name(name)).within(ns)),
        service: s
            .services
            .get(&ObjectRef::new(&service_name(name)).within(ns)),
        pdb: s.pdbs.get(&ObjectRef::new(&pdb_name(name)).within(ns)),
        teams: team_counts(ctx, server),
    })
}

/// The namespace of the server a team's `serverRef` names.
pub fn team_server_key(team: &terdut_crds::v1alpha1::TerdutTeam) -> ObjectKey {
    let team_ns = team.metadata.namespace.clone().unwrap_or_default();
    ObjectKey::new(
        team.spec.server_ref.namespace.clone().unwrap_or(team_ns),
        team.spec.server_ref.name.clone(),
    )
}

/// TerdutTeams naming this server, by consent outcome (issue: "the TerdutServer status counts
/// accepted and refused teams").
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

/// Looks up the Zalando cluster. Discovery first, so "the CRD is not installed" and "the
/// cluster does not exist" are told apart (both are a 404 on the object path).
async fn zalando(ctx: &Ctx, ns: &str, name: &str) -> Result<ClusterObservation, ReconcileError> {
    match ctx.kube.list_api_group_resources("acid.zalan.do/v1").await {
        Ok(list) if list.resources.iter().any(|r| r.name == "postgresqls") => {}
        Ok(_) => return Ok(ClusterObservation::CrdAbsent),
        Err(kube::Error::Api(e)) if e.code == 404 => return Ok(ClusterObservation::CrdAbsent),
        Err(e) => return Err(ReconcileError::kube("discover", "acid.zalan.do/v1", e)),
    }
    let gvk = GroupVersionKind::gvk("acid.zalan.do", "v1", "postgresql");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "postgresqls");
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.kube.clone(), ns, &ar);
    match api.get_opt(name).await {
        Ok(Some(obj)) => Ok(ClusterObservation::from_object(&obj.data)),
        Ok(None) => Ok(ClusterObservation::Missing),
        Err(e) => Err(ReconcileError::kube(
            "get",
            format!("postgresql {ns}/{name}"),
            e,
        )),
    }
}
