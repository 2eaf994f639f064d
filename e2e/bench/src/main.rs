//! `terdut-bench` (`just bench`, docs/performance.md): runs the operator in this process against
//! the local control plane and in-process stand-ins with a fixed injected latency, and measures
//!
//! 1. cold start: N TerdutServers, then T TerdutTeams and S TerdutAlertSources created at once;
//!    per-object create→Ready latency (from the bench's own watches), reconciles, terdut API
//!    calls and Kubernetes writes per object, and the floor the latency allows;
//! 2. steady state: one forced resync of every actor (Kubernetes writes must be 0, terdut calls
//!    per object), then an idle window (reconciles per object per minute vs the resync rate);
//! 3. memory and dispatch: RSS of the operator after convergence, the cost of spawning 10,000
//!    actors, and the latency from a watch event to its actor's reconcile.
//!
//! It prints a Markdown table and writes the raw numbers to `--out` as JSON. It measures; it
//! does not assert: a run that does not converge reports how far it got. See
//! docs/performance.md for what the numbers include and what they do not.

mod controllers;
mod fixtures;
mod memory;
mod peers;
mod rss;
mod scrape;
mod spawn_cost;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use prometheus_client::registry::Registry;
use serde_json::{Value, json};
use terdut_actors::clock::SystemClock;
use terdut_actors::context::OperatorConfig;
use terdut_actors::key::ObjectKey;
use terdut_actors::operator::{self, ChildRuntime, Metrics, RunningOperator, StartOptions};
use terdut_actors::routing::ChildKind;
use terdut_actors::supervisor::{RestartPolicy, SupervisorMsg, snapshot};
use terdut_actors::tree::ServerMsg;
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutTeam};
use terdut_testenv::ControlPlane;

use rss::{Rss, mib};
use scrape::Scrape;

/// The knobs of a run. Defaults are the issue's full size; a small run for a busy machine:
/// `--servers 2 --teams 50 --sources 50 --idle-secs 30 --spawn-actors 2000`.
#[derive(Parser, Debug, Clone, serde::Serialize)]
#[command(about = "Cold start, steady state and memory of terdut-operator (docs/performance.md)")]
struct Args {
    /// TerdutServers, each with its own stand-in.
    #[arg(long, default_value_t = 10)]
    servers: usize,
    /// TerdutTeams (two dead-man switches each), spread round-robin over the servers.
    #[arg(long, default_value_t = 1000)]
    teams: usize,
    /// TerdutAlertSources, spread round-robin over the teams.
    #[arg(long, default_value_t = 1000)]
    sources: usize,
    /// Latency the stand-ins add to every API call.
    #[arg(long, default_value_t = 20)]
    latency_ms: u64,
    /// The operator's resync period (production default 300 s). Lower it to see resyncs inside
    /// a short idle window; the forced resync does not depend on it.
    #[arg(long, default_value_t = 300)]
    resync_secs: u64,
    /// The operator's `--max-concurrent-reconciles` (team passes, and separately source
    /// passes, at once) for the actor runtime (a).
    #[arg(long, default_value_t = 256)]
    max_concurrent_reconciles: usize,
    /// Idle window after the forced resync.
    #[arg(long, default_value_t = 600)]
    idle_secs: u64,
    /// Null actors for the spawn-cost measurement.
    #[arg(long, default_value_t = 10_000)]
    spawn_actors: usize,
    /// Annotation patches for the dispatch-latency measurement, one at a time over teams spread
    /// round the servers. A few hundred, so that the p99 is not just the slowest of a handful.
    #[arg(long, default_value_t = 300)]
    dispatch_samples: usize,
    /// Create requests the bench keeps in flight (the client side, not the operator's).
    #[arg(long, default_value_t = 32)]
    create_concurrency: usize,
    /// Give up waiting for convergence after this long (the results then say so).
    #[arg(long, default_value_t = 1800)]
    timeout_secs: u64,
    /// Skip baselines (b) and (c) (kube-runtime Controllers for teams and sources).
    #[arg(long)]
    skip_baselines: bool,
    /// Run baseline (b) only: (c) serializes every pass, so at the issue's size it takes
    /// minutes (linear in the objects); its ratio is then not measured.
    #[arg(long)]
    skip_c: bool,
    /// Skip the relist measurement (an operator restart: every informer lists again).
    #[arg(long)]
    skip_relist: bool,
    /// Only the memory of one runtime after its cold start, alone in this process: `a` (the
    /// actor tree) or `b` (baseline (b)). `just bench-memory` runs both, each in a process of
    /// its own; the result goes to `--out`.
    #[arg(long, value_enum)]
    memory_only: Option<memory::Variant>,
    /// With `--memory-only`: seconds between convergence and the RSS reading (idle actors
    /// passivate 2 s after their pass).
    #[arg(long, default_value_t = 15)]
    memory_settle_secs: u64,
    /// Where the raw results go.
    #[arg(long, default_value = ".tmp/bench/results.json")]
    out: PathBuf,
    /// `peers`: the issue's comparison of processes (a), (b), (d); without it, the in-process
    /// run of the actor tree described in docs/performance.md "What a run does".
    #[command(subcommand)]
    #[serde(skip)]
    command: Option<Command>,
}

#[derive(clap::Subcommand, Debug, Clone)]
enum Command {
    /// (a) against (b) and (d) as processes on the work users see (docs/performance.md "Peers").
    Peers(Box<peers::PeersArgs>),
    /// The peers table of a results file, again: for a run stopped early (its JSON has the
    /// rounds that finished) or a table reprinted from a kept run.
    PeersTable {
        /// A results file `peers` wrote.
        from: PathBuf,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // kube's "Server cert bypassed" (the test kubeconfig skips TLS verification)
                // would otherwise print once per connection.
                .unwrap_or_else(|_| {
                    tracing_subscriber::EnvFilter::new("warn,kube_client::client::tls=error")
                }),
        )
        .with_writer(std::io::stderr)
        .init();
    terdut_actors::api::init_tls();
    if let Some(Command::PeersTable { from }) = &args.command {
        return peers::print_table(from);
    }

