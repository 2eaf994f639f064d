//! The example server through an upgrade: its Deployment's pod template and ReplicaSets
//! before and after, every server pod seen in between (polled every 500 ms), and the calls
//! each pod's stand-in counted (`GET /admin/calls`, per pod by its address: a rolled pod's
//! count is read while it lives).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, Client};
use terdut_standin::AdminClient;
use terdut_standin::admin::CallCounts;

use crate::examples::{SERVER, SERVER_NS, SERVER_PORT};
use crate::fleet::pods::server_selector;

/// The server's Deployment as it was at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub template: serde_json::Value,
    pub revision: String,
    pub replicasets: BTreeSet<String>,
    pub pods: BTreeSet<String>,
}

pub async fn snapshot(client: &Client) -> anyhow::Result<Snapshot> {
    let dep = Api::<Deployment>::namespaced(client.clone(), SERVER_NS)
        .get(SERVER)
        .await?;
    let revision = dep
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("deployment.kubernetes.io/revision").cloned())
        .unwrap_or_default();
    let template = serde_json::to_value(&dep.spec.template)?;
    let lp = ListParams::default().labels(&server_selector());
    let replicasets = Api::<ReplicaSet>::namespaced(client.clone(), SERVER_NS)
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter_map(|r| r.metadata.name)
        .collect();
    let pods = live_pods(client).await?.into_keys().collect();
    Ok(Snapshot {
        template,
        revision,
        replicasets,
        pods,
    })
}

/// uid -> IP of the server's pods that are not terminating.
async fn live_pods(client: &Client) -> anyhow::Result<BTreeMap<String, Option<String>>> {
    let pods = Api::<Pod>::namespaced(client.clone(), SERVER_NS)
        .list(&ListParams::default().labels(&server_selector()))
        .await?;
    Ok(pods
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| Some((p.metadata.uid?, p.status.and_then(|s| s.pod_ip))))
        .collect())
}

fn admin_at(ip: &str) -> AdminClient {
    AdminClient::new(format!("http://{ip}:{SERVER_PORT}"), None)
}

/// Zeroes every live server pod's call counts.
pub async fn reset_calls(client: &Client) -> anyhow::Result<()> {
    for ip in live_pods(client).await?.into_values().flatten() {
        admin_at(&ip).reset_calls().await?;
    }
    Ok(())
}

/// Server pods and their calls, polled.
#[derive(Debug)]
pub struct ServerWatch {
    seen: Arc<Mutex<BTreeMap<String, CallCounts>>>,
    task: tokio::task::JoinHandle<()>,
}

