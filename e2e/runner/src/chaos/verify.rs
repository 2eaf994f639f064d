//! After every storm: quiescence (every CR Ready at its generation and the server matching
//! every spec, within 60 s), then each invariant as one check named after the storm; at the
//! end, the checks over the operators' logs.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::chaos::Chaos;
use crate::cost::Spent;
use crate::counts::{bump, get};
use crate::invariants::{self, Verdict};
use crate::report::log;
use crate::world::{self, World, fingerprint};

/// Seconds every CR gets to be Ready after a storm (the promise, docs/reliability.md 5).
const QUIESCE: u64 = 60;

impl Chaos {
    fn record(&self, storm: &str, v: &Verdict) {
        self.report
            .check(&format!("{storm}: {}", v.name), v.ok, &v.detail);
    }

    /// `{source: fingerprint}` of every webhook key now.
    pub async fn fingerprints(&mut self) -> anyhow::Result<BTreeMap<String, String>> {
        let keys = world::webhook_keys(&self.kube).await?;
        let fps = keys
            .iter()
            .map(|(s, k)| (s.clone(), fingerprint(k)))
            .collect();
        self.seen_keys.extend(keys.into_values());
        Ok(fps)
    }

    /// Quiescence, then every invariant; `before`: the fingerprints from before the storm,
    /// `kind_changed`: the sources whose keys had to rotate.
    pub async fn verify(
        &mut self,
        storm: &str,
        before: Option<&BTreeMap<String, String>>,
        kind_changed: &BTreeSet<String>,
    ) -> anyhow::Result<()> {
        if self.pair_up {
            self.pair.restart_dead()?;
        } else {
            let mut op = self.operator()?;
            if !op.running() {
                bump(&self.counts.operator_exits, 1);
                op.start()?;
            }
        }
        let started = Instant::now();
        let mut left = vec!["not read yet".to_owned()];
        while started.elapsed() < Duration::from_secs(2 * QUIESCE) {
            left = invariants::pending(&self.model, &World::read(&self.kube, &self.admin).await?);
            if left.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        let took = started.elapsed().as_secs_f64();
        self.report.check(
            &format!("{storm}: every CR Ready and in sync within {QUIESCE}s (took {took:.0}s)"),
            left.is_empty() && took <= QUIESCE as f64,
            &left.iter().take(10).cloned().collect::<Vec<_>>().join("; "),
        );
        let w = World::read(&self.kube, &self.admin).await?;
        for v in invariants::structural(&w) {
            self.record(storm, &v);
        }
        let keys = world::webhook_keys(&self.kube).await?;
        self.seen_keys.extend(keys.values().cloned());
        let v = invariants::keys_live(&self.model, &w, &self.admin, &keys).await?;
        self.record(storm, &v);
        if let Some(before) = before {
            let after = keys
                .iter()
                .map(|(s, k)| (s.clone(), fingerprint(k)))
                .collect();
            let (v, expected) = invariants::rotations(before, &after, kind_changed);
            self.record(storm, &v);
            log(&format!(
                "{storm}: {expected} keys rotated because their kind changed (expected)"
            ));
        }
        let state = if left.is_empty() {
            "converged"
        } else {
            "NOT converged"
        };
        log(&format!(
            "{storm}: {state} after {took:.0}s; {} teams, {} sources",
            self.model.teams.len(),
            self.model.sources.len()
        ));
        self.report
            .figure(format!("{storm}: converged after"), format!("{took:.0}s"));
        Ok(())
    }

    /// One WARN per failure streak, not one per retry: WARN and ERROR lines stay within the
    /// failed passes (plus a little for watch reconnects and supervisor restarts).
    pub fn check_proportionate(&self, storm: &str, c: &Spent) {
        let lines = c.warn + c.error_lines;
        let budget = c.error_total + 10.0;
        self.report.check(
            &format!(
                "{storm}: logs proportionate ({lines} WARN/ERROR lines for {:.0} failed passes)",
                c.error_total
            ),
            lines as f64 <= budget,
            &format!("{lines} > {budget:.0}"),
        );
    }

    /// No panic but the injected ones, no operator that exited on its own, and no key the run
    /// read (nor the operator key) in any operator log.
    pub fn final_checks(&self) -> anyhow::Result<()> {
        let mut logs = vec![self.operator_log.clone()];
        logs.extend(
            self.pair
                .replicas
                .iter()
                .filter(|r| r.proc.starts() > 0)
                .map(|r| r.proc.log_path().to_owned()),
        );
        let mut text = String::new();
        for path in &logs {
            text.push_str(&String::from_utf8_lossy(&std::fs::read(path)?));
        }
        let panics: Vec<&str> = text.lines().filter(|l| l.contains("panicked at")).collect();
        let unexpected: Vec<&str> = panics
            .iter()
            .copied()
            .filter(|l| !l.contains("hooks.rs"))
            .collect();
        log(&format!(
            "injected crash-window panics: {}",
            panics.len() - unexpected.len()
        ));
        self.report.check(
            "no unexpected panic in the operator log",
            unexpected.is_empty(),
            &unexpected[..unexpected.len().min(5)].join("\n"),
        );
        let exits = get(&self.counts.operator_exits) + self.pair.exits;
        self.report.check(
            "operator never exited on its own",
            exits == 0,
            &format!("{exits} exits"),
        );
        let leaked = self
            .seen_keys
            .iter()
            .chain(self.operator_key.as_ref())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .filter(|k| text.contains(k.as_str()))
            .count();
        self.report.check(
            &format!(
                "no webhook or operator key in the operator log ({} keys)",
                self.seen_keys.len()
            ),
            leaked == 0,
            &format!("{leaked} keys found"),
        );
        Ok(())
    }
}
