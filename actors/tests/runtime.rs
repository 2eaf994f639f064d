//! The operator-process runtime against a real kube-apiserver: leader election on a Lease
//! (failover after a release, a crash and a network partition, never two leaders), Events
//! published and read back, and the SIGTERM shutdown token.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use k8s_openapi::api::events::v1::Event as K8sEvent;
use kube::api::{ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Resource as _};
use terdut_actors::runtime::events::{EventPublisher, EventType, REDACTED_NOTE};
use terdut_actors::runtime::leader::{LeaderElector, LeaseTimings};
use terdut_actors::runtime::shutdown;
use terdut_testenv::ControlPlane;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, timeout};
use tokio_util::sync::CancellationToken;

const LEASE: &str = "terdut-operator-leader";

/// Short timings so failover is measured in seconds: a 2 s lease renewed every 500 ms, given
/// up 1.5 s after the last good renew, polled every 200 ms by the standby.
fn timings() -> LeaseTimings {
    LeaseTimings {
        lease_duration: Duration::from_secs(2),
        renew_interval: Duration::from_millis(500),
        renew_deadline: Duration::from_millis(1500),
        retry_interval: Duration::from_millis(200),
    }
}

struct Candidate {
    flag: watch::Receiver<bool>,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Candidate {
    fn start(client: Client, ns: &str, identity: &str) -> Self {
        let (tx, flag) = watch::channel(false);
        let stop = CancellationToken::new();
        let elector = LeaderElector::new(client, ns, LEASE, identity, timings());
        let task = tokio::spawn(elector.run(tx, stop.clone()));
        Self { flag, stop, task }
    }

    fn leads(&self) -> bool {
        *self.flag.borrow()
    }
}

/// Samples both flags every 2 ms until stopped and counts samples where both lead.
struct OverlapMonitor {
    both: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl OverlapMonitor {
    fn start(a: watch::Receiver<bool>, b: watch::Receiver<bool>) -> Self {
        let both = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (n, s) = (both.clone(), stop.clone());
        let task = tokio::spawn(async move {
            while !s.load(Ordering::Relaxed) {
                if *a.borrow() && *b.borrow() {
                    n.fetch_add(1, Ordering::Relaxed);
                }
                sleep(Duration::from_millis(2)).await;
            }
        });
        Self { both, stop, task }
    }

    async fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.expect("monitor");
        self.both.load(Ordering::Relaxed)
    }
}

async fn wait_until(what: &str, limit: Duration, f: impl Fn() -> bool) -> anyhow::Result<Duration> {
    let start = Instant::now();
    while !f() {
        anyhow::ensure!(start.elapsed() < limit, "{what}: not within {limit:?}");
        sleep(Duration::from_millis(5)).await;
    }
    Ok(start.elapsed())
}

async fn holder(client: &Client, ns: &str) -> anyhow::Result<Lease> {
    Ok(Api::<Lease>::namespaced(client.clone(), ns)
        .get(LEASE)
        .await?)
}

/// Starts two candidates and returns them as (leader, standby) once one leads.
async fn elect(a: Candidate, b: Candidate) -> anyhow::Result<(Candidate, Candidate)> {
    wait_until("a leader", Duration::from_secs(10), || {
        a.leads() || b.leads()
    })
    .await?;
    Ok(if a.leads() { (a, b) } else { (b, a) })
}

#[tokio::test]
async fn exactly_one_leads_and_a_released_lease_fails_over_at_once() -> anyhow::Result<()> {
    let cp = ControlPlane::shared().await?;
    let client = cp.client().await?;
    let ns = cp.namespace(&client, "leader").await?;
    let a = Candidate::start(client.clone(), &ns, "replica-a");
    let b = Candidate::start(client.clone(), &ns, "replica-b");
    let monitor = OverlapMonitor::start(a.flag.clone(), b.flag.clone());
    let (leader, standby) = elect(a, b).await?;

    // Several renew rounds: the leader keeps it, the standby stays out.
    sleep(Duration::from_secs(3)).await;
    assert!(leader.leads() && !standby.leads());
    let before = holder(&client, &ns).await?.spec.context("spec")?;

    leader.stop.cancel();
    let failover = wait_until("standby takes over", Duration::from_secs(3), || {
        standby.leads()
    })
    .await?;
    eprintln!("voluntary step-down failover: {failover:?}");
    assert!(failover < Duration::from_millis(1500), "{failover:?}");
    timeout(Duration::from_secs(5), leader.task).await??;
    assert!(!*leader.flag.borrow(), "a stopped candidate reports false");

    let after = holder(&client, &ns).await?.spec.context("spec")?;
    assert_ne!(after.holder_identity, before.holder_identity);
    assert_eq!(
        after.lease_transitions,
        before.lease_transitions.map(|t| t + 1)
    );
    assert_eq!(after.lease_duration_seconds, Some(2));

    standby.stop.cancel();
    timeout(Duration::from_secs(5), standby.task).await??;
    assert_eq!(monitor.finish().await, 0, "two leaders at once");
    let released = holder(&client, &ns).await?.spec.context("spec")?;
    assert_eq!(
        released.holder_identity, None,
        "the last leader released too"
    );
    Ok(())
}

#[tokio::test]
async fn a_killed_leader_is_replaced_once_its_lease_expires() -> anyhow::Result<()> {
    let cp = ControlPlane::shared().await?;
    let client = cp.client().await?;
    let ns = cp.namespace(&client, "leader").await?;
    let a = Candidate::start(client.clone(), &ns, "replica-a");
    let b = Candidate::start(client.clone(), &ns, "replica-b");
    let monitor = OverlapMonitor::start(a.flag.clone(), b.flag.clone());
    let (leader, standby) = elect(a, b).await?;
    sleep(Duration::from_secs(1)).await;

    // A crash: the task dies without releasing. Its stale `true` is not sampled any more.
    assert_eq!(monitor.finish().await, 0, "two leaders at once");
    leader.task.abort();
    let failover = wait_until("standby takes over", Duration::from_secs(6), || {
        standby.leads()
    })
    .await?;
    eprintln!("crash failover (2 s lease, 500 ms renew): {failover:?}");
    // The standby must wait out the lease from its last observed renew.
    assert!(failover >= Duration::from_millis(1400), "{failover:?}");
    assert!(failover < Duration::from_secs(4), "{failover:?}");

    standby.stop.cancel();
    timeout(Duration::from_secs(5), standby.task).await??;
    Ok(())
}

/// A TCP relay to the apiserver whose `cut` drops every connection and refuses new ones:
/// a leader behind it is partitioned while its process keeps running.
async fn relay(upstream: SocketAddr) -> anyhow::Result<(SocketAddr, CancellationToken)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let cut = CancellationToken::new();
    let c = cut.clone();
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                () = c.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            let Ok((mut down, _)) = accepted else {
                continue;
            };
            let c = c.clone();
            tokio::spawn(async move {
                let Ok(mut up) = TcpStream::connect(upstream).await else {
                    return;
                };
                tokio::select! {
                    () = c.cancelled() => {}
                    _ = tokio::io::copy_bidirectional(&mut down, &mut up) => {}
                }
            });
        }
    });
    Ok((addr, cut))
}

