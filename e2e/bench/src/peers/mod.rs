//! `terdut-bench peers` (`just bench`, docs/performance.md "Peers"): this operator (a) against
//! the kube-runtime `Controller` a kube-rs user writes (b) and the controller-runtime operator a
//! Kubebuilder user writes (d, at concurrency 1 and at (a)'s), each a process of its own, one at
//! a time, on the same control plane and the same in-process stand-ins, in rounds whose order
//! rotates. What a user sees: cold create, steady state over a window with its resync wave, one
//! change during a wave, a restart on converged objects, memory, shards. kube-apiserver requests
//! come from the apiserver's audit log ([`audit`]), terdut calls from the stand-ins, CPU and RSS
//! from `/proc`. It measures; it asserts nothing.

pub mod audit;
mod namespace;
pub mod process;
mod scenarios;
mod summary;
mod watch;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use terdut_testenv::ControlPlane;

use process::{Launch, Peer};

/// The knobs of a peers run. A small run: `--objects 100 --rounds 1 --resync-secs 30`.
#[derive(clap::Args, Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PeersArgs {
    /// TerdutTeams, and as many TerdutAlertSources (one per team).
    #[arg(long, default_value_t = 1000)]
    pub objects: usize,
    /// TerdutServers (each with its stand-in); teams spread round-robin over them.
    #[arg(long, default_value_t = 1)]
    pub servers: usize,
    /// Latency the stand-ins add to every API call.
    #[arg(long, default_value_t = 20)]
    pub latency_ms: u64,
    /// Rounds; each runs every peer once, the order rotated by one per round.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// The peers, comma-separated: a, a0 (needs `--operator-before`), b, d1, dN.
    #[arg(long, default_value = "a,b,d1,dN")]
    pub peers: String,
    /// (a)'s `--max-concurrent-reconciles`, and (b)'s and (dN)'s concurrency.
    #[arg(long, default_value_t = 256)]
    pub concurrency: u16,
    /// The resync period every peer is given (production: 300 s). Lowered so that the steady
    /// window holds a whole period, and so its wave, in bounded time.
    #[arg(long, default_value_t = 60)]
    pub resync_secs: u64,
    /// The steady-state window, from half a resync period after all Ready (default: one
    /// period, which then holds about one resync of each object).
    #[arg(long)]
    pub window_secs: Option<u64>,
    /// Edits, one team at a time, spread over the second resync wave (1.8-2.2 periods after
    /// the creates), for edit → Ready (those during which other objects' calls ran are
    /// reported apart, "during the wave").
    #[arg(long, default_value_t = 60)]
    pub change_samples: usize,
    /// Scenarios, comma-separated: cold, steady, change, restart.
    #[arg(long, default_value = "cold,steady,change,restart")]
    pub scenarios: String,
    /// `--selector` shard counts to run with (a) after the rounds, e.g. `2,4` (empty: none).
    #[arg(long, default_value = "")]
    pub shards: String,
    /// Peer (d)'s binary (`bash e2e/peer-go/build.sh` prints it).
    #[arg(long)]
    pub peer_go: Option<PathBuf>,
    /// Peer (a0)'s binary: this operator built from an earlier commit. The results keep its
    /// file name only (the folder is this machine's).
    #[arg(long)]
    #[serde(serialize_with = "file_name")]
    pub operator_before: Option<PathBuf>,
    /// A library (a0) is started with in `LD_PRELOAD`, as its image did (jemalloc before the
    /// allocator was linked in).
    #[arg(long, requires = "operator_before")]
    #[serde(serialize_with = "file_name")]
    pub operator_before_preload: Option<PathBuf>,
    /// Create requests the bench keeps in flight.
    #[arg(long, default_value_t = 32)]
    pub create_concurrency: usize,
    /// Give up waiting for a scenario after this long (the results then say so).
    #[arg(long, default_value_t = 1800)]
    pub timeout_secs: u64,
    /// Where the raw results go.
    #[arg(long, default_value = ".tmp/bench/peers.json")]
    pub out: PathBuf,
}

/// A path as its file name, for results kept where the folder means nothing.
fn file_name<S: serde::Serializer>(p: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
    let name = p
        .as_deref()
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned());
    serde::Serialize::serialize(&name, s)
}

impl PeersArgs {
    fn peers(&self) -> anyhow::Result<Vec<Peer>> {
        self.peers
            .split(',')
            .filter(|s| !s.is_empty())
            .map(Peer::parse)
            .collect()
    }

    fn window(&self) -> Duration {
        Duration::from_secs(self.window_secs.unwrap_or(self.resync_secs))
    }

    fn has(&self, scenario: &str) -> bool {
        self.scenarios.split(',').any(|s| s.trim() == scenario)
    }
}

