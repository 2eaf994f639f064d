//! One peer's run (cold create, steady window, edits during a wave, restart) and the shards
//! run, against fresh namespaces, servers and stand-ins.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutTeam};
use terdut_testenv::ControlPlane;

use super::PeersArgs;
use super::audit::AuditLog;
use super::process::{Launch, Peer, Running};
use super::watch::ReadyWatch;
use crate::fixtures;

const SHARD_LABEL: &str = "bench.terdut.ryuvia.com/shard";

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e4).round() / 10.0
}

/// The physical floors of a round, measured with no operator running: the creates alone (the
/// same objects at the same concurrency), and a list of them all (what a restart must read
/// before anything). Each plus its dependent chain of terdut calls × latency: cold, the team's
/// POST, then its switches and its source's integration at once (2 calls); restart, the team's
/// GET, then its ladder and switches at once (2 calls; a source's one GET runs beside it).
pub struct Floors {
    pub creates_ms: f64,
    pub list_ms: f64,
}

pub async fn floors(
    cp: &ControlPlane,
    client: &kube::Client,
    args: &PeersArgs,
) -> anyhow::Result<Floors> {
    let ns = cp.namespace(client, "floor").await?;
    let t0 = Instant::now();
    create_all(client, &ns, args, 1, None).await?;
    let creates_ms = ms(t0.elapsed());
    let t1 = Instant::now();
    let teams: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
    let sources: Api<TerdutAlertSource> = Api::namespaced(client.clone(), &ns);
    let lp = ListParams::default();
    let (a, b) = futures::join!(teams.list(&lp), sources.list(&lp));
    a?;
    b?;
    let list_ms = ms(t1.elapsed());
    super::namespace::remove(client, &ns, args.create_concurrency).await;
    crate::say(&format!(
        "floors: {} creates alone {creates_ms:.0} ms, list {list_ms:.0} ms",
        2 * args.objects
    ));
    Ok(Floors {
        creates_ms,
        list_ms,
    })
}

/// Creates the teams and sources (team i on server i % servers, source i on team i), `shard`
/// labels (team i in shard i % n) when given. Returns when every create was answered.
async fn create_all(
    client: &kube::Client,
    ns: &str,
    args: &PeersArgs,
    servers: usize,
    shards: Option<usize>,
) -> anyhow::Result<BTreeMap<String, Instant>> {
    let teams: Api<TerdutTeam> = Api::namespaced(client.clone(), ns);
    let sources: Api<TerdutAlertSource> = Api::namespaced(client.clone(), ns);
    let n = args.objects;
    let creates = (0..n).map(|i| (true, i)).chain((0..n).map(|i| (false, i)));
    let sent = futures::stream::iter(creates)
        .map(|(is_team, i)| {
            let (teams, sources) = (teams.clone(), sources.clone());
            async move {
                let at = Instant::now();
                let label = shards.map(|s| json!({SHARD_LABEL: (i % s).to_string()}));
                let name = if is_team {
                    let mut t = fixtures::team(i, servers)?;
                    if let Some(l) = &label {
                        t.metadata.labels = serde_json::from_value(l.clone())?;
                    }
                    teams.create(&PostParams::default(), &t).await?;
                    fixtures::team_name(i)
                } else {
                    let mut s = fixtures::source(i, n)?;
                    if let Some(l) = &label {
                        s.metadata.labels = serde_json::from_value(l.clone())?;
                    }
                    sources.create(&PostParams::default(), &s).await?;
                    fixtures::source_name(i)
                };
                anyhow::Ok((name, at))
            }
        })
        .buffer_unordered(args.create_concurrency.max(1))
        .try_collect::<BTreeMap<_, _>>()
        .await?;
    Ok(sent)
}

/// The servers of a namespace and their stand-ins. For a peer without server actors the bench
/// writes each server's operator key Secret itself (as the server actor would), labelled as
/// the operator labels the Secrets it makes.
async fn servers(
    client: &kube::Client,
    ns: &str,
    args: &PeersArgs,
    count: usize,
    make_keys: bool,
    labels: impl Fn(usize) -> Option<Value>,
) -> anyhow::Result<Vec<terdut_standin::Handle>> {
    let mut standins = Vec::new();
    for i in 0..count {
        let name = fixtures::server_name(i);
        let port = fixtures::free_port()?;
        if make_keys {
            let key = format!("tdsa_{}", hex48());
            let secret: Secret = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": format!("{name}-operator-key"),
                             "labels": {"terdut.ryuvia.com/managed": "true"}},
                "stringData": {"token": key},
            }))?;
            Api::<Secret>::namespaced(client.clone(), ns)
                .create(&PostParams::default(), &secret)
                .await?;
        }
        standins.push(
            fixtures::server_with_standin_labelled(
                client,
                ns,
                &name,
                port,
                args.latency_ms,
                labels(i),
            )
            .await?,
        );
    }
    Ok(standins)
}