async fn client_via(cp: &ControlPlane, addr: SocketAddr) -> anyhow::Result<Client> {
    let kc = Kubeconfig::read_from(cp.kubeconfig())?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    // The harness kubeconfig skips TLS verification, so the relay's port does not matter.
    config.cluster_url = format!("https://{addr}").parse()?;
    Ok(Client::try_from(config)?)
}

#[tokio::test]
async fn a_partitioned_leader_steps_down_before_the_standby_takes_over() -> anyhow::Result<()> {
    let cp = ControlPlane::shared().await?;
    let client = cp.client().await?;
    let ns = cp.namespace(&client, "leader").await?;
    let upstream: SocketAddr = cp.server.trim_start_matches("https://").parse()?;
    let (addr, cut) = relay(upstream).await?;

    // `a` starts alone behind the relay so it is the one that leads.
    let a = Candidate::start(client_via(cp, addr).await?, &ns, "replica-a");
    wait_until("a leads", Duration::from_secs(10), || a.leads()).await?;
    let b = Candidate::start(client.clone(), &ns, "replica-b");
    let monitor = OverlapMonitor::start(a.flag.clone(), b.flag.clone());
    sleep(Duration::from_secs(2)).await;
    assert!(a.leads() && !b.leads());

    cut.cancel();
    let cut_at = Instant::now();
    let step_down = wait_until("a steps down", Duration::from_secs(4), || !a.leads()).await?;
    wait_until("b takes over", Duration::from_secs(6), || b.leads()).await?;
    let takeover = cut_at.elapsed();
    eprintln!("partition: leader stepped down after {step_down:?}, standby led after {takeover:?}");
    // Step-down comes within the renew deadline (1.5 s after the last good renew).
    assert!(step_down <= Duration::from_millis(1700), "{step_down:?}");
    assert_eq!(monitor.finish().await, 0, "two leaders at once");

    for c in [a, b] {
        c.stop.cancel();
        timeout(Duration::from_secs(5), c.task).await??;
    }
    Ok(())
}

/// A fresh namespace with a ConfigMap in it for Events to be about.
async fn event_target(name: &str) -> anyhow::Result<(Client, String, ObjectReference)> {
    let cp = ControlPlane::shared().await?;
    let client = cp.client().await?;
    let ns = cp.namespace(&client, name).await?;
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("target".into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    let cm = Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &cm)
        .await?;
    Ok((client, ns, cm.object_ref(&())))
}