impl ServerWatch {
    pub fn start(client: &Client) -> Self {
        let seen = Arc::new(Mutex::new(BTreeMap::<String, CallCounts>::new()));
        let (sink, client) = (seen.clone(), client.clone());
        let task = tokio::spawn(async move {
            loop {
                if let Ok(pods) = live_pods(&client).await {
                    for (uid, ip) in pods {
                        let calls = match ip {
                            Some(ip) => admin_at(&ip).calls().await.ok(),
                            None => None,
                        };
                        if let Ok(mut s) = sink.lock() {
                            let entry = s.entry(uid).or_default();
                            if let Some(c) = calls {
                                *entry = c;
                            }
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
        Self { seen, task }
    }

    /// One last poll, then: pod uid -> its calls, for every server pod seen.
    pub async fn finish(self, client: &Client) -> BTreeMap<String, CallCounts> {
        tokio::time::sleep(Duration::from_millis(600)).await;
        self.task.abort();
        let mut seen = self.seen.lock().map(|s| s.clone()).unwrap_or_default();
        if let Ok(pods) = live_pods(client).await {
            for (uid, ip) in pods {
                if let Some(c) = match ip {
                    Some(ip) => admin_at(&ip).calls().await.ok(),
                    None => None,
                } {
                    seen.insert(uid, c);
                }
            }
        }
        seen
    }
}

/// The writes among `calls`, by endpoint (`CallCounts::writes` is their sum).
pub fn writes(calls: &BTreeMap<String, CallCounts>) -> (u64, Vec<String>) {
    let total = calls.values().map(CallCounts::writes).sum();
    let mut which: BTreeMap<&str, u64> = BTreeMap::new();
    for c in calls.values() {
        for (label, n) in &c.0 {
            let one = CallCounts(BTreeMap::from([(label.clone(), *n)]));
            if one.writes() > 0 {
                *which.entry(label.as_str()).or_default() += n;
            }
        }
    }
    let which = which
        .into_iter()
        .map(|(l, n)| format!("{l} x{n}"))
        .collect();
    (total, which)
}

/// What rolling the server's pods means for a step: with an unchanged template, no pod
/// replaced and no ReplicaSet made; with a changed one, exactly one new ReplicaSet (one
/// revision) and the pods replaced once: every pod seen is one of before or one of after.
pub fn roll_verdict(
    before: &Snapshot,
    after: &Snapshot,
    seen: &BTreeSet<String>,
) -> (bool, String) {
    let new_sets: Vec<&String> = after.replicasets.difference(&before.replicasets).collect();
    let new_pods: BTreeSet<&String> = seen.difference(&before.pods).collect();
    let strays: Vec<&&String> = new_pods
        .iter()
        .filter(|p| !after.pods.contains(**p))
        .collect();
    if before.template == after.template {
        let ok = new_sets.is_empty() && new_pods.is_empty() && before.pods == after.pods;
        (
            ok,
            format!(
                "template unchanged; {} new ReplicaSet(s), {} new pod(s)",
                new_sets.len(),
                new_pods.len()
            ),
        )
    } else {
        let replaced = after.pods.is_disjoint(&before.pods);
        let ok = new_sets.len() == 1 && strays.is_empty() && replaced;
        (
            ok,
            format!(
                "template changed (revision {} -> {}): {} new ReplicaSet(s), {} new pod(s) of which {} did not last, old pods all replaced: {replaced}",
                before.revision,
                after.revision,
                new_sets.len(),
                new_pods.len(),
                strays.len()
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(template: i64, sets: &[&str], pods: &[&str]) -> Snapshot {
        Snapshot {
            template: serde_json::json!({"t": template}),
            revision: template.to_string(),
            replicasets: sets.iter().map(|s| (*s).to_owned()).collect(),
            pods: pods.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    fn set(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn an_unchanged_template_allows_no_new_pod() {
        let b = snap(1, &["rs1"], &["p1"]);
        assert!(roll_verdict(&b, &b.clone(), &set(&["p1"])).0);
        let (ok, why) = roll_verdict(&b, &snap(1, &["rs1"], &["p2"]), &set(&["p1", "p2"]));
        assert!(!ok && why.contains("1 new pod"));
    }

    #[test]
    fn a_changed_template_rolls_exactly_once() {
        let b = snap(1, &["rs1"], &["p1"]);
        let a = snap(2, &["rs1", "rs2"], &["p2"]);
        assert!(roll_verdict(&b, &a, &set(&["p1", "p2"])).0);
        // A pod of an intermediate roll that did not last: rolled twice.
        assert!(!roll_verdict(&b, &a, &set(&["p1", "p2", "p9"])).0);
        let twice = snap(3, &["rs1", "rs2", "rs3"], &["p3"]);
        assert!(!roll_verdict(&b, &twice, &set(&["p1", "p3"])).0);
    }

    #[test]
    fn writes_name_their_endpoints() {
        let calls = BTreeMap::from([(
            "uid".to_owned(),
            CallCounts(BTreeMap::from([
                ("GET /api/v1/teams/{id}".to_owned(), 4),
                ("PUT /api/v1/teams/{id}/ladder".to_owned(), 2),
            ])),
        )]);
        let (n, which) = writes(&calls);
        assert_eq!(n, 2);
        assert_eq!(which, ["PUT /api/v1/teams/{id}/ladder x2"]);
    }
}
