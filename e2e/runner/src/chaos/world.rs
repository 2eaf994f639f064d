//! One read of everything the checks look at: the CRs, the webhook Secrets' keys and the
//! stand-in's state (its admin view, which never holds a key). Keys stay in memory; what is
//! compared across storms is their fingerprint.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use sha2::{Digest, Sha256};
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutTeam};
use terdut_standin::admin::{AdminIntegration, AdminState, AdminTeam};
use terdut_standin::{AdminClient, AdminError};

use crate::cluster::Kube;
use crate::workload::{Model, NS};

/// The webhook Secret of a TerdutAlertSource is `<name>-terdut-webhook`, its key under `key`
/// (docs/design.md §4.5).
pub const WEBHOOK_SECRET_SUFFIX: &str = "-terdut-webhook";
const WEBHOOK_KEY: &str = "key";

#[derive(Debug)]
pub struct World {
    pub teams: BTreeMap<String, TerdutTeam>,
    pub sources: BTreeMap<String, TerdutAlertSource>,
    pub state: AdminState,
    /// external_id -> index in `state.teams`; with duplicates, the last one.
    by_external_id: HashMap<String, usize>,
}

impl World {
    pub async fn read(kube: &Kube, admin: &AdminClient) -> anyhow::Result<Self> {
        let teams = kube.teams().await?;
        let sources = kube.sources().await?;
        let state = admin_state(admin).await?;
        let by_external_id = state
            .teams
            .iter()
            .enumerate()
            .map(|(i, t)| (t.external_id.clone(), i))
            .collect();
        Ok(Self {
            teams,
            sources,
            state,
            by_external_id,
        })
    }

    /// The server's team for CR `name`.
    pub fn server_team(&self, name: &str) -> Option<&AdminTeam> {
        let i = *self.by_external_id.get(&format!("{NS}/{name}"))?;
        self.state.teams.get(i)
    }

    /// The one integration of source `s` on its model team, `None` when there is none or
    /// more than one.
    pub fn integration(&self, model: &Model, s: &str) -> Option<&AdminIntegration> {
        let team = self.server_team(&model.sources.get(s)?.team)?;
        terdut_e2e::server_invariants::single_integration(team, &format!("{NS}/{s}"))
    }
}

/// The stand-in's state, retried: a read while it is busy must not end the run.
async fn admin_state(admin: &AdminClient) -> anyhow::Result<AdminState> {
    const TRIES: u64 = 5;
    for attempt in 0.. {
        match admin.state().await {
            Err(AdminError::Transport { .. }) if attempt + 1 < TRIES => {
                tokio::time::sleep(Duration::from_secs(1 + attempt)).await;
            }
            other => return Ok(other?),
        }
    }
    unreachable!("the loop returns")
}

/// `{source: key}` from the webhook Secrets.
pub async fn webhook_keys(kube: &Kube) -> anyhow::Result<BTreeMap<String, String>> {
    let mut keys = BTreeMap::new();
    for secret in kube.secrets().await? {
        let name = secret.metadata.name.unwrap_or_default();
        let Some(source) = name.strip_suffix(WEBHOOK_SECRET_SUFFIX) else {
            continue;
        };
        if let Some(key) = secret.data.as_ref().and_then(|d| d.get(WEBHOOK_KEY)) {
            keys.insert(
                source.to_owned(),
                String::from_utf8_lossy(&key.0).into_owned(),
            );
        }
    }
    Ok(keys)
}

/// What is compared across a storm instead of a key: the first 16 hex digits of its SHA-256.
pub fn fingerprint(key: &str) -> String {
    let mut hex = hex::encode(Sha256::digest(key.as_bytes()));
    hex.truncate(16);
    hex
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_is_sha256_cut_to_16_hex_digits() {
        // python3 -c 'import hashlib; print(hashlib.sha256(b"tdik_x").hexdigest()[:16])'
        assert_eq!(fingerprint("tdik_x"), FP_TDIK_X);
    }

    const FP_TDIK_X: &str = "1c59beae114479f5";
}