    say("starting the control plane");
    let cp = ControlPlane::shared().await?;
    let client = cp.client().await?;
    if let Some(Command::Peers(p)) = &args.command {
        return peers::run(cp, p).await;
    }
    if let Some(variant) = args.memory_only {
        let result = memory::measure(cp, &args, &client, variant).await?;
        if let Some(dir) = args.out.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&args.out, serde_json::to_string_pretty(&result)?)?;
        println!("{result}");
        return Ok(());
    }
    let ns = cp.namespace(&client, "bench").await?;

    // Baseline before anything of the operator exists: the bench's own client, runtime and
    // TLS setup are in it, so the difference after convergence is the operator's (plus the
    // stand-ins' state, see docs/performance.md).
    let rss_baseline = Rss::now().unwrap_or_default();
    let (running, registry) = start_operator(cp, &args, &ns, ChildRuntime::Actors).await?;

    let mut results = json!({
        "args": args,
        "machine": machine(),
        "namespace": ns,
        // The machine may be shared: its load at the start and the end of the run.
        "loadavg_start": loadavg(),
    });

    let t_servers = Instant::now();
    let standins = servers(&args, &client, &ns, &running, &registry).await?;
    results["servers"] = json!({"count": args.servers, "all_keyed_ms": ms(t_servers.elapsed())});

    let cold = cold_start(&args, &client, &ns, &registry, &standins).await?;
    results["cold_start"] = cold;
    results["memory_after_convergence"] =
        memory_after(rss_baseline, Rss::now().unwrap_or_default(), args.teams);

    say("forced resync of every actor");
    results["forced_resync"] = forced_resync(&args, &running, &registry, &standins).await?;

    // Dispatch before the idle window: right after the forced resync every timer was just
    // re-armed, so no resync pass (of another team) can be mistaken for the patched team's.
    say("dispatch latency");
    results["dispatch"] = dispatch(&args, &client, &ns, &registry, &running.ctx.metrics).await?;

    say(&format!("idle window of {} s", args.idle_secs));
    results["idle"] = idle(&args, &registry, &standins).await?;

    let running = if args.skip_relist {
        running
    } else {
        say("relist: restarting the operator (every informer lists again)");
        let (v, r) = relist(cp, &args, &ns, running).await?;
        results["relist"] = v;
        r
    };
    running.stop().await;
    for s in standins {
        s.shutdown().await;
    }

    results["baselines"] = if args.skip_baselines {
        json!("skipped")
    } else {
        let mut out = serde_json::Map::new();
        let variants: &[(&str, u16)] = if args.skip_c {
            &[("b_controller", 0)]
        } else {
            &[("b_controller", 0), ("c_concurrency_1", 1)]
        };
        for &(label, concurrency) in variants {
            say(&format!(
                "baseline {label}: kube-runtime Controllers for teams and sources, concurrency {}",
                if concurrency == 0 {
                    "unbounded".to_owned()
                } else {
                    concurrency.to_string()
                }
            ));
            out.insert(
                label.into(),
                baseline(cp, &args, &client, concurrency).await?,
            );
        }
        let total = |v: &Value| v["total_ms"].as_f64().unwrap_or(f64::NAN);
        let a = total(&results["cold_start"]);
        let b = total(&out["b_controller"]);
        if let Some(c) = out.get("c_concurrency_1").map(total) {
            out.insert("ratio_c_to_a".into(), json!(round2(c / a)));
        }
        out.insert("ratio_a_to_b".into(), json!(round2(a / b)));
        Value::Object(out)
    };

    say(&format!("spawn cost of {} null actors", args.spawn_actors));
    results["spawn"] = serde_json::to_value(spawn_cost::measure(args.spawn_actors).await?)?;

    results["loadavg_end"] = loadavg();
    println!("{}", table(&args, &results));
    if let Some(dir) = args.out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&args.out, serde_json::to_string_pretty(&results)?)?;
    say(&format!("raw results in {}", args.out.display()));
    Ok(())
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Starts an operator watching only `ns` (each variant of a run gets its own namespace, so
/// none sees another's objects), with its own metrics registry.
async fn start_operator(
    cp: &ControlPlane,
    args: &Args,
    ns: &str,
    children: ChildRuntime,
) -> anyhow::Result<(RunningOperator, Arc<Registry>)> {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let registry = Arc::new(registry);
    let opts = StartOptions {
        config: OperatorConfig {
            resync: Duration::from_secs(args.resync_secs),
            max_concurrent_passes: args.max_concurrent_reconciles,
            server_url_template: "http://127.0.0.1:{port}".into(),
            cluster_domain: "cluster.local".into(),
            watch_namespaces: vec![ns.to_owned()],
            // Its records and instance claim (team::records, routing::claims) live there too.
            operator_namespace: ns.to_owned(),
            ..OperatorConfig::default()
        },
        restart_policy: RestartPolicy::default(),
        clock: Arc::new(SystemClock),
        instance: "bench".into(),
        health: Default::default(),
        faults: Default::default(),
    };
    let mut running = operator::start_with(
        terdut_actors::kube_clients::KubeClients::from_client(cp.client().await?),
        metrics,
        opts,
        children,
    )
    .await?;
    running.wait_synced().await;
    Ok((running, registry))
}

/// The TerdutServers of a variant, each with its stand-in, keyed (credentials handed out).
async fn servers(
    args: &Args,
    client: &kube::Client,
    ns: &str,
    running: &RunningOperator,
    registry: &Registry,
) -> anyhow::Result<Vec<terdut_standin::Handle>> {
    say(&format!(
        "{} servers with stand-ins ({} ms per call) in {ns}",
        args.servers, args.latency_ms
    ));
    let mut standins = Vec::new();
    for i in 0..args.servers {
        let name = fixtures::server_name(i);
        let port = fixtures::free_port()?;
        standins
            .push(fixtures::server_with_standin(client, ns, &name, port, args.latency_ms).await?);
        fixtures::wait_credentials(&running.tree.registry, &ObjectKey::new(ns, &name)).await?;
    }
    // The new Deployments' status updates (kube-controller-manager) nudge the server actors
    // for a while; the cold start begins once that has died down.
    wait_quiet(registry, Duration::from_secs(3), Duration::from_secs(60)).await;
    Ok(standins)
}

/// Baseline (b) (`concurrency` 0: unbounded) or (c) (1): a fresh namespace, an operator whose
/// server actors run as in (a) but whose teams and sources are reconciled by kube-runtime
/// Controllers, fresh servers and stand-ins, and the same cold start.
async fn baseline(
    cp: &ControlPlane,
    args: &Args,
    client: &kube::Client,
    concurrency: u16,
) -> anyhow::Result<Value> {
    let ns = cp.namespace(client, "bench").await?;
    let (running, registry) = start_operator(cp, args, &ns, ChildRuntime::External).await?;
    let standins = servers(args, client, &ns, &running, &registry).await?;
    let controllers = controllers::spawn(
        client,
        &running.ctx,
        &running.tree.registry,
        &ns,
        concurrency,
    );
    let mut cold = cold_start(args, client, &ns, &registry, &standins).await?;
    cold["namespace"] = json!(ns);
    cold["concurrency"] = json!(concurrency);
    controllers.stop();
    running.stop().await;
    for s in standins {
        s.shutdown().await;
    }
    Ok(cold)
}

/// Peak memory during a relist: stops the operator and starts a new one on the same objects
/// (every informer lists everything again, every actor is spawned and runs one pass), with the
/// process's peak (`VmHWM`) reset just before.
async fn relist(
    cp: &ControlPlane,
    args: &Args,
    ns: &str,
    running: RunningOperator,
) -> anyhow::Result<(Value, RunningOperator)> {
    running.stop().await;
    let before = Rss::now().unwrap_or_default();
    let reset = rss::reset_peak();
    let t0 = Instant::now();
    let (running, registry) = start_operator(cp, args, ns, ChildRuntime::Actors).await?;
    let synced_ms = ms(t0.elapsed());
    let quiet = wait_quiet(&registry, Duration::from_secs(3), Duration::from_secs(300)).await;
    let settled_ms = ms(t0.elapsed());
    let after = Rss::now().unwrap_or_default();
    Ok((
        json!({
            "peak_reset": reset,
            "rss_before_mib": mib(before.rss_kib as i64),
            "peak_during_mib": mib(after.peak_kib as i64),
            "peak_over_before_mib": mib(after.peak_kib as i64 - before.rss_kib as i64),
            "rss_after_mib": mib(after.rss_kib as i64),
            "listed_ms": synced_ms,
            "settled_ms": settled_ms,
            "quiet": quiet,
        }),
        running,
    ))
}

/// `/proc/loadavg`'s 1, 5 and 15 minute load averages.
pub(crate) fn loadavg() -> Value {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    json!(
        text.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    )
}

pub(crate) fn say(what: &str) {
    eprintln!("[bench] {what}");
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e4).round() / 10.0
}

