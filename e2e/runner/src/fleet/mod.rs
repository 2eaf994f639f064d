//! The servers, teams and sources the day-two runs keep live on the node (`just node-chaos`,
//! `just upgrade-check`): the example TerdutServer running the stand-in with its data on a
//! volume, and K TerdutTeams with a TerdutAlertSource each, attached to it across namespaces.
//! After a fault or an upgrade: converged within a stated time, then the invariants of
//! docs/reliability.md.

pub mod install;
pub mod invariants;
pub mod leaks;
pub mod model;
pub mod node;
pub mod pods;
pub mod server;
pub mod watch;
pub mod world;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use invariants::Verdict;
use leaks::Needles;
use model::{Model, NS};
use world::World;

use crate::checks::log;
use crate::cluster::Images;
use crate::examples;
use crate::golden;
use crate::run::Run;
use crate::wait;

#[derive(Debug)]
pub struct Fleet {
    pub model: Model,
    /// Every key seen so far (for the leak check at the end).
    pub needles: Needles,
    /// Source -> fingerprint of its key when the fleet first converged.
    pub fingerprints: BTreeMap<String, String>,
}

/// The fleet's namespace: `restricted`, and labelled for the example server's consent.
fn namespace_yaml() -> String {
    format!(
        "apiVersion: v1
kind: Namespace
metadata:
  name: {NS}
  labels:
    pod-security.kubernetes.io/enforce: restricted
    terdut.ryuvia.com/allowed-server: {}.{}
",
        examples::SERVER_NS,
        examples::SERVER
    )
}

impl Fleet {
    /// The example server (stand-in image, data on a volume under `node_dir`) Ready, then
    /// `pairs` teams and sources applied and converged.
    pub async fn bring_up(
        run: &Run,
        node_dir: &Path,
        images: &Images,
        pairs: usize,
    ) -> anyhow::Result<Self> {
        golden::apply_namespaces(run, true)?;
        run.kubectl.apply_yaml(&namespace_yaml())?;
        run.kubectl
            .apply_file(&examples::file("05-database-password.yaml"))?;
        let volume = node_dir.join("volumes/standin-data");
        server::create_volume_dir(&volume)?;
        run.kubectl.apply_yaml(&server::volume_yaml(&volume))?;
        run.kubectl
            .apply_yaml(&server::server_yaml(&images.standin, &images.pull_policy)?)?;
        wait::until(
            "the TerdutServer Ready",
            Duration::from_secs(180),
            || async { Ok(golden::server_ready(run).await?.then_some(())) },
        )
        .await?;
        run.wait_server().await?;
        let model = Model::new(pairs);
        log(&format!("applying {pairs} teams and sources in {NS}"));
        run.kubectl.apply_yaml(&model.yaml())?;
        let took = converge(run, &model, Duration::from_secs(180)).await?;
        log(&format!("the fleet converged in {took:.1?}"));
        let w = World::read(run).await?;
        let mut needles = Needles::default();
        needles.add(w.keys.values().cloned());
        needles.add_operator_key(run).await?;
        Ok(Self {
            model,
            needles,
            fingerprints: w.fingerprints(),
        })
    }

    /// Applies a wave renaming the pairs `picked`.
    pub fn rename(&mut self, run: &Run, picked: &[usize]) -> anyhow::Result<()> {
        let yaml = self.model.rename_wave(picked);
        run.kubectl.apply_yaml(&yaml)
    }

    /// How many of the teams renamed in the last wave the server shows under their new name.
    pub async fn landed(&self, run: &Run) -> anyhow::Result<(usize, usize)> {
        let state = run.admin().await?.state().await?;
        let wave = format!(" w{}", self.model.waves);
        let renamed: Vec<_> = self
            .model
            .teams
            .iter()
            .filter(|(_, t)| t.display.ends_with(&wave))
            .collect();
        let landed = renamed
            .iter()
            .filter(|(n, t)| {
                state
                    .team_by_external_id(&format!("{NS}/{n}"))
                    .is_some_and(|s| s.name == t.display)
            })
            .count();
        Ok((landed, renamed.len()))
    }

    /// The invariants after a fault: no duplicate, no orphan, every key live and its own, no
    /// key rotated since the fleet first converged. Keys read are added to the needles.
    pub async fn verify(&mut self, run: &Run) -> anyhow::Result<Vec<Verdict>> {
        let w = World::read(run).await?;
        self.needles.add(w.keys.values().cloned());
        let mut out = invariants::structural(&w);
        out.push(invariants::keys_live(&self.model, &w, &run.admin().await?).await?);
        out.push(invariants::no_rotation(
            &self.fingerprints,
            &w.fingerprints(),
        ));
        Ok(out)
    }
}

/// Waits until every CR is Ready at its generation and the server matches every spec; the
/// time it took, or what was still pending at `limit`.
pub async fn converge(run: &Run, model: &Model, limit: Duration) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let mut last = vec![];
    while started.elapsed() < limit {
        match World::read(run).await {
            Ok(w) => {
                last = invariants::pending(model, &w);
                if last.is_empty() {
                    return Ok(started.elapsed());
                }
            }
            Err(e) => last = vec![format!("reading: {e:#}")],
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    anyhow::bail!(
        "not converged within {limit:?}: {} pending, e.g. {}",
        last.len(),
        last.iter().take(5).cloned().collect::<Vec<_>>().join("; ")
    )
}
