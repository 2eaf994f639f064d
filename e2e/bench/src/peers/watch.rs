//! The bench's own watches of a namespace's teams and sources: when each was first seen Ready,
//! for teams the generation their Ready condition speaks for (edit → Ready), and which objects
//! left Ready after having been Ready (what a user sees flap, e.g. during a failover).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use terdut_crds::v1alpha1::conditions::{READY, find};
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutTeam};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

#[derive(Default)]
struct Seen {
    /// First instant each object was seen Ready (name → instant), per kind.
    teams: HashMap<String, Instant>,
    sources: HashMap<String, Instant>,
    /// A team's newest observed generation with Ready=True.
    team_ready_generation: HashMap<String, i64>,
    /// Whether each object is Ready now, per kind.
    teams_now: HashMap<String, bool>,
    sources_now: HashMap<String, bool>,
    /// Objects that went from Ready to not Ready since the last [`ReadyWatch::take_left`], with
    /// the reason they left with (the first one).
    teams_left: HashMap<String, String>,
    sources_left: HashMap<String, String>,
}

/// What left Ready since the last [`ReadyWatch::take_left`]: counts, and the reasons of Ready
/// they left with (kind/reason → objects), so a flap says why.
#[derive(Debug, Default, serde::Serialize)]
pub struct Left {
    pub teams: usize,
    pub sources: usize,
    pub reasons: BTreeMap<String, usize>,
    /// One message per kind/reason, as an example of what the user read.
    pub examples: BTreeMap<String, String>,
}

/// Records `ready` as the state of `name`; a Ready → not Ready step puts it into `left`.
fn track(
    now: &mut HashMap<String, bool>,
    left: &mut HashMap<String, String>,
    name: &str,
    ready: bool,
    reason: &str,
) {
    if now.insert(name.to_owned(), ready) == Some(true) && !ready {
        left.entry(name.to_owned())
            .or_insert_with(|| reason.to_owned());
    }
}

/// Ready's status, and its reason and message (tab-separated), as the watch reads them.
fn ready_of(conditions: &[Condition]) -> (bool, String) {
    find(conditions, READY).map_or((false, String::new()), |c| {
        (c.status == "True", format!("{}\t{}", c.reason, c.message))
    })
}

/// The watches; they stop when this is dropped.
pub struct ReadyWatch {
    seen: Arc<Mutex<Seen>>,
    changed: Arc<Notify>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for ReadyWatch {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl ReadyWatch {
    pub fn start(client: &kube::Client, ns: &str) -> Self {
        let seen: Arc<Mutex<Seen>> = Arc::default();
        let changed = Arc::new(Notify::new());
        let teams = {
            let (seen, changed) = (seen.clone(), changed.clone());
            let api: Api<TerdutTeam> = Api::namespaced(client.clone(), ns);
            tokio::spawn(async move {
                let mut s = watcher(api, watcher::Config::default())
                    .default_backoff()
                    .applied_objects()
                    .boxed();
                while let Some(ev) = s.next().await {
                    let Ok(t) = ev else { continue };
                    let st = t.status.as_ref();
                    let (ready, reason) = ready_of(st.map_or(&[][..], |s| &s.conditions));
                    let name = t.metadata.name.clone().unwrap_or_default();
                    if let Ok(mut m) = seen.lock() {
                        let m = &mut *m;
                        track(&mut m.teams_now, &mut m.teams_left, &name, ready, &reason);
                    }
                    if !ready {
                        changed.notify_waiters();
                        continue;
                    }
                    let generation = st.and_then(|s| s.observed_generation).unwrap_or(0);
                    if let Ok(mut m) = seen.lock() {
                        m.teams.entry(name.clone()).or_insert_with(Instant::now);
                        let g = m.team_ready_generation.entry(name).or_insert(0);
                        *g = (*g).max(generation);
                    }
                    changed.notify_waiters();
                }
            })
        };
        let sources = {
            let (seen, changed) = (seen.clone(), changed.clone());
            let api: Api<TerdutAlertSource> = Api::namespaced(client.clone(), ns);
            tokio::spawn(async move {
                let mut s = watcher(api, watcher::Config::default())
                    .default_backoff()
                    .applied_objects()
                    .boxed();
                while let Some(ev) = s.next().await {
                    let Ok(o) = ev else { continue };
                    let (ready, reason) =
                        ready_of(o.status.as_ref().map_or(&[][..], |s| &s.conditions));
                    let name = o.metadata.name.clone().unwrap_or_default();
                    if let Ok(mut m) = seen.lock() {
                        let m = &mut *m;
                        track(
                            &mut m.sources_now,
                            &mut m.sources_left,
                            &name,
                            ready,
                            &reason,
                        );
                        if ready {
                            m.sources.entry(name).or_insert_with(Instant::now);
                        }
                    }
                    changed.notify_waiters();
                }
            })
        };
        Self {
            seen,
            changed,
            tasks: vec![teams, sources],
        }
    }

    /// (teams, sources) seen Ready.
    pub fn counts(&self) -> (usize, usize) {
        self.seen
            .lock()
            .map(|m| (m.teams.len(), m.sources.len()))
            .unwrap_or_default()
    }

    /// What left Ready since the last call, and starts counting again.
    pub fn take_left(&self) -> Left {
        self.seen
            .lock()
            .map(|mut m| {
                let (mut reasons, mut examples) = (BTreeMap::new(), BTreeMap::new());
                for (kind, left) in [("team", &m.teams_left), ("source", &m.sources_left)] {
                    for left_with in left.values() {
                        let (reason, message) = left_with.split_once('\t').unwrap_or_default();
                        let key = format!("{kind}/{reason}");
                        *reasons.entry(key.clone()).or_default() += 1;
                        examples.entry(key).or_insert_with(|| message.to_owned());
                    }
                }
                let out = Left {
                    teams: m.teams_left.len(),
                    sources: m.sources_left.len(),
                    reasons,
                    examples,
                };
                m.teams_left.clear();
                m.sources_left.clear();
                out
            })
            .unwrap_or_default()
    }

    /// The first-Ready instants (teams, sources).
    pub fn instants(&self) -> (HashMap<String, Instant>, HashMap<String, Instant>) {
        self.seen
            .lock()
            .map(|m| (m.teams.clone(), m.sources.clone()))
            .unwrap_or_default()
    }

    /// Waits until team `name` is Ready at generation `generation` or later.
    pub async fn team_ready_at(
        &self,
        name: &str,
        generation: i64,
        timeout: std::time::Duration,
    ) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let notified = self.changed.notified();
            let done = self
                .seen
                .lock()
                .map(|m| m.team_ready_generation.get(name).copied().unwrap_or(0) >= generation)
                .unwrap_or(false);
            if done {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            let _ = tokio::time::timeout(left.min(std::time::Duration::from_millis(50)), notified)
                .await;
        }
    }
}
