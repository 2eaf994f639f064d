//! What `/healthz` answers: the state of every long-lived part of the leader (the root
//! supervisor, the holding host, the routing writer, each watch, the census), as their
//! supervisors (`supervisor/part.rs`) and the stall watchdog (`runtime/watchdog.rs`) record it
//! (docs/adr/0017-liveness.md).
//!
//! A part that is up or restarting with backoff is live: the operator is handling it. A part
//! that failed for good (past its restart limit) or that stalled (alive, yet leaving a
//! message unanswered) is not, and `/healthz` answers 503 naming it. The body names parts,
//! states and counts only, never an error's text: a panic message is in the log, where the
//! operator's other failures are, not on an endpoint anyone on the pod network may read.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

/// How an incarnation of a part ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// It panicked (caught).
    Panicked,
    /// It returned: a part that must run for as long as the operator leads has no business
    /// doing that.
    Returned,
    /// It failed (returned an error, or could not start).
    Failed,
}

impl Ended {
    fn label(self) -> &'static str {
        match self {
            Self::Panicked => "panicked",
            Self::Returned => "ended",
            Self::Failed => "failed",
        }
    }
}

/// The state of one part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartState {
    /// Running (since its last start).
    Up,
    /// Its last incarnation ended; the next starts at `at`.
    Restarting { ended: Ended, at: Instant },
    /// It ended more often than its restart limit allows: dead for good.
    Failed {
        ended: Ended,
        failures_in_window: usize,
    },
    /// The operator stopped it (shutdown, or a lost Lease).
    Stopped,
}

/// One part as `/healthz` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartHealth {
    pub state: PartState,
    /// Times it was started again after an end.
    pub restarts: u64,
    /// How it ended the last time, if it ever did.
    pub last_end: Option<Ended>,
    /// Since when it has left a message unanswered, while the watchdog saw that for at least
    /// its stall limit.
    pub stalled_since: Option<Instant>,
}

/// The verdict of `/healthz`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub live: bool,
    pub body: String,
}

/// The parts of this process and how they are; clones share the table.
#[derive(Clone, Debug)]
pub struct Health {
    parts: Arc<Mutex<BTreeMap<String, PartHealth>>>,
    /// The first part that failed for good, for whoever must end the process.
    dead: Arc<watch::Sender<Option<String>>>,
}

impl Default for Health {
    fn default() -> Self {
        Self {
            parts: Arc::default(),
            dead: Arc::new(watch::channel(None).0),
        }
    }
}

impl Health {
    fn update(&self, part: &str, f: impl FnOnce(&mut PartHealth)) {
        let mut parts = self.parts.lock().unwrap_or_else(|p| p.into_inner());
        let entry = parts.entry(part.to_owned()).or_insert(PartHealth {
            state: PartState::Stopped,
            restarts: 0,
            last_end: None,
            stalled_since: None,
        });
        f(entry);
    }

    /// `part` (re)started.
    pub fn up(&self, part: &str) {
        self.update(part, |p| {
            if matches!(p.state, PartState::Restarting { .. }) {
                p.restarts += 1;
            }
            p.state = PartState::Up;
            p.stalled_since = None;
        });
    }

    /// `part` ended and starts again at `at`.
    pub fn restarting(&self, part: &str, ended: Ended, at: Instant) {
        self.update(part, |p| {
            p.state = PartState::Restarting { ended, at };
            p.last_end = Some(ended);
            p.stalled_since = None;
        });
    }

    /// `part` ended past its restart limit: dead for good.
    pub fn failed(&self, part: &str, ended: Ended, failures_in_window: usize) {
        self.update(part, |p| {
            p.state = PartState::Failed {
                ended,
                failures_in_window,
            };
            p.last_end = Some(ended);
        });
        self.dead.send_if_modified(|dead| {
            let first = dead.is_none();
            if first {
                *dead = Some(format!(
                    "the part {part:?} {} {failures_in_window} times within its restart window",
                    ended.label()
                ));
            }
            first
        });
    }

    /// The operator stopped `part`.
    pub fn stopped(&self, part: &str) {
        self.update(part, |p| {
            p.state = PartState::Stopped;
            p.stalled_since = None;
        });
    }

    /// The watchdog's finding: `part` has left a message unanswered since `since` (`None`:
    /// it answers).
    pub fn stalled(&self, part: &str, since: Option<Instant>) {
        self.update(part, |p| p.stalled_since = since);
    }

    /// The part's state, if it was ever recorded.
    pub fn part(&self, part: &str) -> Option<PartHealth> {
        let parts = self.parts.lock().unwrap_or_else(|p| p.into_inner());
        parts.get(part).copied()
    }

    /// The names of every part.
    pub fn names(&self) -> Vec<String> {
        let parts = self.parts.lock().unwrap_or_else(|p| p.into_inner());
        parts.keys().cloned().collect()
    }

    /// What `/healthz` answers now.
    pub fn report(&self) -> Report {
        let parts = self.parts.lock().unwrap_or_else(|p| p.into_inner()).clone();
        report(&parts, Instant::now())
    }

    /// Resolves, with what failed, once a part failed for good.
    pub async fn dead(&self) -> String {
        let mut rx = self.dead.subscribe();
        match rx.wait_for(Option::is_some).await {
            Ok(dead) => dead.clone().unwrap_or_default(),
            // The sender lives in `self`.
            Err(_) => std::future::pending().await,
        }
    }
}

