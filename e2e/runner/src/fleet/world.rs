//! One read of what the checks look at: the fleet's CRs, its webhook Secrets' keys and the
//! stand-in's state (its admin view, which never holds a key). Keys stay in memory; what is
//! compared across faults is their fingerprint.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::ListParams;
use sha2::{Digest as _, Sha256};
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutTeam};
use terdut_standin::admin::{AdminIntegration, AdminState, AdminTeam};

use super::model::{Model, NS};
use crate::examples;
use crate::run::Run;

#[derive(Debug)]
pub struct World {
    pub teams: BTreeMap<String, TerdutTeam>,
    pub sources: BTreeMap<String, TerdutAlertSource>,
    /// Source name -> the webhook key its Secret holds.
    pub keys: BTreeMap<String, String>,
    pub state: AdminState,
}

impl World {
    pub async fn read(run: &Run) -> anyhow::Result<Self> {
        let lp = ListParams::default();
        let teams = Api::<TerdutTeam>::namespaced(run.client.clone(), NS)
            .list(&lp)
            .await?
            .items
            .into_iter()
            .filter_map(|t| Some((t.metadata.name.clone()?, t)))
            .collect();
        let sources = Api::<TerdutAlertSource>::namespaced(run.client.clone(), NS)
            .list(&lp)
            .await?
            .items
            .into_iter()
            .filter_map(|s| Some((s.metadata.name.clone()?, s)))
            .collect();
        let keys = webhook_keys(run).await?;
        let state = run.admin().await?.state().await?;
        Ok(Self {
            teams,
            sources,
            keys,
            state,
        })
    }

    /// The server's team for CR `name` (the first, should there be duplicates).
    pub fn server_team(&self, name: &str) -> Option<&AdminTeam> {
        self.state.team_by_external_id(&format!("{NS}/{name}"))
    }

    /// The one integration of source `s` on its model team; `None` when there is none or more
    /// than one.
    pub fn integration(&self, model: &Model, s: &str) -> Option<&AdminIntegration> {
        let team = self.server_team(&model.sources.get(s)?.team)?;
        terdut_e2e::server_invariants::single_integration(team, &format!("{NS}/{s}"))
    }

    /// Source -> fingerprint of its webhook key (what "no key rotated" compares).
    pub fn fingerprints(&self) -> BTreeMap<String, String> {
        self.keys
            .iter()
            .map(|(s, k)| (s.clone(), hex::encode(&Sha256::digest(k.as_bytes())[..8])))
            .collect()
    }
}

/// Source name -> key, from every webhook Secret of the fleet.
async fn webhook_keys(run: &Run) -> anyhow::Result<BTreeMap<String, String>> {
    let secrets = Api::<Secret>::namespaced(run.client.clone(), NS)
        .list(&ListParams::default())
        .await?;
    let suffix = examples::webhook_secret("");
    Ok(secrets
        .items
        .into_iter()
        .filter_map(|s| {
            let source = s
                .metadata
                .name
                .as_deref()?
                .strip_suffix(&suffix)?
                .to_owned();
            let key = s.data.as_ref()?.get("key")?;
            Some((source, String::from_utf8_lossy(&key.0).into_owned()))
        })
        .collect())
}