pub(crate) fn machine() -> Value {
    let cmd = |c: &str, a: &[&str]| {
        std::process::Command::new(c)
            .args(a)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    };
    json!({
        "nproc": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "mem_total": cmd("sh", &["-c", "free -h | awk '/^Mem:/{print $2}'"]),
        "load_avg": std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim(),
        "rustc": cmd("rustc", &["--version"]),
        "kernel": cmd("uname", &["-r"]),
        "profile": if cfg!(debug_assertions) { "debug" } else { "release" },
    })
}

/// Reconciles and writes so far, the two things that move while the operator works.
fn activity(registry: &Registry) -> (u64, u64) {
    let s = Scrape::take(registry);
    (
        s.sum("reconciles_total", &[]) as u64,
        s.sum("kube_writes_total", &[]) as u64,
    )
}

/// Waits until neither reconciles nor writes moved for `stable` (at most `max`); returns
/// whether it got quiet.
async fn wait_quiet(registry: &Registry, stable: Duration, max: Duration) -> bool {
    let start = Instant::now();
    let mut last = activity(registry);
    let mut since = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = activity(registry);
        if now != last {
            last = now;
            since = Instant::now();
        } else if since.elapsed() >= stable {
            return true;
        }
        if start.elapsed() >= max {
            return false;
        }
    }
}

/// Terdut API calls received by every stand-in, by endpoint label.
async fn calls(standins: &[terdut_standin::Handle]) -> anyhow::Result<BTreeMap<String, u64>> {
    let mut out = BTreeMap::new();
    for s in standins {
        for (label, n) in s.admin().calls().await?.0 {
            *out.entry(label).or_insert(0) += n;
        }
    }
    Ok(out)
}

async fn reset_calls(standins: &[terdut_standin::Handle]) -> anyhow::Result<()> {
    for s in standins {
        s.admin().reset_calls().await?;
    }
    Ok(())
}

/// Which kind of actor makes a call with this label: integrations are the sources', the rest
/// of `/api/v1/teams` the teams', anything else (whoami, health) the servers'.
fn call_kind(label: &str) -> &'static str {
    if label.contains("/integrations") {
        "source"
    } else if label.contains("/api/v1/teams") {
        "team"
    } else {
        "other"
    }
}

fn calls_by_kind(calls: &BTreeMap<String, u64>) -> BTreeMap<&'static str, u64> {
    let mut out = BTreeMap::new();
    for (label, n) in calls {
        *out.entry(call_kind(label)).or_insert(0) += n;
    }
    out
}

fn delta(after: &BTreeMap<String, f64>, before: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, v)| *v != 0.0)
        .collect()
}

fn per(n: f64, objects: usize) -> f64 {
    (n / objects.max(1) as f64 * 100.0).round() / 100.0
}

/// p50, p99 and max of `v` (milliseconds), nearest-rank.
fn percentiles(mut v: Vec<f64>) -> Value {
    if v.is_empty() {
        return json!({"n": 0});
    }
    v.sort_by(f64::total_cmp);
    let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    json!({"n": v.len(), "p50_ms": rank(0.5), "p99_ms": rank(0.99), "max_ms": rank(1.0)})
}

