//! No key leaked (docs/reliability.md promise 4): none of the webhook keys read during a run,
//! nor the operator key, appears in any operator log line (every container of every operator
//! pod, kept as the kubelet wrote them: [`LogKeeper`]), any Event or any status of the
//! operator's objects.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Secret};
use kube::Api;
use kube::api::ListParams;
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutServer, TerdutTeam};

use super::invariants::Verdict;
use crate::examples;
use crate::run::Run;

/// Every secret a run has seen, by what it is (never printed).
#[derive(Debug, Default)]
pub struct Needles {
    keys: BTreeSet<String>,
}

impl Needles {
    pub fn add(&mut self, secrets: impl IntoIterator<Item = String>) {
        self.keys
            .extend(secrets.into_iter().filter(|k| k.len() >= 16));
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// The operator key of the example server, from its Secret.
    pub async fn add_operator_key(&mut self, run: &Run) -> anyhow::Result<()> {
        let secret = Api::<Secret>::namespaced(run.client.clone(), examples::SERVER_NS)
            .get_opt(&examples::operator_key_secret())
            .await?;
        let data = secret.and_then(|s| s.data).unwrap_or_default();
        self.add(
            data.values()
                .map(|v| String::from_utf8_lossy(&v.0).into_owned()),
        );
        Ok(())
    }

    /// How many needles occur in `text`.
    fn hits(&self, text: &str) -> usize {
        self.keys
            .iter()
            .filter(|k| text.contains(k.as_str()))
            .count()
    }
}

/// Copies the operator pods' log files from the node's pod log folder as they grow, every
/// 250 ms, so that the lines of a container that is deleted with its pod (the kubelet removes
/// its logs) are still there to be searched.
#[derive(Debug)]
pub struct LogKeeper {
    into: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LogKeeper {
    /// Keeps every file under `pod_logs/<prefix>*` in `into`.
    pub fn start(pod_logs: &Path, prefix: &str, into: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(into)?;
        let stop = Arc::new(AtomicBool::new(false));
        let (from, to, pre, flag) = (
            pod_logs.to_path_buf(),
            into.to_path_buf(),
            prefix.to_owned(),
            stop.clone(),
        );
        let thread = std::thread::spawn(move || {
            let mut sizes: BTreeMap<PathBuf, u64> = BTreeMap::new();
            while !flag.load(Ordering::Relaxed) {
                copy_grown(&from, &pre, &to, &mut sizes);
                std::thread::sleep(Duration::from_millis(250));
            }
            copy_grown(&from, &pre, &to, &mut sizes);
        });
        Ok(Self {
            into: into.to_path_buf(),
            stop,
            thread: Some(thread),
        })
    }

    /// Stops copying (after one last round) and returns every kept file's text.
    pub fn finish(&mut self) -> Vec<(PathBuf, String)> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let mut out = vec![];
        if let Ok(entries) = std::fs::read_dir(&self.into) {
            for e in entries.filter_map(Result::ok) {
                if let Ok(text) = std::fs::read_to_string(e.path()) {
                    out.push((e.path(), text));
                }
            }
        }
        out.sort();
        out
    }
}

impl Drop for LogKeeper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// `<ns>_<pod>_<uid>/<container>/<n>.log` -> `<ns>_<pod>_<uid>_<container>_<n>.log`, copied
/// when it grew.
fn copy_grown(from: &Path, prefix: &str, to: &Path, sizes: &mut BTreeMap<PathBuf, u64>) {
    let Ok(pods) = std::fs::read_dir(from) else {
        return;
    };
    for pod in pods.filter_map(Result::ok) {
        let pod_name = pod.file_name().to_string_lossy().into_owned();
        if !pod_name.starts_with(prefix) {
            continue;
        }
        let Ok(containers) = std::fs::read_dir(pod.path()) else {
            continue;
        };
        for c in containers.filter_map(Result::ok) {
            let Ok(files) = std::fs::read_dir(c.path()) else {
                continue;
            };
            for f in files.filter_map(Result::ok) {
                let path = f.path();
                let Ok(len) = f.metadata().map(|m| m.len()) else {
                    continue;
                };
                if sizes.get(&path).is_some_and(|&was| was >= len) {
                    continue;
                }
                let name = format!(
                    "{pod_name}_{}_{}",
                    c.file_name().to_string_lossy(),
                    f.file_name().to_string_lossy()
                );
                if std::fs::copy(&path, to.join(name)).is_ok() {
                    sizes.insert(path, len);
                }
            }
        }
    }
}

/// The verdicts: no needle in the kept operator logs, in any Event, in any status.
pub async fn check(run: &Run, needles: &Needles, logs: &[(PathBuf, String)]) -> Vec<Verdict> {
    let lines: usize = logs.iter().map(|(_, t)| t.lines().count()).sum();
    let in_logs: Vec<String> = logs
        .iter()
        .filter(|(_, t)| needles.hits(t) > 0)
        .map(|(p, t)| format!("{} ({} keys)", p.display(), needles.hits(t)))
        .collect();
    let mut out = vec![Verdict {
        name: "no webhook key or operator key in any operator log",
        ok: in_logs.is_empty() && lines > 0,
        detail: if lines == 0 {
            "no operator log lines were kept: the check saw nothing".to_owned()
        } else {
            format!("{in_logs:?}")
        },
    }];
    let events = Api::<Event>::all(run.client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| serde_json::to_string(&l.items).unwrap_or_default());
    out.push(text_verdict(
        "no key in any Event",
        needles,
        events.map_err(Into::into),
    ));
    let statuses = statuses(run).await;
    out.push(text_verdict("no key in any status", needles, statuses));
    crate::checks::log(&format!(
        "searched {lines} operator log lines in {} files, the Events and the statuses for {} keys",
        logs.len(),
        needles.len()
    ));
    out
}

fn text_verdict(name: &'static str, needles: &Needles, text: anyhow::Result<String>) -> Verdict {
    match text {
        Ok(t) => Verdict {
            name,
            ok: needles.hits(&t) == 0 && !t.is_empty(),
            detail: format!("{} keys found", needles.hits(&t)),
        },
        Err(e) => Verdict {
            name,
            ok: false,
            detail: format!("could not read: {e:#}"),
        },
    }
}

async fn statuses(run: &Run) -> anyhow::Result<String> {
    let lp = ListParams::default();
    let c = &run.client;
    let servers = Api::<TerdutServer>::all(c.clone()).list(&lp).await?;
    let teams = Api::<TerdutTeam>::all(c.clone()).list(&lp).await?;
    let sources = Api::<TerdutAlertSource>::all(c.clone()).list(&lp).await?;
    let mut all: Vec<serde_json::Value> = vec![];
    all.extend(servers.items.iter().map(|o| serde_json::json!(o.status)));
    all.extend(teams.items.iter().map(|o| serde_json::json!(o.status)));
    all.extend(sources.items.iter().map(|o| serde_json::json!(o.status)));
    Ok(serde_json::to_string(&all)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_values_are_no_needles_and_hits_count_needles() {
        let mut n = Needles::default();
        n.add(["tdik_0123456789abcdef".to_owned(), "ok".to_owned()]);
        assert_eq!(n.len(), 1);
        assert_eq!(n.hits("x tdik_0123456789abcdef y"), 1);
        assert_eq!(n.hits("tdik_0123456789abcde"), 0);
    }

    #[test]
    fn the_keeper_copies_what_grew_and_keeps_what_was_deleted() {
        let tmp = tempfile::tempdir().unwrap();
        let (logs, kept) = (tmp.path().join("logs"), tmp.path().join("kept"));
        let dir = logs.join("terdut-system_op-1_uid/operator");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(logs.join("other_x_uid/c")).unwrap();
        std::fs::write(dir.join("0.log"), "line 1\n").unwrap();
        std::fs::write(logs.join("other_x_uid/c/0.log"), "not ours\n").unwrap();
        let mut sizes = BTreeMap::new();
        std::fs::create_dir_all(&kept).unwrap();
        copy_grown(&logs, "terdut-system_", &kept, &mut sizes);
        std::fs::write(dir.join("0.log"), "line 1\nline 2\n").unwrap();
        copy_grown(&logs, "terdut-system_", &kept, &mut sizes);
        std::fs::remove_dir_all(logs.join("terdut-system_op-1_uid")).unwrap();
        copy_grown(&logs, "terdut-system_", &kept, &mut sizes);
        let files: Vec<_> = std::fs::read_dir(&kept).unwrap().collect();
        assert_eq!(files.len(), 1);
        let text =
            std::fs::read_to_string(kept.join("terdut-system_op-1_uid_operator_0.log")).unwrap();
        assert_eq!(text, "line 1\nline 2\n");
    }
}