#[tokio::test]
async fn events_are_published_read_back_and_secrets_never_leave() -> anyhow::Result<()> {
    let (client, ns, regarding) = event_target("events").await?;
    let events = EventPublisher::new(client.clone(), "terdut.io/operator", "operator-0");

    events
        .publish(
            &regarding,
            EventType::Normal,
            "KeyCreated",
            "Create",
            "created Secret x".into(),
        )
        .await;
    let leaked = format!("key is tdsa_{}", "0f".repeat(24));
    events
        .publish(&regarding, EventType::Warning, "Leaky", "Create", leaked)
        .await;
    assert_eq!(events.failures(), 0);

    let list = Api::<K8sEvent>::namespaced(client.clone(), &ns)
        .list(&Default::default())
        .await?;
    let find = |reason: &str| {
        list.items
            .iter()
            .find(|e| e.reason.as_deref() == Some(reason))
            .cloned()
            .with_context(|| format!("no {reason} event in {list:?}"))
    };
    let created = find("KeyCreated")?;
    assert_eq!(created.note.as_deref(), Some("created Secret x"));
    assert_eq!(created.type_.as_deref(), Some("Normal"));
    assert_eq!(created.action.as_deref(), Some("Create"));
    assert_eq!(
        created.reporting_controller.as_deref(),
        Some("terdut.io/operator")
    );
    assert_eq!(created.reporting_instance.as_deref(), Some("operator-0"));
    let about = created.regarding.context("regarding")?;
    assert_eq!(
        (about.kind.as_deref(), about.name.as_deref()),
        (Some("ConfigMap"), Some("target"))
    );
    let leaky = find("Leaky")?;
    assert_eq!(leaky.note.as_deref(), Some(REDACTED_NOTE));
    assert_eq!(leaky.type_.as_deref(), Some("Warning"));

    // A rejected Event is counted, not returned.
    let mut nowhere = regarding.clone();
    nowhere.namespace = Some("no-such-namespace".into());
    events
        .publish(&nowhere, EventType::Normal, "Lost", "Create", "n".into())
        .await;
    assert_eq!(events.failures(), 1);
    Ok(())
}

/// Repeats fold into one Event's series (what `kubectl describe` shows as "x3 over 2s"),
/// another reason is another Event, and a repeat whose Event was deleted starts a new one.
#[tokio::test]
async fn repeats_fold_into_one_event_series() -> anyhow::Result<()> {
    let (client, ns, regarding) = event_target("event-series").await?;
    let events = EventPublisher::new(client.clone(), "terdut.io/operator", "operator-0");
    let api = Api::<K8sEvent>::namespaced(client.clone(), &ns);
    let warn = |note: &str| {
        events.publish(
            &regarding,
            EventType::Warning,
            "UnknownUser",
            "Reconcile",
            note.to_owned(),
        )
    };
    let of_reason = |list: &[K8sEvent], reason: &str| -> Vec<K8sEvent> {
        list.iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .cloned()
            .collect()
    };

    warn("user alice is not known").await;
    warn("user alice is not known").await;
    warn("user bob is not known").await;
    events
        .publish(
            &regarding,
            EventType::Normal,
            "TeamCreated",
            "Create",
            "ok".into(),
        )
        .await;
    assert_eq!(events.failures(), 0);
    let list = api.list(&Default::default()).await?.items;
    let unknown = of_reason(&list, "UnknownUser");
    assert_eq!(unknown.len(), 1, "three repeats are one Event: {unknown:?}");
    let series = unknown[0].series.as_ref().context("a series")?;
    assert_eq!(series.count, 3);
    assert_eq!(
        unknown[0].note.as_deref(),
        Some("user alice is not known"),
        "the note stays the first one's"
    );
    assert_eq!(of_reason(&list, "TeamCreated").len(), 1);
    assert!(of_reason(&list, "TeamCreated")[0].series.is_none());

    // Someone (or the apiserver's event TTL) removed it: the next repeat is a new Event.
    let name = unknown[0].metadata.name.clone().context("name")?;
    api.delete(&name, &Default::default()).await?;
    warn("user carol is not known").await;
    assert_eq!(events.failures(), 0, "a vanished Event is not a failure");
    let list = api.list(&Default::default()).await?.items;
    let unknown = of_reason(&list, "UnknownUser");
    assert_eq!(unknown.len(), 1, "{unknown:?}");
    assert_ne!(unknown[0].metadata.name.as_deref(), Some(name.as_str()));
    assert_eq!(unknown[0].note.as_deref(), Some("user carol is not known"));
    assert!(unknown[0].series.is_none());
    Ok(())
}

#[tokio::test]
async fn sigterm_cancels_the_shutdown_token() -> anyhow::Result<()> {
    let token = shutdown::on_signal();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()?;
    anyhow::ensure!(status.success(), "kill failed");
    timeout(Duration::from_secs(5), token.cancelled()).await?;
    Ok(())
}