fn hex48() -> String {
    use std::hash::{BuildHasher, Hasher};
    (0..3)
        .map(|_| {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(0);
            format!("{:016x}", h.finish())
        })
        .collect()
}

async fn calls(standins: &[terdut_standin::Handle]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for s in standins {
        if let Ok(c) = s.admin().calls().await {
            for (label, n) in c.0 {
                *out.entry(label).or_insert(0) += n;
            }
        }
    }
    out
}

async fn reset_calls(standins: &[terdut_standin::Handle]) {
    for s in standins {
        let _ = s.admin().reset_calls().await;
    }
}

/// Terdut calls and audited requests so far (the audit log's size stands for the latter).
async fn activity(standins: &[terdut_standin::Handle], audit_len: &dyn Fn() -> u64) -> (u64, u64) {
    (calls(standins).await.values().sum(), audit_len())
}

/// Waits until neither terdut calls nor audited kube-apiserver requests moved for `stable`;
/// returns the instant of the last movement (or the start) and whether it got quiet.
async fn wait_quiet(
    standins: &[terdut_standin::Handle],
    audit_len: &dyn Fn() -> u64,
    stable: Duration,
    max: Duration,
) -> (SystemTime, Instant, bool) {
    let start = Instant::now();
    let mut last = activity(standins, audit_len).await;
    let (mut since, mut since_wall) = (Instant::now(), SystemTime::now());
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = activity(standins, audit_len).await;
        if now != last {
            last = now;
            since = Instant::now();
            since_wall = SystemTime::now();
        } else if since.elapsed() >= stable {
            return (since_wall, since, true);
        }
        if start.elapsed() >= max {
            return (since_wall, since, false);
        }
    }
}

/// How long a cold create or a restart may take to go quiet: one resync period. A peer still
/// busy then (one reconcile at a time whose resync work fills the period, as (d1)'s at a
/// 60 s resync and 1,000 objects) is running its resync wave, which is not the scenario's
/// work: the run records `quiet: false` instead of waiting up to `--timeout-secs`.
fn within_a_period(args: &PeersArgs) -> Duration {
    Duration::from_secs(args.resync_secs.clamp(5, 300))
}

fn per_object_hour(n: f64, objects: usize, window: Duration) -> f64 {
    let v = n / objects.max(1) as f64 / (window.as_secs_f64() / 3600.0);
    (v * 100.0).round() / 100.0
}

fn percentiles(mut v: Vec<f64>) -> Value {
    if v.is_empty() {
        return json!({"n": 0});
    }
    v.sort_by(f64::total_cmp);
    let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    json!({"n": v.len(), "p50_ms": rank(0.5), "p99_ms": rank(0.99), "max_ms": rank(1.0)})
}