/// `/healthz` for these parts at `now` (PURE): live unless a part failed for good or stalled.
pub fn report(parts: &BTreeMap<String, PartHealth>, now: Instant) -> Report {
    let mut dead = vec![];
    let mut lines = String::new();
    for (name, p) in parts {
        let _ = write!(lines, "{name}: ");
        match p.state {
            PartState::Up => lines.push_str("up"),
            PartState::Restarting { ended, at } => {
                let _ = write!(
                    lines,
                    "{}, restarting in {}",
                    ended.label(),
                    secs(at.saturating_duration_since(now))
                );
            }
            PartState::Failed {
                ended,
                failures_in_window,
            } => {
                dead.push(name.as_str());
                let _ = write!(
                    lines,
                    "dead: {} {failures_in_window} times within its restart window, not restarted again",
                    ended.label()
                );
            }
            PartState::Stopped => lines.push_str("stopped"),
        }
        if let Some(since) = p.stalled_since {
            dead.push(name.as_str());
            let _ = write!(
                lines,
                ", stalled: a message unanswered for {}",
                secs(now.saturating_duration_since(since))
            );
        }
        if p.restarts > 0 {
            let _ = write!(
                lines,
                " (restarted {} time{}",
                p.restarts,
                if p.restarts == 1 { "" } else { "s" }
            );
            if let Some(last) = p.last_end {
                let _ = write!(lines, ", last {}", last.label());
            }
            lines.push(')');
        }
        lines.push('\n');
    }
    dead.dedup();
    let head = if dead.is_empty() {
        "ok\n".to_owned()
    } else {
        format!("not live: {}\n", dead.join(", "))
    };
    Report {
        live: dead.is_empty(),
        body: head + &lines,
    }
}

fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(state: PartState) -> PartHealth {
        PartHealth {
            state,
            restarts: 0,
            last_end: None,
            stalled_since: None,
        }
    }

    #[test]
    fn no_part_yet_is_live() {
        // A standby runs no part: it is as live as its HTTP server.
        let r = report(&BTreeMap::new(), Instant::now());
        assert!(r.live);
        assert_eq!(r.body, "ok\n");
    }

    #[test]
    fn a_restarting_part_is_live_and_says_when_it_starts_again() {
        let now = Instant::now();
        let parts = BTreeMap::from([
            ("root".to_owned(), part(PartState::Up)),
            (
                "writer".to_owned(),
                PartHealth {
                    restarts: 2,
                    last_end: Some(Ended::Panicked),
                    ..part(PartState::Restarting {
                        ended: Ended::Panicked,
                        at: now + Duration::from_millis(1500),
                    })
                },
            ),
        ]);
        let r = report(&parts, now);
        assert!(r.live, "{}", r.body);
        assert_eq!(
            r.body,
            "ok\nroot: up\nwriter: panicked, restarting in 1.5s (restarted 2 times, last panicked)\n"
        );
    }

    #[test]
    fn a_part_dead_for_good_fails_liveness_and_is_named() {
        let now = Instant::now();
        let parts = BTreeMap::from([
            ("holding".to_owned(), part(PartState::Up)),
            (
                "writer".to_owned(),
                PartHealth {
                    restarts: 5,
                    last_end: Some(Ended::Panicked),
                    ..part(PartState::Failed {
                        ended: Ended::Panicked,
                        failures_in_window: 6,
                    })
                },
            ),
        ]);
        let r = report(&parts, now);
        assert!(!r.live);
        assert!(r.body.starts_with("not live: writer\n"), "{}", r.body);
        assert!(
            r.body
                .contains("writer: dead: panicked 6 times within its restart window"),
            "{}",
            r.body
        );
        assert!(r.body.contains("holding: up\n"), "{}", r.body);
    }

    #[test]
    fn a_stalled_part_fails_liveness_while_it_stalls() {
        let now = Instant::now();
        let mut parts = BTreeMap::from([(
            "root".to_owned(),
            PartHealth {
                stalled_since: Some(now - Duration::from_secs(31)),
                ..part(PartState::Up)
            },
        )]);
        let r = report(&parts, now);
        assert!(!r.live);
        assert_eq!(
            r.body,
            "not live: root\nroot: up, stalled: a message unanswered for 31.0s\n"
        );
        parts.get_mut("root").unwrap().stalled_since = None;
        assert!(report(&parts, now).live);
    }

    #[test]
    fn a_stopped_part_is_no_failure() {
        let parts = BTreeMap::from([("census".to_owned(), part(PartState::Stopped))]);
        assert!(report(&parts, Instant::now()).live);
    }

    #[tokio::test]
    async fn the_first_part_dead_for_good_is_announced_once() {
        let h = Health::default();
        h.up("writer");
        h.restarting("writer", Ended::Panicked, Instant::now());
        h.up("writer");
        assert_eq!(h.part("writer").unwrap().restarts, 1);
        h.failed("writer", Ended::Panicked, 6);
        h.failed("root", Ended::Returned, 6);
        let dead = tokio::time::timeout(Duration::from_secs(1), h.dead())
            .await
            .expect("announced");
        assert!(dead.contains("\"writer\" panicked 6 times"), "{dead}");
        assert!(!h.report().live);
    }
}
