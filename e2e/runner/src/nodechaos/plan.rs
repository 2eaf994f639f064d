//! The command line of `terdut-e2e node-chaos` and the plan it resolves to: which faults, how
//! many rounds, how many pairs, how long an outage lasts; a bounded default (`just
//! node-chaos`, part of `just test`) and a long one (`--long`, `just node-chaos-long`).
//! docs/reliability.md lists both.

use anyhow::bail;

use super::rng::Rng;

/// The faults, by the name `--faults` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    /// The leader pod deleted while a wave of changes is being reconciled.
    LeaderDelete,
    /// The leader's container over its memory limit: the kernel's OOM killer ends it.
    LeaderOom,
    /// The kubelet stopped and started again.
    Kubelet,
    /// containerd stopped and started again.
    Containerd,
    /// CoreDNS down for the outage.
    Coredns,
    /// The leader pod cut off from the kube-apiserver for the outage.
    ApiserverCut,
    /// The leader pod cut off from the server's pod for the outage.
    ServerCut,
    /// The whole node restarted: every component and pod.
    NodeRestart,
}

pub const ALL: [Fault; 8] = [
    Fault::LeaderDelete,
    Fault::LeaderOom,
    Fault::Kubelet,
    Fault::Containerd,
    Fault::Coredns,
    Fault::ApiserverCut,
    Fault::ServerCut,
    Fault::NodeRestart,
];

impl Fault {
    pub fn name(self) -> &'static str {
        match self {
            Self::LeaderDelete => "leader-delete",
            Self::LeaderOom => "leader-oom",
            Self::Kubelet => "kubelet",
            Self::Containerd => "containerd",
            Self::Coredns => "coredns",
            Self::ApiserverCut => "apiserver-cut",
            Self::ServerCut => "server-cut",
            Self::NodeRestart => "node-restart",
        }
    }

    fn parse(s: &str) -> anyhow::Result<Self> {
        ALL.into_iter().find(|f| f.name() == s).ok_or_else(|| {
            anyhow::anyhow!(
                "--faults {s}: not a fault (one of {})",
                ALL.map(Self::name).join(",")
            )
        })
    }

    /// How long after the fault ends every object must be Ready again and the server match
    /// every spec. A restarted node restarts every pod first (the operator's replicas, the
    /// server's), and a crashed leader's Lease runs out only after its 15 s.
    pub fn ready_limit_secs(self) -> u64 {
        match self {
            Self::NodeRestart => 120,
            _ => 60,
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct NodeChaosArgs {
    /// node-chaos: 40 pairs, 3 rounds of every fault in a shuffled order.
    #[arg(long)]
    pub long: bool,
    /// node-chaos: fixes the order of the faults, the changes and when a fault lands.
    #[arg(long, env = "NODE_CHAOS_SEED", default_value_t = 1)]
    pub seed: u64,
    /// node-chaos: comma list of faults to run (default all).
    #[arg(long, default_value = "")]
    pub faults: String,
    /// node-chaos: teams (and as many sources) in the fleet.
    #[arg(long)]
    pub pairs: Option<usize>,
    /// node-chaos: rounds of every fault.
    #[arg(long)]
    pub rounds: Option<u32>,
    /// node-chaos: how long CoreDNS is down and a pod cut off.
    #[arg(long, default_value_t = 60)]
    pub outage_secs: u64,
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub seed: u64,
    pub pairs: usize,
    pub outage_secs: u64,
    /// The faults in the order they run.
    pub order: Vec<Fault>,
}

impl NodeChaosArgs {
    pub fn plan(&self) -> anyhow::Result<Plan> {
        let chosen: Vec<Fault> = if self.faults.is_empty() {
            ALL.to_vec()
        } else {
            self.faults
                .split(',')
                .map(Fault::parse)
                .collect::<anyhow::Result<_>>()?
        };
        let rounds = self.rounds.unwrap_or(if self.long { 3 } else { 1 });
        if rounds == 0 {
            bail!("--rounds 0 runs nothing");
        }
        let mut rng = Rng::new(self.seed);
        let mut order = vec![];
        for _ in 0..rounds {
            let mut round = chosen.clone();
            rng.shuffle(&mut round);
            order.extend(round);
        }
        Ok(Plan {
            seed: self.seed,
            pairs: self.pairs.unwrap_or(if self.long { 40 } else { 12 }),
            outage_secs: self.outage_secs,
            order,
        })
    }
}

impl Plan {
    pub fn describe(&self) -> String {
        format!(
            "seed {}: {} pairs, {}-s outages, faults {}",
            self.seed,
            self.pairs,
            self.outage_secs,
            self.order
                .iter()
                .map(|f| f.name())
                .collect::<Vec<_>>()
                .join(",")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: NodeChaosArgs,
    }

    fn plan(args: &[&str]) -> anyhow::Result<Plan> {
        Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied()))?
            .args
            .plan()
    }

    #[test]
    fn bounded_runs_every_fault_once_and_long_three_times() {
        let b = plan(&[]).unwrap();
        assert_eq!((b.pairs, b.order.len(), b.outage_secs), (12, 8, 60));
        let mut sorted = b.order.clone();
        sorted.sort();
        assert_eq!(sorted, ALL);
        let l = plan(&["--long"]).unwrap();
        assert_eq!((l.pairs, l.order.len()), (40, 24));
    }

    #[test]
    fn the_seed_fixes_the_order() {
        assert_eq!(
            plan(&["--seed", "7"]).unwrap().order,
            plan(&["--seed", "7"]).unwrap().order
        );
        let orders: std::collections::BTreeSet<Vec<Fault>> = (0..8)
            .map(|s| plan(&["--seed", &s.to_string()]).unwrap().order)
            .collect();
        assert!(orders.len() > 1, "the seed does not change the order");
    }

    #[test]
    fn faults_names_known_faults_only() {
        let p = plan(&["--faults", "coredns,leader-oom"]).unwrap();
        assert_eq!(p.order.len(), 2);
        assert!(p.order.contains(&Fault::Coredns));
        assert!(plan(&["--faults", "dns"]).is_err());
        assert!(plan(&["--rounds", "0"]).is_err());
    }
}
