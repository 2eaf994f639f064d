//! The command line of `terdut-chaos` and the plan it resolves to: every count has a bounded
//! default (`just chaos`) and a long one (`just chaos-long`, `--long`); docs/reliability.md
//! lists both.

use std::collections::BTreeSet;

use anyhow::bail;
use clap::Parser;

#[derive(Debug, Parser)]
#[command(about = "`just chaos`: a reproducible kill-anywhere run against the local control plane")]
pub struct Args {
    /// 200 pairs, more kills, 3 rounds.
    #[arg(long)]
    long: bool,
    #[arg(long, env = "CHAOS_SEED", default_value_t = 1)]
    seed: i64,
    /// Teams (and as many sources) to create.
    #[arg(long)]
    pairs: Option<usize>,
    /// Operator SIGKILLs per operator storm.
    #[arg(long)]
    kills: Option<u32>,
    /// Stand-in restarts per round.
    #[arg(long)]
    standin_restarts: Option<u32>,
    /// Change storm + stand-in storm repetitions.
    #[arg(long)]
    rounds: Option<u32>,
    /// Every Nth source has the crash hook.
    #[arg(long, default_value_t = 4)]
    hook_every: usize,
    /// kube-apiserver restarts (SIGKILL, SIGTERM alternately).
    #[arg(long)]
    apiserver_restarts: Option<u32>,
    /// Waves of changes with the stand-in faults on.
    #[arg(long)]
    fault_waves: Option<u32>,
    /// At most this many seconds for convergence with the faults still on (a figure, not a
    /// check). The longer the faults stay on, the longer the retry backoff (up to 30 s,
    /// actors/src/pacing.rs) that the 60 s check after clearing them must absorb.
    #[arg(long)]
    faults_on_wait: Option<u64>,
    /// Waves of changes with the conflicting writer on.
    #[arg(long)]
    conflict_waves: Option<u32>,
    /// SIGKILLs of the leader of two replicas.
    #[arg(long)]
    leader_kills: Option<u32>,
    /// SIGTERMs (voluntary release) of the leader.
    #[arg(long)]
    leader_stepdowns: Option<u32>,
    /// Comma list of storms to skip: change,standin,apiserver,faults,conflicts,leader.
    #[arg(long, default_value = "")]
    skip: String,
    /// The stand-in's port (servicePort).
    #[arg(long, default_value_t = 18300)]
    port: u16,
}

/// The storms `--skip` can leave out (the create storm always runs).
pub const STORMS: [&str; 6] = [
    "change",
    "standin",
    "apiserver",
    "faults",
    "conflicts",
    "leader",
];

#[derive(Debug, Clone)]
pub struct Plan {
    pub seed: i64,
    pub pairs: usize,
    pub kills: u32,
    pub standin_restarts: u32,
    pub rounds: u32,
    pub hook_every: usize,
    pub apiserver_restarts: u32,
    pub fault_waves: u32,
    pub faults_on_wait: u64,
    pub conflict_waves: u32,
    pub leader_kills: u32,
    pub leader_stepdowns: u32,
    pub skip: BTreeSet<String>,
    pub port: u16,
}

impl Args {
    pub fn plan(self) -> anyhow::Result<Plan> {
        let pick = |given: Option<u32>, bounded: u32, long: u32| {
            given.unwrap_or(if self.long { long } else { bounded })
        };
        let skip: BTreeSet<String> = self
            .skip
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        if let Some(unknown) = skip.iter().find(|s| !STORMS.contains(&s.as_str())) {
            bail!(
                "--skip {unknown}: not a storm (one of {})",
                STORMS.join(",")
            );
        }
        Ok(Plan {
            seed: self.seed,
            pairs: self.pairs.unwrap_or(if self.long { 200 } else { 40 }),
            kills: pick(self.kills, 8, 15),
            standin_restarts: pick(self.standin_restarts, 3, 5),
            rounds: pick(self.rounds, 1, 3),
            hook_every: self.hook_every,
            apiserver_restarts: pick(self.apiserver_restarts, 3, 6),
            fault_waves: pick(self.fault_waves, 1, 3),
            faults_on_wait: self
                .faults_on_wait
                .unwrap_or(if self.long { 180 } else { 20 }),
            conflict_waves: pick(self.conflict_waves, 2, 3),
            leader_kills: pick(self.leader_kills, 2, 5),
            leader_stepdowns: pick(self.leader_stepdowns, 2, 5),
            skip,
            port: self.port,
        })
    }
}

impl Plan {
    pub fn runs(&self, storm: &str) -> bool {
        !self.skip.contains(storm)
    }

    /// The first line of the run.
    pub fn describe(&self) -> String {
        let skipping = if self.skip.is_empty() {
            String::new()
        } else {
            format!(
                "; skipping {}",
                self.skip.iter().cloned().collect::<Vec<_>>().join(",")
            )
        };
        format!(
            "seed {}: {} pairs, {} kills per storm, {} stand-in restarts, {} round(s), {} \
             kube-apiserver restarts, {} fault waves, {} conflict waves, {}+{} leader \
             kills+step-downs{skipping}",
            self.seed,
            self.pairs,
            self.kills,
            self.standin_restarts,
            self.rounds,
            self.apiserver_restarts,
            self.fault_waves,
            self.conflict_waves,
            self.leader_kills,
            self.leader_stepdowns
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(args: &[&str]) -> anyhow::Result<Plan> {
        Args::try_parse_from(std::iter::once("terdut-chaos").chain(args.iter().copied()))?.plan()
    }

    #[test]
    fn bounded_and_long_defaults_are_the_documented_ones() {
        let b = plan(&[]).unwrap();
        assert_eq!(
            (
                b.pairs,
                b.kills,
                b.standin_restarts,
                b.rounds,
                b.apiserver_restarts
            ),
            (40, 8, 3, 1, 3)
        );
        assert_eq!(
            (
                b.fault_waves,
                b.faults_on_wait,
                b.conflict_waves,
                b.leader_kills,
                b.leader_stepdowns
            ),
            (1, 20, 2, 2, 2)
        );
        let l = plan(&["--long"]).unwrap();
        assert_eq!(
            (
                l.pairs,
                l.kills,
                l.standin_restarts,
                l.rounds,
                l.apiserver_restarts
            ),
            (200, 15, 5, 3, 6)
        );
        assert_eq!(
            (
                l.fault_waves,
                l.faults_on_wait,
                l.conflict_waves,
                l.leader_kills,
                l.leader_stepdowns
            ),
            (3, 180, 3, 5, 5)
        );
        assert_eq!(plan(&["--long", "--kills", "2"]).unwrap().kills, 2);
    }

    #[test]
    fn skip_names_known_storms_only() {
        let p = plan(&["--skip", "faults,leader"]).unwrap();
        assert!(!p.runs("faults") && !p.runs("leader") && p.runs("change"));
        assert!(p.describe().ends_with("; skipping faults,leader"));
        assert!(plan(&["--skip", "fault"]).is_err());
    }
}
