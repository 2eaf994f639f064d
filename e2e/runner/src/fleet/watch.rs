//! Watching while something happens, rather than looking before and after: every TerdutServer,
//! TerdutTeam and TerdutAlertSource that leaves Ready, even for a moment ([`ReadyWatch`], kube
//! watches, so no transition falls between two polls), and every change of the operator's
//! Lease holder ([`LeaseWatch`]).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt as _};
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutServer, TerdutTeam};

use crate::cluster::helm::NAMESPACE;

/// One object seen not Ready.
#[derive(Debug, Clone)]
pub struct Unready {
    pub at: Duration,
    pub object: String,
    /// `Ready=<status> <reason>`, or "no Ready condition".
    pub why: String,
}

/// Every moment an operator object was not Ready, from [`ReadyWatch::start`] on.
#[derive(Debug)]
pub struct ReadyWatch {
    seen: Arc<Mutex<Vec<Unready>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

fn ready_of(cs: &[Condition]) -> Result<(), String> {
    match cs.iter().find(|c| c.type_ == "Ready") {
        Some(c) if c.status == "True" => Ok(()),
        Some(c) => {
            let message: String = c.message.chars().take(160).collect();
            Err(format!("Ready={} {}: {message}", c.status, c.reason))
        }
        None => Err("no Ready condition".into()),
    }
}

impl ReadyWatch {
    pub fn start(client: &Client) -> Self {
        let seen = Arc::new(Mutex::new(vec![]));
        let started = Instant::now();
        let tasks = vec![
            spawn::<TerdutServer>(client, &seen, started, |o| {
                ready_of(o.status.as_ref().map_or(&[][..], |s| &s.conditions))
            }),
            spawn::<TerdutTeam>(client, &seen, started, |o| {
                ready_of(o.status.as_ref().map_or(&[][..], |s| &s.conditions))
            }),
            spawn::<TerdutAlertSource>(client, &seen, started, |o| {
                ready_of(o.status.as_ref().map_or(&[][..], |s| &s.conditions))
            }),
        ];
        Self { seen, tasks }
    }

    /// Stops watching; what was seen not Ready, in order.
    pub fn finish(self) -> Vec<Unready> {
        for t in &self.tasks {
            t.abort();
        }
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

fn spawn<K>(
    client: &Client,
    seen: &Arc<Mutex<Vec<Unready>>>,
    started: Instant,
    ready: fn(&K) -> Result<(), String>,
) -> tokio::task::JoinHandle<()>
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let api = Api::<K>::all(client.clone());
    let seen = seen.clone();
    tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher(api, watcher::Config::default()));
        while let Some(event) = events.next().await {
            let obj = match event {
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => o,
                Ok(_) => continue,
                Err(_) => {
                    // A watch error is not a transition; the watcher reconnects on its own.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            if obj.meta().deletion_timestamp.is_some() {
                continue;
            }
            if let Err(why) = ready(&obj) {
                let object = format!(
                    "{} {}/{}",
                    K::kind(&()),
                    obj.namespace().unwrap_or_default(),
                    obj.name_any()
                );
                if let Ok(mut s) = seen.lock() {
                    s.push(Unready {
                        at: started.elapsed(),
                        object,
                        why,
                    });
                }
            }
        }
    })
}

/// The Lease's holder over time, polled every 200 ms.
#[derive(Debug)]
pub struct LeaseWatch {
    changes: Arc<Mutex<Vec<(Duration, String)>>>,
    task: tokio::task::JoinHandle<()>,
}

/// The chart's `leaderElection.leaseName`.
pub const LEASE: &str = "terdut-operator";

impl LeaseWatch {
    pub fn start(client: &Client) -> Self {
        let api = Api::<Lease>::namespaced(client.clone(), NAMESPACE);
        let changes = Arc::new(Mutex::new(Vec::<(Duration, String)>::new()));
        let sink = changes.clone();
        let started = Instant::now();
        let task = tokio::spawn(async move {
            loop {
                if let Ok(lease) = api.get(LEASE).await {
                    let holder = lease
                        .spec
                        .and_then(|s| s.holder_identity)
                        .unwrap_or_default();
                    if let Ok(mut c) = sink.lock()
                        && c.last().is_none_or(|(_, h)| *h != holder)
                    {
                        c.push((started.elapsed(), holder));
                    }
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        Self { changes, task }
    }

    /// Stops polling; the holders in order, with when each was first seen ("" = released).
    pub fn finish(self) -> Vec<(Duration, String)> {
        self.task.abort();
        self.changes.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

/// `spec.leaseTransitions` of the operator's Lease: the elector adds one whenever another
/// identity takes it (a replica re-taking its own Lease after a restart adds none).
pub async fn lease_transitions(client: &Client) -> anyhow::Result<i32> {
    Ok(Api::<Lease>::namespaced(client.clone(), NAMESPACE)
        .get(LEASE)
        .await?
        .spec
        .and_then(|s| s.lease_transitions)
        .unwrap_or(0))
}

/// How many distinct leaders follow the first in `changes` (released moments not counted).
pub fn handovers(changes: &[(Duration, String)]) -> usize {
    let holders: Vec<&str> = changes
        .iter()
        .map(|(_, h)| h.as_str())
        .filter(|h| !h.is_empty())
        .collect();
    holders.windows(2).filter(|w| w[0] != w[1]).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_between_two_holders_is_one_handover() {
        let c = |v: &[&str]| -> Vec<(Duration, String)> {
            v.iter()
                .map(|h| (Duration::ZERO, (*h).to_owned()))
                .collect()
        };
        assert_eq!(handovers(&c(&["a"])), 0);
        assert_eq!(handovers(&c(&["a", "", "b"])), 1);
        assert_eq!(handovers(&c(&["a", "", "a"])), 0);
        assert_eq!(handovers(&c(&["a", "b", "", "c"])), 2);
    }

    #[test]
    fn ready_needs_a_true_ready_condition() {
        let cond = |s: &str| -> Condition {
            serde_json::from_value(serde_json::json!({
                "type": "Ready", "status": s, "reason": "R", "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }))
            .unwrap()
        };
        assert!(ready_of(&[cond("True")]).is_ok());
        assert_eq!(ready_of(&[cond("False")]).unwrap_err(), "Ready=False R: ");
        assert!(ready_of(&[]).is_err());
    }
}
