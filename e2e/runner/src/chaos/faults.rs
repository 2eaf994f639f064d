//! The stand-in fault storm: its admin surface makes every `/api/` call slow (0-2 s), resets
//! 5% of connections and answers 20% with 500 or 503 while waves of changes land; then the run
//! waits (faults still on) for convergence, a figure and not a check (docs/reliability.md "Not
//! covered yet"). The faults are cleared on the way out, whatever happened.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use terdut_standin::FaultRule;

use crate::chaos::Chaos;
use crate::invariants;
use crate::report::log;
use crate::world::World;

const API: &str = "* /api/*";

/// Delays of all matching rules add up and the first rule that fires decides
/// (docs/terdut-api.md), so the delay lives on one rule only; 0.9 * 0.111 = 0.1 of all calls
/// get the 503.
fn rules() -> [FaultRule; 3] {
    [
        FaultRule::new(API).jitter_ms(2000).reset_rate(0.05),
        FaultRule::new(API).error_rate(0.1, 500),
        FaultRule::new(API).error_rate(0.111, 503),
    ]
}

/// What the storm saw.
#[derive(Debug)]
pub struct Outcome {
    pub kind_changed: BTreeSet<String>,
    /// Seconds to converge with the faults on, `None` when it did not within the wait.
    pub took: Option<f64>,
    pub pending: usize,
    /// Calls the rules reset, and answered with 5xx.
    pub resets: u64,
    pub errors: u64,
}

pub async fn storm(c: &mut Chaos) -> anyhow::Result<Outcome> {
    let admin = c.admin.clone();
    for rule in rules() {
        admin.add_fault(&rule).await?;
    }
    let result = waves_then_wait(c).await;
    let cleared = admin.clear_faults().await;
    let outcome = result?;
    cleared?;
    Ok(outcome)
}

async fn waves_then_wait(c: &mut Chaos) -> anyhow::Result<Outcome> {
    let mut kind_changed = BTreeSet::new();
    for _ in 0..c.plan.fault_waves {
        let changes = c.model.wave(|_| 1);
        kind_changed.extend(changes.kind_changed.iter().cloned());
        c.kube.send(&changes).await?;
        log(&format!("faults on: {}", changes.summary()));
        tokio::time::sleep(Duration::from_secs_f64(c.model.rng().uniform(2.0, 4.0))).await;
    }
    let wait = Duration::from_secs(c.plan.faults_on_wait);
    let started = Instant::now();
    let mut left = vec!["not read yet".to_owned()];
    while started.elapsed() < wait {
        left = invariants::pending(&c.model, &World::read(&c.kube, &c.admin).await?);
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let took = left.is_empty().then(|| started.elapsed().as_secs_f64());
    let faults = c.admin.faults().await?;
    let resets = faults
        .iter()
        .filter(|f| f.rule.reset_rate != 0.0)
        .map(|f| f.fired)
        .sum();
    let errors = faults
        .iter()
        .filter(|f| f.rule.error_rate != 0.0)
        .map(|f| f.fired)
        .sum();
    let state = match took {
        Some(t) => format!("converged after {t:.0}s"),
        None => "NOT converged".to_owned(),
    };
    log(&format!(
        "faults on: {state} with the faults still on ({} pending); injected {{'resets': \
         {resets}, '5xx': {errors}}}",
        left.len()
    ));
    Ok(Outcome {
        kind_changed,
        took,
        pending: left.len(),
        resets,
        errors,
    })
}