fn is_ready(conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition]) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

type ReadyTimes = Arc<Mutex<HashMap<String, Instant>>>;

/// Records the first instant each object of the namespace is seen Ready=True.
fn watch_ready<K>(api: Api<K>, ready: fn(&K) -> bool) -> (ReadyTimes, tokio::task::JoinHandle<()>)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let times: ReadyTimes = Arc::default();
    let out = times.clone();
    let task = tokio::spawn(async move {
        let mut stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        while let Some(ev) = stream.next().await {
            if let Ok(obj) = ev
                && ready(&obj)
                && let Some(name) = obj.meta().name.clone()
                && let Ok(mut t) = times.lock()
            {
                t.entry(name).or_insert_with(Instant::now);
            }
        }
    });
    (out, task)
}

fn count(t: &ReadyTimes) -> usize {
    t.lock().map(|m| m.len()).unwrap_or(0)
}

/// Phase 1: create every team and source at once and wait until all are Ready.
async fn cold_start(
    args: &Args,
    client: &kube::Client,
    ns: &str,
    registry: &Registry,
    standins: &[terdut_standin::Handle],
) -> anyhow::Result<Value> {
    let teams: Api<TerdutTeam> = Api::namespaced(client.clone(), ns);
    let sources: Api<TerdutAlertSource> = Api::namespaced(client.clone(), ns);
    let (team_ready, team_watch) = watch_ready(teams.clone(), |t: &TerdutTeam| {
        t.status.as_ref().is_some_and(|s| is_ready(&s.conditions))
    });
    let (source_ready, source_watch) = watch_ready(sources.clone(), |s: &TerdutAlertSource| {
        s.status.as_ref().is_some_and(|s| is_ready(&s.conditions))
    });

    reset_calls(standins).await?;
    let before = Scrape::take(registry);
    say(&format!(
        "cold start: {} teams, {} sources",
        args.teams, args.sources
    ));
    let t0 = Instant::now();
    let sent: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    // When the last team's and the last source's create request was answered.
    let answered: Arc<Mutex<[Option<Instant>; 2]>> = Arc::default();
    let creates = (0..args.teams)
        .map(|i| (true, i))
        .chain((0..args.sources).map(|i| (false, i)));
    futures::stream::iter(creates)
        .map(|(is_team, i)| {
            let (teams, sources, sent) = (teams.clone(), sources.clone(), sent.clone());
            let answered = answered.clone();
            async move {
                let at = Instant::now();
                let name = if is_team {
                    let t = fixtures::team(i, args.servers)?;
                    teams.create(&PostParams::default(), &t).await?;
                    fixtures::team_name(i)
                } else {
                    let s = fixtures::source(i, args.teams)?;
                    sources.create(&PostParams::default(), &s).await?;
                    fixtures::source_name(i)
                };
                if let Ok(mut m) = sent.lock() {
                    m.insert(name, at);
                }
                if let Ok(mut a) = answered.lock() {
                    let slot = &mut a[usize::from(!is_team)];
                    *slot = (*slot).max(Some(Instant::now()));
                }
                anyhow::Ok(())
            }
        })
        .buffer_unordered(args.create_concurrency.max(1))
        .try_collect::<Vec<()>>()
        .await?;
    let created_ms = ms(t0.elapsed());

    let deadline = t0 + Duration::from_secs(args.timeout_secs);
    let mut last_report = Instant::now();
    let converged = loop {
        let (t, s) = (count(&team_ready), count(&source_ready));
        if t >= args.teams && s >= args.sources {
            break true;
        }
        if Instant::now() >= deadline {
            break false;
        }
        if last_report.elapsed() >= Duration::from_secs(5) {
            say(&format!(
                "  {:.0} s: {t}/{} teams, {s}/{} sources Ready",
                t0.elapsed().as_secs_f64(),
                args.teams,
                args.sources
            ));
            last_report = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let sent = sent.lock().map(|m| m.clone()).unwrap_or_default();
    let latencies = |ready: &ReadyTimes| -> (Vec<f64>, Option<Instant>) {
        let ready = ready.lock().map(|m| m.clone()).unwrap_or_default();
        let last = ready.values().max().copied();
        let v = ready
            .iter()
            .filter_map(|(name, at)| sent.get(name).map(|s| ms(at.saturating_duration_since(*s))))
            .collect();
        (v, last)
    };
    let (team_lat, team_last) = latencies(&team_ready);
    let (source_lat, source_last) = latencies(&source_ready);
    let last = team_last.max(source_last).unwrap_or(t0);
    let total_ms = ms(last.saturating_duration_since(t0));
    let all: Vec<f64> = team_lat.iter().chain(&source_lat).copied().collect();
    team_watch.abort();
    source_watch.abort();

    // The work a convergence causes does not stop at the last Ready (servers recount their
    // teams, Deployment status settles): count it until the operator is quiet.
    let quiet = wait_quiet(registry, Duration::from_secs(5), Duration::from_secs(120)).await;
    let after = Scrape::take(registry);
    let calls = calls(standins).await?;
    let by_kind = calls_by_kind(&calls);
    let reconciles = delta(
        &after.by_label("reconciles_total", "kind"),
        &before.by_label("reconciles_total", "kind"),
    );
    let writes = delta(
        &after.by_label("kube_writes_total", "kind"),
        &before.by_label("kube_writes_total", "kind"),
    );
    let objects = args.teams + args.sources;
    let total_calls: u64 = calls.values().sum();
    let total_writes: f64 = writes.values().sum();
    let r = |k: &str| reconciles.get(k).copied().unwrap_or(0.0);
    let w = |k: &str| writes.get(k).copied().unwrap_or(0.0);
    let c = |k: &str| by_kind.get(k).copied().unwrap_or(0) as f64;

    // The floor: every call of one object's pass is awaited before the next, and a source
    // can only start once its team is Ready, so the longest dependent chain is a team's
    // creating calls followed by a source's. Only the writes count: a pass that creates an
    // object needs no read first (the POST answers with it); the reads a cold start makes
    // come from extra passes, which is what the ratio is there to expose. The actor runtime
    // bounds concurrency by nothing but the number of objects (one actor each), and the
    // stand-ins answer calls concurrently, so the whole run could finish in one chain's time.
    // Kubernetes round trips (status writes, watch delivery) are left out.
    let writes_of = |kind: &str| {
        calls
            .iter()
            .filter(|(l, _)| !l.starts_with("GET ") && call_kind(l) == kind)
            .map(|(_, n)| *n as f64)
            .sum::<f64>()
    };
    let chain_team = per(writes_of("team"), args.teams);
    let chain_source = per(writes_of("source"), args.sources);
    let chain = chain_team + chain_source;
    let latency = args.latency_ms as f64;
    let floor_ms = chain * latency;
    // The same floor with the create rate as a bound too: nothing can be Ready before its
    // create request was answered, so the last team needs its chain and its sources' after
    // that, and the last source its own chain after its create.
    let [last_team, last_source] = answered.lock().map(|a| *a).unwrap_or_default();
    let since = |at: Option<Instant>| at.map_or(0.0, |at| ms(at.saturating_duration_since(t0)));
    let floor_with_creates_ms =
        (since(last_team) + chain * latency).max(since(last_source) + chain_source * latency);
    let p99_ms = |name: &str, filter: &[(&str, &str)]| {
        after
            .quantile_since(&before, name, filter, 0.99)
            .map(|s| s * 1000.0)
    };
    let questions = json!({
        "count": after.count_since(&before, "parent_call_duration_seconds", &[]),
        "access_p99_le_ms": p99_ms("parent_call_duration_seconds", &[("question", "access")]),
        "all_p99_le_ms": p99_ms("parent_call_duration_seconds", &[]),
    });
    let actor_dispatch = json!({
        "team_p99_le_ms": p99_ms("actor_dispatch_seconds", &[("kind", "team")]),
        "source_p99_le_ms": p99_ms("actor_dispatch_seconds", &[("kind", "source")]),
    });
    Ok(json!({
        "converged": converged,
        "quiet_after": quiet,
        "questions": questions,
        "actor_dispatch": actor_dispatch,
        "ready": {"teams": count(&team_ready), "sources": count(&source_ready)},
        "create_requests_ms": created_ms,
        "total_ms": total_ms,
        "latency_all": percentiles(all),
        "latency_teams": percentiles(team_lat),
        "latency_sources": percentiles(source_lat),
        "reconciles": reconciles,
        "reconciles_per_team": per(r("team"), args.teams),
        "reconciles_per_source": per(r("source"), args.sources),
        "reconciles_server_total": r("server"),
        "terdut_calls": calls,
        "terdut_calls_per_object": per(total_calls as f64, objects),
        "terdut_calls_per_team": per(c("team"), args.teams),
        "terdut_calls_per_source": per(c("source"), args.sources),
        "kube_writes": writes,
        "kube_writes_per_object": per(total_writes, objects),
        "kube_writes_per_team": per(w("team"), args.teams),
        "kube_writes_per_source": per(w("source"), args.sources),
        "floor": {
            "chain_calls": chain,
            "chain_rule": "terdut write calls per team + per source (the reads of a cold start come from extra passes)",
            "concurrency_bound": "none (one actor per object)",
            "floor_ms": floor_ms,
            "ratio_total_to_floor": if floor_ms > 0.0 { (total_ms / floor_ms * 100.0).round() / 100.0 } else { 0.0 },
            "teams_created_ms": since(last_team),
            "sources_created_ms": since(last_source),
            "floor_with_creates_ms": floor_with_creates_ms,
            "ratio_total_to_floor_with_creates": if floor_with_creates_ms > 0.0 { round2(total_ms / floor_with_creates_ms) } else { 0.0 },
        },
    }))
}

fn memory_after(baseline: Rss, now: Rss, teams: usize) -> Value {
    let delta = now.rss_kib as i64 - baseline.rss_kib as i64;
    json!({
        "baseline": baseline,
        "after": now,
        "operator_rss_delta_mib": mib(delta),
        "peak_minus_baseline_mib": mib(now.peak_kib as i64 - baseline.rss_kib as i64),
        "teams": teams,
    })
}

/// Phase 2a: one Resync message to every actor (through its supervisor, as its own timer
/// would send it), then count what the passes did.
async fn forced_resync(
    args: &Args,
    running: &RunningOperator,
    registry: &Registry,
    standins: &[terdut_standin::Handle],
) -> anyhow::Result<Value> {
    let quiet_before = wait_quiet(registry, Duration::from_secs(3), Duration::from_secs(60)).await;
    reset_calls(standins).await?;
    let before = Scrape::take(registry);
    let timeout = Duration::from_secs(10);
    let servers = snapshot(&running.tree.servers(), timeout).await?;
    let t0 = Instant::now();
    for key in servers.children.keys() {
        running
            .tree
            .servers()
            .cast(SupervisorMsg::Forward(key.clone(), ServerMsg::Resync))?;
    }
    // Every team and source actor, under whichever host it lives.
    let (mut teams, mut sources) = (0, 0);
    for host in running.tree.hosts() {
        for (kind, count) in [
            (ChildKind::Team, &mut teams),
            (ChildKind::Source, &mut sources),
        ] {
            let snap = host.snapshot(kind, timeout).await?;
            for key in snap.children.keys() {
                host.resync(kind, key.clone());
                *count += 1;
            }
        }
    }
    let want = [
        ("server", servers.children.len()),
        ("team", teams),
        ("source", sources),
    ];
    let deadline = Instant::now() + Duration::from_secs(args.timeout_secs);
    let all_passed = loop {
        let now = Scrape::take(registry);
        let done = want.iter().all(|(kind, n)| {
            now.sum("reconciles_total", &[("kind", kind)])
                - before.sum("reconciles_total", &[("kind", kind)])
                >= *n as f64
        });
        if done {
            break true;
        }
        if Instant::now() >= deadline {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let passes_ms = ms(t0.elapsed());
    let quiet_after = wait_quiet(registry, Duration::from_secs(3), Duration::from_secs(60)).await;
    let after = Scrape::take(registry);
    let calls = calls(standins).await?;
    let by_kind = calls_by_kind(&calls);
    let writes = after.sum("kube_writes_total", &[]) - before.sum("kube_writes_total", &[]);
    let reconciles = delta(
        &after.by_label("reconciles_total", "kind"),
        &before.by_label("reconciles_total", "kind"),
    );
    let objects = args.teams + args.sources;
    let total: u64 = calls.values().sum();
    let terdut_writes: u64 = calls
        .iter()
        .filter(|(l, _)| !l.starts_with("GET ") && l.contains(" /api/"))
        .map(|(_, n)| n)
        .sum();
    Ok(json!({
        "quiet_before": quiet_before,
        "all_passed": all_passed,
        "all_passes_ms": passes_ms,
        "quiet_after": quiet_after,
        "kube_writes": writes,
        "terdut_calls": calls,
        "terdut_writes": terdut_writes,
        "terdut_calls_per_object": per(total as f64, objects),
        "terdut_calls_per_team": per(by_kind.get("team").copied().unwrap_or(0) as f64, args.teams),
        "terdut_calls_per_source": per(by_kind.get("source").copied().unwrap_or(0) as f64, args.sources),
        "reconciles": reconciles,
    }))
}

/// Phase 2b: nothing happens for `idle_secs`; reconciles per object per minute by kind,
/// against the resync rate (passes per object may reach ceil(window / (0.9 × resync)): the
/// resync is jittered by ±10%).
async fn idle(
    args: &Args,
    registry: &Registry,
    standins: &[terdut_standin::Handle],
) -> anyhow::Result<Value> {
    reset_calls(standins).await?;
    let before = Scrape::take(registry);
    let t0 = Instant::now();
    let children = |scrape: &Scrape, name: &str| {
        scrape.sum(name, &[("kind", "team")]) + scrape.sum(name, &[("kind", "source")])
    };
    // Sampled once a second: the resync waves make the count at any one instant depend on
    // where in the wave it falls; the mean over the window is what idle actors cost.
    let (mut samples, mut alive_sum, mut alive_max) = (0.0, 0.0, 0.0_f64);
    while t0.elapsed() < Duration::from_secs(args.idle_secs) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = children(&Scrape::take(registry), "actors_active");
        samples += 1.0;
        alive_sum += now;
        alive_max = alive_max.max(now);
    }
    let window = t0.elapsed().as_secs_f64();
    let after = Scrape::take(registry);
    let objects = (args.teams + args.sources).max(1) as f64;
    let (alive, passive) = (
        children(&after, "actors_active"),
        children(&after, "actors_passive"),
    );
    let alive_mean = alive_sum / f64::max(samples, 1.0);
    let reconciles = delta(
        &after.by_label("reconciles_total", "kind"),
        &before.by_label("reconciles_total", "kind"),
    );
    let writes = after.sum("kube_writes_total", &[]) - before.sum("kube_writes_total", &[]);
    let calls = calls(standins).await?;
    let resync = args.resync_secs as f64;
    let max_passes = (window / (0.9 * resync)).ceil();
    let per_min = |kind: &str, n: usize| {
        reconciles.get(kind).copied().unwrap_or(0.0) / n.max(1) as f64 / (window / 60.0)
    };
    let passes =
        |kind: &str, n: usize| reconciles.get(kind).copied().unwrap_or(0.0) / n.max(1) as f64;
    let no_hot_loop = passes("team", args.teams) <= max_passes
        && passes("source", args.sources) <= max_passes
        && passes("server", args.servers) <= max_passes;
    Ok(json!({
        "window_s": (window * 10.0).round() / 10.0,
        "resync_s": resync,
        "resync_rate_per_min": 60.0 / resync,
        "reconciles": reconciles,
        "reconciles_per_object_per_min": {
            "server": per_min("server", args.servers),
            "team": per_min("team", args.teams),
            "source": per_min("source", args.sources),
        },
        "max_passes_per_object_allowed": max_passes,
        "no_hot_loop": no_hot_loop,
        "kube_writes": writes,
        "terdut_calls": calls.values().sum::<u64>(),
        "team_and_source_actors_alive": alive,
        "team_and_source_entries_passive": passive,
        "alive_ratio": alive / objects,
        "alive_mean": alive_mean,
        "alive_max": alive_max,
        "alive_mean_ratio": alive_mean / objects,
    }))
}

/// Phase 3b: patch an annotation of one team and time until its actor's pass shows in the
/// metrics; the pass's own duration (from the duration histogram's sum) is subtracted, so
/// what remains is API server → watch → route → supervisor → mailbox → start of the pass.
async fn dispatch(
    args: &Args,
    client: &kube::Client,
    ns: &str,
    registry: &Registry,
    metrics: &terdut_actors::runtime::metrics::OperatorMetrics,
) -> anyhow::Result<Value> {
    let teams: Api<TerdutTeam> = Api::namespaced(client.clone(), ns);
    let mut dispatch = Vec::new();
    let mut end_to_end = Vec::new();
    let mut missed = 0;
    // What one encoding of the registry costs now, the reason the loop below polls a counter.
    let scrape_cost: Vec<f64> = (0..50)
        .map(|_| {
            let t = Instant::now();
            let _ = Scrape::take(registry);
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let phase_start = Scrape::take(registry);
    for i in 0..args.dispatch_samples.min(args.teams) {
        wait_quiet(
            registry,
            Duration::from_millis(500),
            Duration::from_secs(10),
        )
        .await;
        let before = Scrape::take(registry);
        let passes_before = metrics.passes("team");
        let took = |s: &Scrape| s.sum("reconcile_duration_seconds_sum", &[("kind", "team")]);
        let t0 = Instant::now();
        teams
            .patch(
                &fixtures::team_name(i),
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {
                    "bench.terdut.ryuvia.com/nudge": format!("{i}")
                }}})),
            )
            .await?;
        // Polls the pass counter only: encoding the registry every millisecond took a worker
        // thread of the runtime the operator runs on, in the window being measured.
        let seen = loop {
            if metrics.passes("team") > passes_before {
                break Some(Scrape::take(registry));
            }
            if t0.elapsed() > Duration::from_secs(10) {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        let elapsed = t0.elapsed();
        match seen {
            Some(now) => {
                let pass = took(&now) - took(&before);
                end_to_end.push(ms(elapsed));
                dispatch.push(ms(
                    elapsed.saturating_sub(Duration::from_secs_f64(pass.max(0.0)))
                ));
            }
            None => missed += 1,
        }
    }
    let phase_end = Scrape::take(registry);
    let (histogram, team) = ("actor_dispatch_seconds", &[("kind", "team")]);
    let le_ms = |q| {
        phase_end
            .quantile_since(&phase_start, histogram, team, q)
            .map(|s| s * 1000.0)
    };
    let in_operator = json!({
        "observed": phase_end.count_since(&phase_start, histogram, team),
        "p50_le_ms": le_ms(0.5),
        "p99_le_ms": le_ms(0.99),
        "max_le_ms": le_ms(1.0),
    });
    Ok(json!({
        "informer_event_to_pass_start": in_operator,
        "event_to_pass_start": percentiles(dispatch),
        "patch_to_pass_end": percentiles(end_to_end),
        "missed": missed,
        "registry_encoding_ms": percentiles(scrape_cost),
    }))
}

/// The Markdown table of a run: measured value, the issue's target, and whether it was met.
fn table(args: &Args, r: &Value) -> String {
    let c = &r["cold_start"];
    let f = &r["forced_resync"];
    let i = &r["idle"];
    let m = &r["memory_after_convergence"];
    let s = &r["spawn"];
    let d = &r["dispatch"];
    let num = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    let yes = |b: bool| if b { "met" } else { "NOT met" };
    let mut rows: Vec<(String, String, String, String)> = Vec::new();
    let mut row = |a: &str, b: String, t: &str, ok: &str| {
        rows.push((a.into(), b, t.into(), ok.into()));
    };
    row(
        "objects",
        format!(
            "{} servers, {} teams (2 switches), {} sources; {} ms per terdut call; {}",
            args.servers,
            args.teams,
            args.sources,
            args.latency_ms,
            r["machine"]["profile"].as_str().unwrap_or("?")
        ),
        "",
        "",
    );
    row(
        "all Ready (total, from the first create)",
        format!(
            "{:.0} ms ({}/{} teams, {}/{} sources)",
            num(&c["total_ms"]),
            c["ready"]["teams"],
            args.teams,
            c["ready"]["sources"],
            args.sources
        ),
        "",
        if c["converged"].as_bool() == Some(true) {
            ""
        } else {
            "NOT converged"
        },
    );
    row(
        "create→Ready p50 / p99 (all objects)",
        format!(
            "{:.0} / {:.0} ms",
            num(&c["latency_all"]["p50_ms"]),
            num(&c["latency_all"]["p99_ms"])
        ),
        "",
        "",
    );
    row(
        "  teams p50 / p99; sources p50 / p99",
        format!(
            "{:.0} / {:.0} ms; {:.0} / {:.0} ms",
            num(&c["latency_teams"]["p50_ms"]),
            num(&c["latency_teams"]["p99_ms"]),
            num(&c["latency_sources"]["p50_ms"]),
            num(&c["latency_sources"]["p99_ms"])
        ),
        "",
        "",
    );
    let ratio = num(&c["floor"]["ratio_total_to_floor"]);
    row(
        "floor (chain × latency) and ratio",
        format!(
            "{:.1} calls × {} ms = {:.0} ms; total/floor = {ratio:.1}",
            num(&c["floor"]["chain_calls"]),
            args.latency_ms,
            num(&c["floor"]["floor_ms"])
        ),
        "≤ 1.25×",
        yes(ratio <= 1.25),
    );
    let fc = num(&c["floor"]["ratio_total_to_floor_with_creates"]);
    row(
        "floor including the create phase, and ratio",
        format!(
            "creates answered by {:.0} ms (teams {:.0} ms); floor {:.0} ms; total/floor = {fc:.2}",
            num(&c["create_requests_ms"]),
            num(&c["floor"]["teams_created_ms"]),
            num(&c["floor"]["floor_with_creates_ms"])
        ),
        "≤ 1.25×",
        yes(fc <= 1.25),
    );
    let rpt = num(&c["reconciles_per_team"]);
    let rps = num(&c["reconciles_per_source"]);
    row(
        "reconciles per team / per source",
        format!(
            "{rpt:.2} / {rps:.2} (servers: {:.0} in all)",
            num(&c["reconciles_server_total"])
        ),
        "≤ 2",
        yes(rpt <= 2.0 && rps <= 2.0),
    );
    row(
        "terdut calls per object (team / source)",
        format!(
            "{:.2} ({:.2} / {:.2})",
            num(&c["terdut_calls_per_object"]),
            num(&c["terdut_calls_per_team"]),
            num(&c["terdut_calls_per_source"])
        ),
        "",
        "",
    );
    row(
        "Kubernetes writes per object (team / source)",
        format!(
            "{:.2} ({:.2} / {:.2})",
            num(&c["kube_writes_per_object"]),
            num(&c["kube_writes_per_team"]),
            num(&c["kube_writes_per_source"])
        ),
        "",
        "",
    );
    let fw = num(&f["kube_writes"]);
    row(
        "forced resync: Kubernetes writes",
        format!("{fw:.0} (terdut writes: {})", f["terdut_writes"]),
        "0",
        yes(fw == 0.0 && f["terdut_writes"].as_u64() == Some(0)),
    );
    row(
        "forced resync: terdut calls per object (team / source)",
        format!(
            "{:.2} ({:.2} / {:.2}); all passes in {:.0} ms",
            num(&f["terdut_calls_per_object"]),
            num(&f["terdut_calls_per_team"]),
            num(&f["terdut_calls_per_source"]),
            num(&f["all_passes_ms"])
        ),
        "reads only",
        "",
    );
    let rate = &i["reconciles_per_object_per_min"];
    row(
        "idle: reconciles per object per minute (team / source / server)",
        format!(
            "{:.3} / {:.3} / {:.3} over {:.0} s; resync rate {:.3}/min",
            num(&rate["team"]),
            num(&rate["source"]),
            num(&rate["server"]),
            num(&i["window_s"]),
            num(&i["resync_rate_per_min"])
        ),
        "≤ resync rate",
        yes(i["no_hot_loop"].as_bool() == Some(true)),
    );
    row(
        "operator RSS after convergence (delta over baseline)",
        format!(
            "{:.1} MiB at {} teams; process peak − baseline {:.1} MiB",
            num(&m["operator_rss_delta_mib"]),
            args.teams,
            num(&m["peak_minus_baseline_mib"])
        ),
        "≤ 40 MiB at 10,000 teams",
        if args.teams >= 10_000 {
            yes(num(&m["operator_rss_delta_mib"]) <= 40.0)
        } else {
            "not measured at 10,000"
        },
    );
    row(
        "spawn cost",
        format!(
            "{} actors: all started {:.0} ms, all nudged {:.0} ms, {:.0} bytes/actor",
            s["actors"],
            num(&s["all_started_ms"]),
            num(&s["all_nudged_ms"]),
            num(&s["bytes_per_actor"])
        ),
        "",
        "",
    );
    let inside = &d["informer_event_to_pass_start"];
    let dispatch_p99 = num(&inside["p99_le_ms"]);
    row(
        "event→reconcile dispatch p50 / p99 (informer event → pass start, in the operator)",
        format!(
            "≤ {:.3} / ≤ {:.3} ms over {:.0} nudges; PATCH→pass start {:.1} / {:.1} ms, →pass end {:.1} / {:.1} ms",
            num(&inside["p50_le_ms"]),
            dispatch_p99,
            num(&inside["observed"]),
            num(&d["event_to_pass_start"]["p50_ms"]),
            num(&d["event_to_pass_start"]["p99_ms"]),
            num(&d["patch_to_pass_end"]["p50_ms"]),
            num(&d["patch_to_pass_end"]["p99_ms"])
        ),
        "≤ 1 ms",
        yes(dispatch_p99 <= 1.0),
    );
    let q = &c["questions"];
    let q99 = num(&q["all_p99_le_ms"]);
    row(
        "cold start: questions to server actors (consent and credentials in one), p99",
        format!(
            "≤ {:.3} ms ({:.0} questions)",
            num(&q["access_p99_le_ms"]),
            num(&q["count"])
        ),
        "≤ 1 ms",
        yes(q99 <= 1.0),
    );
    let mean = num(&i["alive_mean_ratio"]);
    row(
        "team and source actors alive during the idle window (mean of 1 s samples; max; at its end)",
        format!(
            "{:.1} of {} objects ({:.2} %); max {:.0}; at the end {:.0} alive, {:.0} passive",
            num(&i["alive_mean"]),
            args.teams + args.sources,
            mean * 100.0,
            num(&i["alive_max"]),
            num(&i["team_and_source_actors_alive"]),
            num(&i["team_and_source_entries_passive"])
        ),
        "≤ 1 %",
        yes(mean <= 0.01),
    );
    let b = &r["baselines"];
    if b.is_object() {
        let (bb, bc) = (&b["b_controller"], &b["c_concurrency_1"]);
        for (name, v) in [
            ("(b) kube-runtime Controller, unbounded", bb),
            ("(c) kube-runtime Controller, concurrency 1", bc),
        ] {
            if v.is_null() {
                row(name, "skipped (`--skip-c`)".into(), "", "");
                continue;
            }
            row(
                &format!("{name}: all Ready; reconciles per team / source"),
                format!(
                    "{:.0} ms ({}/{} teams, {}/{} sources); {:.2} / {:.2}; creates {:.0} ms",
                    num(&v["total_ms"]),
                    v["ready"]["teams"],
                    args.teams,
                    v["ready"]["sources"],
                    args.sources,
                    num(&v["reconciles_per_team"]),
                    num(&v["reconciles_per_source"]),
                    num(&v["create_requests_ms"]),
                ),
                "",
                "",
            );
        }
        let (ca, ab) = (num(&b["ratio_c_to_a"]), num(&b["ratio_a_to_b"]));
        if b["ratio_c_to_a"].is_null() {
            row("(c) / (a)", "not measured".into(), "≥ 5", "not measured");
        } else {
            row("(c) / (a)", format!("{ca:.2}"), "≥ 5", yes(ca >= 5.0));
        }
        row("(a) / (b)", format!("{ab:.2}"), "≤ 1.10", yes(ab <= 1.10));
    } else {
        row(
            "baselines (b) kube-runtime Controller, (c) concurrency 1",
            "skipped".into(),
            "≥ 5× (c), ≤ 1.1× (b)",
            "not measured",
        );
    }
    let l = &r["relist"];
    if l.is_object() {
        row(
            "relist (operator restart): peak RSS over the RSS before",
            format!(
                "{:.1} MiB (peak {:.1} MiB, after {:.1} MiB; listed in {:.0} ms, quiet after {:.0} ms)",
                num(&l["peak_over_before_mib"]),
                num(&l["peak_during_mib"]),
                num(&l["rss_after_mib"]),
                num(&l["listed_ms"]),
                num(&l["settled_ms"])
            ),
            "",
            "",
        );
    }
    let mut out = String::from("| measure | value | target | |\n|---|---|---|---|\n");
    for (a, b, t, ok) in rows {
        out.push_str(&format!("| {a} | {b} | {t} | {ok} |\n"));
    }
    out
}