pub async fn run(cp: &'static ControlPlane, args: &PeersArgs) -> anyhow::Result<()> {
    let client = cp.client().await?;
    let audit = audit::AuditLog::find(cp.dir())?;
    let dir = std::env::current_exe()?
        .parent()
        .map(PathBuf::from)
        .ok_or_else(|| anyhow::anyhow!("no directory of the bench binary"))?;
    let launch = Launch {
        operator_bin: dir.join("terdut-operator"),
        operator_before: args
            .operator_before
            .clone()
            .map(|b| (b, args.operator_before_preload.clone())),
        peer_kube_bin: dir.join("terdut-peer-kube"),
        peer_go_bin: args.peer_go.clone(),
        kubeconfig: cp.operator_kubeconfig(),
        resync: Duration::from_secs(args.resync_secs),
        concurrency: args.concurrency,
        logs: args
            .out
            .parent()
            .map(|p| p.join("peer-logs"))
            .unwrap_or_else(|| PathBuf::from(".tmp/bench/peer-logs")),
    };
    let peers = args.peers()?;
    let mut results = json!({
        "args": args,
        "machine": super::machine(),
        "commit": commit(),
        "loadavg_start": super::loadavg(),
        "audit_log": audit_path_note(),
    });
    let mut runs = Vec::new();
    for round in 0..args.rounds.max(1) {
        let mut order = peers.clone();
        let turn = round % order.len().max(1);
        order.rotate_left(turn);
        super::say(&format!(
            "round {} of {}: {}",
            round + 1,
            args.rounds,
            order
                .iter()
                .map(|p| p.label())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        let floor = scenarios::floors(cp, &client, args).await?;
        for &peer in &order {
            super::say(&format!("round {}: peer ({})", round + 1, peer.label()));
            let r = scenarios::run_peer(cp, &client, &audit, &launch, args, peer, round, &floor)
                .await
                .unwrap_or_else(|e| json!({"peer": peer.label(), "error": format!("{e:#}")}));
            runs.push(r);
            // Saved after every run: a run of hours that is stopped early keeps what it has.
            save(args, &mut results, &runs, &[], false)?;
        }
    }
    let mut shards = Vec::new();
    for n in args
        .shards
        .split(',')
        .filter_map(|s| s.trim().parse::<usize>().ok())
    {
        super::say(&format!("shards: {n} instances of (a) with --selector"));
        shards.push(
            scenarios::shards(cp, &client, &launch, args, n)
                .await
                .unwrap_or_else(|e| json!({"shards": n, "error": format!("{e:#}")})),
        );
        save(args, &mut results, &runs, &shards, false)?;
    }
    save(args, &mut results, &runs, &shards, true)?;
    println!("{}", summary::table(args, &results));
    super::say(&format!("raw results in {}", args.out.display()));
    Ok(())
}

/// Prints the table of a results file `run` wrote, its summary made again from its runs.
pub fn print_table(from: &std::path::Path) -> anyhow::Result<()> {
    let (table, complete) = table_of(from)?;
    if !complete {
        super::say("an incomplete run: the table has the runs that finished");
    }
    println!("{table}");
    Ok(())
}

/// The table of a results file, and whether its run finished.
fn table_of(from: &std::path::Path) -> anyhow::Result<(String, bool)> {
    let text = std::fs::read_to_string(from)
        .map_err(|e| anyhow::anyhow!("reading {}: {e}", from.display()))?;
    let mut results: Value = serde_json::from_str(&text)?;
    let args: PeersArgs = serde_json::from_value(results["args"].clone())
        .map_err(|e| anyhow::anyhow!("{}: no peers arguments in it: {e}", from.display()))?;
    results["summary"] = summary::summarize(&results);
    // Files kept before runs were saved as they went have no such field, and are complete.
    let complete = results["complete"] != Value::Bool(false);
    Ok((summary::table(&args, &results), complete))
}

/// Writes the results so far to `--out`; `complete` is false until every round and shard ran
/// (the summary then covers the runs that finished).
fn save(
    args: &PeersArgs,
    results: &mut Value,
    runs: &[Value],
    shards: &[Value],
    complete: bool,
) -> anyhow::Result<()> {
    results["runs"] = Value::Array(runs.to_vec());
    results["shards"] = Value::Array(shards.to_vec());
    results["complete"] = Value::Bool(complete);
    results["loadavg_end"] = super::loadavg();
    results["summary"] = summary::summarize(results);
    if let Some(dir) = args.out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&args.out, serde_json::to_string_pretty(results)?)?;
    Ok(())
}

fn commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

fn audit_path_note() -> &'static str {
    "kube-apiserver audit log, user terdut-operator-test (every peer runs as it, one at a time)"
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        peers: PeersArgs,
    }

    fn results_file(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("terdut-bench-{}-{name}.json", std::process::id()))
    }

    #[test]
    fn a_run_stopped_after_its_first_runs_keeps_them_and_its_table_shows_them() {
        let out = results_file("partial");
        let args =
            Cli::parse_from(["peers", "--objects", "100", "--out", out.to_str().unwrap()]).peers;
        let mut results = json!({ "args": &args, "commit": "abc1234" });
        let runs = [
            json!({"peer": "a", "cold": {"total_ms": 900.0}}),
            json!({"peer": "dN", "cold": {"total_ms": 700.0}}),
        ];
        save(&args, &mut results, &runs[..1], &[], false).unwrap();
        save(&args, &mut results, &runs, &[], false).unwrap();

        let (table, complete) = table_of(&out).unwrap();
        assert!(!complete);
        assert!(table.contains("(a) 900 [900–900, n=1]"), "{table}");
        assert!(table.contains("(dN) 700 [700–700, n=1]"), "{table}");

        save(&args, &mut results, &runs, &[], true).unwrap();
        assert!(table_of(&out).unwrap().1);
        std::fs::remove_file(&out).unwrap();
    }

    #[test]
    fn a_file_that_is_not_a_peers_run_is_refused_by_name() {
        let out = results_file("foreign");
        std::fs::write(&out, r#"{"teams": 10}"#).unwrap();
        let err = table_of(&out).unwrap_err().to_string();
        assert!(err.contains("no peers arguments"), "{err}");
        assert!(err.contains(out.to_str().unwrap()), "{err}");
        std::fs::remove_file(&out).unwrap();
    }
}