/// Up when it has made its first audited request (the log grew past `before`, its size when the
/// peer was launched) and gone quiet.
async fn wait_started(
    peer: &mut Running,
    standins: &[terdut_standin::Handle],
    audit_len: &dyn Fn() -> u64,
    before: u64,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while audit_len() <= before || !peer.alive() {
        anyhow::ensure!(peer.alive(), "peer ({}) exited at start", peer.peer.label());
        anyhow::ensure!(
            Instant::now() < deadline,
            "peer ({}) made no request",
            peer.peer.label()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wait_quiet(
        standins,
        audit_len,
        Duration::from_secs(3),
        Duration::from_secs(60),
    )
    .await;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub async fn run_peer(
    cp: &ControlPlane,
    client: &kube::Client,
    audit: &AuditLog,
    launch: &Launch,
    args: &PeersArgs,
    peer: Peer,
    round: usize,
    floors: &Floors,
) -> anyhow::Result<Value> {
    let ns = cp
        .namespace(client, &format!("p{round}-{}", peer.label().to_lowercase()))
        .await?;
    let audit_len = {
        let audit = audit.clone();
        move || audit.size()
    };
    let n = args.objects;
    let objects = 2 * n;
    let latency = args.latency_ms as f64;
    let tag = format!("r{round}");
    let mut out =
        json!({"peer": peer.label(), "round": round, "namespace": ns, "loadavg": crate::loadavg()});

    // (a) and (b) make the key Secrets (their server actors), so they run before the servers.
    let (running, standins) = if peer.has_server_actors() {
        let before = audit_len();
        let mut running = launch.start(peer, &ns, None, &tag)?;
        let standins = servers(client, &ns, args, args.servers, false, |_| None).await?;
        wait_started(&mut running, &standins, &audit_len, before).await?;
        (running, standins)
    } else {
        let standins = servers(client, &ns, args, args.servers, true, |_| None).await?;
        let before = audit_len();
        let mut running = launch.start(peer, &ns, None, &tag)?;
        wait_started(&mut running, &standins, &audit_len, before).await?;
        (running, standins)
    };
    let idle_rss = running.rss_mib().0;
    out["idle_rss_mib"] = json!(idle_rss);
    let ready = ReadyWatch::start(client, &ns);

    // Windows of audited requests, read once the peer has stopped (below).
    let mut windows: Vec<(&str, SystemTime, SystemTime, Option<Duration>)> = Vec::new();

    // Cold create. `all_ready` is when the last object turned Ready: every object's resync
    // waves fall at k × resync ± 10 % after it (less the spread of the creates).
    let mut converged_rss = f64::NAN;
    let mut all_ready = Instant::now();
    let mut spread = Duration::ZERO;
    if args.has("cold") {
        reset_calls(&standins).await;
        let (cpu0, w0, t0) = (running.cpu_secs(), SystemTime::now(), Instant::now());
        let sent = create_all(client, &ns, args, args.servers, None).await?;
        let created_ms = ms(t0.elapsed());
        let deadline = t0 + Duration::from_secs(args.timeout_secs);
        let converged = loop {
            let (t, s) = ready.counts();
            if t >= n && s >= n {
                break true;
            }
            if Instant::now() > deadline {
                break false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let (teams_at, sources_at) = ready.instants();
        let last = teams_at
            .values()
            .chain(sources_at.values())
            .max()
            .copied()
            .unwrap_or(t0);
        let total_ms = ms(last.saturating_duration_since(t0));
        (all_ready, spread) = (last, last.saturating_duration_since(t0));
        let lat: Vec<f64> = teams_at
            .iter()
            .chain(sources_at.iter())
            .filter_map(|(k, at)| sent.get(k).map(|s| ms(at.saturating_duration_since(*s))))
            .collect();
        let (quiet_wall, _, quiet) = wait_quiet(
            &standins,
            &audit_len,
            Duration::from_secs(5),
            within_a_period(args),
        )
        .await;
        let cpu = running.cpu_secs() - cpu0;
        let c = calls(&standins).await;
        windows.push(("cold", w0, quiet_wall + Duration::from_millis(1), None));
        let floor = floors.creates_ms + 2.0 * latency;
        out["cold"] = json!({
            "converged": converged, "quiet": quiet, "total_ms": total_ms, "creates_ms": created_ms,
            "latency": percentiles(lat),
            "floor_ms": floor, "floor_creates_alone_ms": floors.creates_ms,
            "ratio_to_floor": (total_ms / floor * 100.0).round() / 100.0,
            "cpu_secs": cpu, "terdut_calls": c.values().sum::<u64>(), "terdut_calls_by_endpoint": c,
        });
        tokio::time::sleep(Duration::from_secs(5)).await;
        converged_rss = running.rss_mib().0;
        out["converged_rss_mib"] = json!(converged_rss);
        out["converged_heap"] = running.heap().await;
    }

    // Steady state: from half a period after all Ready, one period (`--window-secs`). Each
    // object resyncs every period ±10 %, so the window holds about one resync of each and its
    // rates are a period's; when the creates took under 0.3 periods it holds exactly every
    // object's first resync (0.9-1.1 periods after its Ready) and none of its second.
    let resync = Duration::from_secs(args.resync_secs);
    if args.has("steady") {
        let window = args.window();
        let start = all_ready + resync / 2;
        tokio::time::sleep_until(start.into()).await;
        let offset = Instant::now().saturating_duration_since(all_ready);
        reset_calls(&standins).await;
        ready.take_left();
        let (cpu0, w0, t0) = (running.cpu_secs(), SystemTime::now(), Instant::now());
        let (mut samples, mut alive_sum, mut alive_max, mut rss_max) = (0.0, 0.0, 0.0_f64, 0.0_f64);
        while t0.elapsed() < window {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if let Some(a) = running.actors_alive().await {
                samples += 1.0;
                alive_sum += a;
                alive_max = alive_max.max(a);
            }
            rss_max = rss_max.max(running.rss_mib().0);
        }
        let elapsed = t0.elapsed();
        let cpu = running.cpu_secs() - cpu0;
        let c = calls(&standins).await;
        let terdut: u64 = c.values().sum();
        let terdut_writes: u64 = c
            .iter()
            .filter(|(l, _)| !l.starts_with("GET "))
            .map(|(_, v)| v)
            .sum();
        windows.push(("steady", w0, SystemTime::now(), Some(elapsed)));
        let left = ready.take_left();
        out["steady"] = json!({
            "window_s": elapsed.as_secs_f64().round(), "resync_s": args.resync_secs,
            "window_start_after_all_ready_s": offset.as_secs_f64().round(),
            "left_ready": left,
            "terdut_calls": terdut, "terdut_writes": terdut_writes, "terdut_calls_by_endpoint": c,
            "terdut_calls_per_object_hour": per_object_hour(terdut as f64, objects, elapsed),
            "cpu_secs": cpu,
            "actors_alive_mean": if samples > 0.0 { json!(alive_sum / samples) } else { Value::Null },
            "actors_alive_max": if samples > 0.0 { json!(alive_max) } else { Value::Null },
            "actors_alive_mean_ratio": if samples > 0.0 { json!(alive_sum / samples / objects as f64) } else { Value::Null },
            "rss_max_mib": rss_max, "rss_end_mib": running.rss_mib().0,
        });
    }

    // One change at a time while the second resync wave runs (1.8-2.2 periods after each
    // object's Ready, so from 1.8 periods after the first create until 2.2 after all Ready):
    // edit → Ready at the new generation.
    if args.has("change") && args.change_samples > 0 {
        let teams: Api<TerdutTeam> = Api::namespaced(client.clone(), &ns);
        let from = (all_ready + resync.mul_f64(1.8))
            .checked_sub(spread)
            .unwrap_or(all_ready)
            .max(Instant::now());
        let until = (all_ready + resync.mul_f64(2.2)).max(from + Duration::from_secs(1));
        let gap = (until - from) / args.change_samples as u32;
        let (mut all, mut in_wave, mut missed) = (Vec::new(), Vec::new(), 0);
        for k in 0..args.change_samples {
            tokio::time::sleep_until((from + gap * k as u32).into()).await;
            let i = (k * n.max(1) / args.change_samples) % n.max(1);
            let name = fixtures::team_name(i);
            let before: u64 = calls(&standins).await.values().sum();
            let t0 = Instant::now();
            let patched = teams
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(
                        json!({"spec": {"displayName": format!("Team {i} edit {round}.{k}")}}),
                    ),
                )
                .await?;
            let generation = patched.metadata.generation.unwrap_or(0);
            if ready
                .team_ready_at(&name, generation, Duration::from_secs(30))
                .await
            {
                let took = ms(t0.elapsed());
                all.push(took);
                // The edit makes 4 calls at most (a GET of the team's three and the rename):
                // more during the sample means other objects' resyncs ran beside it.
                let others = calls(&standins)
                    .await
                    .values()
                    .sum::<u64>()
                    .saturating_sub(before);
                if others > 4 {
                    in_wave.push(took);
                }
            } else {
                missed += 1;
            }
        }
        out["change"] = json!({
            "all": percentiles(all), "during_wave": percentiles(in_wave), "missed": missed,
            "from_s_after_all_ready": from.saturating_duration_since(all_ready).as_secs_f64().round(),
            "until_s_after_all_ready": until.saturating_duration_since(all_ready).as_secs_f64().round(),
        });
    }

    // Restart on the converged objects (a failover): a new process, every watch lists again.
    if args.has("restart") {
        running.kill();
        tokio::time::sleep(Duration::from_secs(1)).await;
        reset_calls(&standins).await;
        ready.take_left();
        let (w0, t0, before) = (SystemTime::now(), Instant::now(), audit_len());
        let mut next = launch.start(peer, &ns, None, &format!("{tag}-restart"))?;
        // Quiet only counts once it made its first request.
        while audit_len() <= before && t0.elapsed() < Duration::from_secs(60) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (quiet_wall, quiet_at, quiet) = wait_quiet(
            &standins,
            &audit_len,
            Duration::from_secs(5),
            within_a_period(args),
        )
        .await;
        let cpu = next.cpu_secs();
        let (rss, peak) = next.rss_mib();
        let c = calls(&standins).await;
        let floor = floors.list_ms + 2.0 * latency;
        let until_quiet = ms(quiet_at.saturating_duration_since(t0));
        let alive = next.alive();
        let left = ready.take_left();
        // Its watches are logged when they end: read the window once it stopped.
        next.kill();
        tokio::time::sleep(Duration::from_secs(1)).await;
        windows.push(("restart", w0, quiet_wall + Duration::from_millis(1), None));
        let above = |v: f64| v - idle_rss;
        out["restart"] = json!({
            "quiet": quiet, "alive": alive,
            // Not quiet within a period: the restart's work ran into the resync wave, and
            // no time until quiet can be told apart from it.
            "until_quiet_ms": if quiet { json!(until_quiet) } else { Value::Null },
            "left_ready": left,
            "floor_ms": floor, "floor_list_ms": floors.list_ms,
            "ratio_to_floor": if quiet { json!((until_quiet / floor * 100.0).round() / 100.0) } else { Value::Null },
            "cpu_secs": cpu, "terdut_calls": c.values().sum::<u64>(), "terdut_calls_by_endpoint": c,
            "rss_after_mib": rss, "peak_mib": peak,
            "relist_peak_over_idle_ratio": if converged_rss.is_finite() && above(converged_rss) > 0.0 {
                json!((above(peak) / above(converged_rss) * 100.0).round() / 100.0)
            } else { Value::Null },
        });
    } else {
        running.kill();
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // The apiserver logs a request when it completes: read every window now that the peer has
    // stopped, so the watches it opened inside one (and held open) are counted too.
    for (scenario, from, to, per_hour) in windows {
        let req = audit.requests(from, to)?;
        let o = &mut out[scenario];
        o["kube_requests"] = req.json();
        o["kube_requests_per_object"] =
            json!((req.total as f64 / objects as f64 * 100.0).round() / 100.0);
        if let Some(window) = per_hour {
            o["kube_requests_per_object_hour"] =
                json!(per_object_hour(req.total as f64, objects, window));
            o["events_per_object_hour"] =
                json!(per_object_hour(req.events as f64, objects, window));
        }
    }
    if converged_rss.is_finite() {
        out["memory"] = json!({
            "idle_rss_mib": idle_rss, "converged_rss_mib": converged_rss,
            "above_idle_mib": ((converged_rss - idle_rss) * 10.0).round() / 10.0,
        });
    }
    drop(ready);
    for s in standins {
        s.shutdown().await;
    }
    super::namespace::remove(client, &ns, args.create_concurrency).await;
    Ok(out)
}

/// `shards` instances of (a), each with `--selector shard=i`, splitting the teams and sources
/// (and one server per shard, so each instance keys its own): RSS per shard once converged,
/// against one instance's from the rounds.
pub async fn shards(
    cp: &ControlPlane,
    client: &kube::Client,
    launch: &Launch,
    args: &PeersArgs,
    count: usize,
) -> anyhow::Result<Value> {
    let ns = cp.namespace(client, &format!("shards{count}")).await?;
    let mut running = Vec::new();
    for i in 0..count {
        running.push(launch.start(
            Peer::A,
            &ns,
            Some(&format!("{SHARD_LABEL}={i}")),
            &format!("shard{count}-{i}"),
        )?);
    }
    let standins = servers(client, &ns, args, count, false, |i| {
        Some(json!({SHARD_LABEL: i.to_string()}))
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let idle: Vec<f64> = running.iter().map(|r| r.rss_mib().0).collect();
    let ready = ReadyWatch::start(client, &ns);
    let t0 = Instant::now();
    create_all(client, &ns, args, count, Some(count)).await?;
    let converged = loop {
        let (t, s) = ready.counts();
        if t >= args.objects && s >= args.objects {
            break true;
        }
        if t0.elapsed() > Duration::from_secs(args.timeout_secs) {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let total_ms = ms(t0.elapsed());
    tokio::time::sleep(Duration::from_secs(10)).await;
    let rss: Vec<f64> = running.iter().map(|r| r.rss_mib().0).collect();
    for r in running {
        r.kill();
    }
    for s in standins {
        s.shutdown().await;
    }
    super::namespace::remove(client, &ns, args.create_concurrency).await;
    Ok(
        json!({"shards": count, "converged": converged, "all_ready_ms": total_ms,
              "idle_rss_mib": idle, "rss_mib": rss,
              "rss_max_mib": rss.iter().copied().fold(0.0, f64::max)}),
    )
}
