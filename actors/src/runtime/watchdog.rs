//! The stall watchdog (docs/adr/0017-liveness.md): a part that is alive but no longer takes
//! its messages (a handler that never returns, a lock never released) stops reconciling as
//! surely as one that crashed, and no supervisor sees it end. So every few seconds each
//! probed part is asked a question that goes through its mailbox, behind whatever waits
//! there; one left unanswered for the stall limit marks the part stalled in [`Health`], and
//! `/healthz` fails until it answers. The process cannot trust itself to stop a part that
//! does not answer, so the kubelet restarts the pod (its grace period bounds the shutdown).
//!
//! A part that is not running (restarting, stopped) is not asked: its supervisor reports it.

use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use super::health::{Health, PartState};

/// Sends one question to a part; `None` when it has no running incarnation to ask.
pub type Ask = Box<dyn Fn() -> Option<oneshot::Receiver<()>> + Send + Sync>;

/// A probed part.
pub struct Probe {
    pub part: String,
    pub ask: Ask,
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probe").field("part", &self.part).finish()
    }
}

/// How often to ask, given the stall limit: often enough to notice a stall within a quarter
/// of the limit, never more than every 5 s or less than every 100 ms.
pub fn tick(stall_after: Duration) -> Duration {
    (stall_after / 4).clamp(Duration::from_millis(100), Duration::from_secs(5))
}

/// The question in flight to one part.
struct Asked {
    at: Instant,
    answer: oneshot::Receiver<()>,
    stalled: bool,
}

/// Asks every probe until `stop` is cancelled.
pub async fn run(
    probes: Vec<Probe>,
    health: Health,
    stall_after: Duration,
    stop: CancellationToken,
) {
    let mut asked: Vec<Option<Asked>> = probes.iter().map(|_| None).collect();
    let mut every = tokio::time::interval(tick(stall_after));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = every.tick() => {}
        }
        let now = Instant::now();
        for (probe, slot) in probes.iter().zip(asked.iter_mut()) {
            if health
                .part(&probe.part)
                .is_some_and(|p| p.state != PartState::Up)
            {
                // Its supervisor has it; a new incarnation gets a new question.
                if slot.take().is_some_and(|a| a.stalled) {
                    health.stalled(&probe.part, None);
                }
                continue;
            }
            if let Some(a) = slot.as_mut() {
                match a.answer.try_recv() {
                    Err(oneshot::error::TryRecvError::Empty) => {
                        let waited = now.saturating_duration_since(a.at);
                        if waited >= stall_after && !a.stalled {
                            a.stalled = true;
                            error!(part = %probe.part, ?waited, "a part of the operator has left a message unanswered past the stall limit; /healthz fails until it answers");
                            health.stalled(&probe.part, Some(a.at.into_std()));
                        }
                        continue;
                    }
                    Ok(()) => {
                        if a.stalled {
                            info!(part = %probe.part, "a stalled part of the operator answers again");
                            health.stalled(&probe.part, None);
                        }
                    }
                    // The incarnation went away with the question; its supervisor reports it.
                    Err(oneshot::error::TryRecvError::Closed) => {
                        if a.stalled {
                            health.stalled(&probe.part, None);
                        }
                    }
                }
            }
            *slot = (probe.ask)().map(|answer| Asked {
                at: now,
                answer,
                stalled: false,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A part whose answers can be held back.
    #[derive(Clone, Default)]
    struct Held(Arc<Mutex<(bool, Vec<oneshot::Sender<()>>)>>);

    impl Held {
        fn probe(&self, part: &str) -> Probe {
            let this = self.clone();
            Probe {
                part: part.to_owned(),
                ask: Box::new(move || {
                    let (tx, rx) = oneshot::channel();
                    let mut s = this.0.lock().unwrap();
                    if s.0 {
                        s.1.push(tx);
                    } else {
                        let _ = tx.send(());
                    }
                    Some(rx)
                }),
            }
        }

        fn hold(&self, on: bool) {
            let mut s = self.0.lock().unwrap();
            s.0 = on;
            if !on {
                for tx in s.1.drain(..) {
                    let _ = tx.send(());
                }
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_part_that_stops_answering_is_stalled_until_it_answers_again() {
        let health = Health::default();
        health.up("writer");
        let part = Held::default();
        let stop = CancellationToken::new();
        let limit = Duration::from_secs(30);
        tokio::spawn(run(
            vec![part.probe("writer")],
            health.clone(),
            limit,
            stop.clone(),
        ));
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(health.report().live, "answers: live");

        part.hold(true);
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert!(health.report().live, "not yet past the limit");
        tokio::time::sleep(Duration::from_secs(20)).await;
        let r = health.report();
        assert!(!r.live, "{}", r.body);
        assert!(r.body.contains("writer: up, stalled"), "{}", r.body);

        part.hold(false);
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(health.report().live, "{}", health.report().body);
        stop.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn a_part_its_supervisor_restarts_is_not_asked() {
        let health = Health::default();
        health.restarting(
            "root",
            crate::runtime::health::Ended::Panicked,
            std::time::Instant::now(),
        );
        let part = Held::default();
        part.hold(true);
        tokio::spawn(run(
            vec![part.probe("root")],
            health.clone(),
            Duration::from_secs(1),
            CancellationToken::new(),
        ));
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(health.report().live);
        assert!(part.0.lock().unwrap().1.is_empty(), "never asked");
    }
}
