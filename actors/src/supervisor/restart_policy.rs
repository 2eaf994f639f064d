//! PURE restart bookkeeping for one supervised child: no tokio, no clock, no global RNG.
//!
//! Time (`started_at`, `now`) and randomness (`&mut impl Rng`) are inputs, so every rule is
//! checked by plain `#[test]`s with a seeded RNG:
//! - exponential backoff `base * factor^attempt`, capped, with a choice of jitter;
//! - the attempt counter resets when the child had stayed up for `stable_after`
//!   (a child that crashes once a day restarts quickly every time);
//! - an OTP-style intensity limit: more than `max_restarts` failures within `window`
//!   means the child is crash-looping and must be parked, not restarted forever.
//!
//! Why not `backon::ExponentialBuilder`: its jitter is additive (`d + d * U[0,1)`), so a capped
//! delay can reach twice the cap and it offers neither full nor decorrelated jitter; its RNG is
//! an internal `fastrand` seeded per iterator, so a stateful iterator would have to live in
//! every child entry and be rebuilt on reset. The arithmetic is ten lines; doing it here keeps
//! the cap a real cap and the randomness injectable.

use rand::Rng;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How a computed delay is randomised, so that many children failing together (an API
/// server outage) do not restart in lock-step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Jitter {
    /// Exactly the exponential delay. For tests and for reasoning, not for production.
    None,
    /// Uniform in `[d/2, d]`: spreads restarts yet never restarts "immediately", and each
    /// delay is at least the previous ceiling, so delays still visibly grow. The default.
    Equal,
    /// Uniform in `[0, d]` ("full jitter"): the widest spread, but may restart at once.
    Full,
    /// Uniform in `[base, 3 * previous delay]`, capped ("decorrelated jitter").
    Decorrelated,
}

/// The knobs of restart behaviour for one kind of child.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Delay before the first restart after a (re)set.
    pub base: Duration,
    /// Growth per consecutive restart.
    pub factor: u32,
    /// No delay is ever longer than this (after jitter too).
    pub cap: Duration,
    /// Randomisation of each delay.
    pub jitter: Jitter,
    /// A child that ran at least this long before failing starts again from `base`.
    pub stable_after: Duration,
    /// Restarts allowed inside `window`; one more failure parks the child.
    pub max_restarts: usize,
    /// The sliding window of the intensity limit.
    pub window: Duration,
}

impl Default for RestartPolicy {
    /// 0.5 s doubling to 5 min; six failures within 10 min park the child. A deterministic
    /// crash therefore parks after about 15 s of backoff, while a child that fails every few
    /// minutes keeps being restarted.
    fn default() -> Self {
        Self {
            base: Duration::from_millis(500),
            factor: 2,
            cap: Duration::from_secs(5 * 60),
            jitter: Jitter::Equal,
            stable_after: Duration::from_secs(60),
            max_restarts: 5,
            window: Duration::from_secs(10 * 60),
        }
    }
}

impl RestartPolicy {
    /// The un-jittered delay of the `attempt`-th consecutive restart (0-based), capped.
    /// Saturates instead of overflowing for any `attempt`.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let growth = self.factor.saturating_pow(attempt);
        self.base.saturating_mul(growth).min(self.cap)
    }

    /// The jittered delay for `attempt`, given the previous delay (for decorrelated jitter).
    pub fn delay<R: Rng + ?Sized>(
        &self,
        attempt: u32,
        previous: Option<Duration>,
        rng: &mut R,
    ) -> Duration {
        let ceiling = self.ceiling(attempt);
        let delay = match self.jitter {
            Jitter::None => ceiling,
            Jitter::Equal => uniform(rng, ceiling / 2, ceiling),
            Jitter::Full => uniform(rng, Duration::ZERO, ceiling),
            Jitter::Decorrelated => {
                let previous = previous.unwrap_or(self.base);
                uniform(rng, self.base, previous.saturating_mul(3))
            }
        };
        delay.min(self.cap)
    }
}

/// What the supervisor should do about a failed child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Start it again after this delay.
    Restart(Duration),
    /// It failed more than `max_restarts` times within `window`: park it.
    GiveUp {
        /// Failures counted inside the window, this one included.
        failures_in_window: usize,
    },
}

/// Per-child restart state. Lives as long as the child's entry, across incarnations.
#[derive(Clone, Debug, Default)]
pub struct RestartTracker {
    /// Consecutive restarts since the last reset; the exponent of the backoff.
    attempt: u32,
    /// The last delay handed out, for decorrelated jitter.
    last_delay: Option<Duration>,
    /// Failure times inside the intensity window, oldest first.
    failures: VecDeque<Instant>,
}

impl RestartTracker {
    /// Record a failure at `now` of an incarnation started at `started_at` and decide.
    pub fn on_failure<R: Rng + ?Sized>(
        &mut self,
        policy: &RestartPolicy,
        started_at: Instant,
        now: Instant,
        rng: &mut R,
    ) -> Verdict {
        if now.saturating_duration_since(started_at) >= policy.stable_after {
            self.attempt = 0;
            self.last_delay = None;
        }

        self.failures.push_back(now);
        while let Some(&oldest) = self.failures.front() {
            if now.saturating_duration_since(oldest) < policy.window {
                break;
            }
            self.failures.pop_front();
        }
        if self.failures.len() > policy.max_restarts {
            return Verdict::GiveUp {
                failures_in_window: self.failures.len(),
            };
        }

        let delay = policy.delay(self.attempt, self.last_delay, rng);
        self.attempt = self.attempt.saturating_add(1);
        self.last_delay = Some(delay);
        Verdict::Restart(delay)
    }

    /// Forget all history: the object changed, or an operator asked for a fresh start.
    pub fn reset(&mut self) {
        *self = Self::default();
    }

    /// Consecutive restarts since the last reset.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Failures currently counted by the intensity limit.
    pub fn failures_in_window(&self) -> usize {
        self.failures.len()
    }
}

/// Uniform in `[lo, hi]` with nanosecond resolution; `lo` when the range is empty.
fn uniform<R: Rng + ?Sized>(rng: &mut R, lo: Duration, hi: Duration) -> Duration {
    let (lo, hi) = (nanos(lo), nanos(hi));
    if hi <= lo {
        return Duration::from_nanos(lo);
    }
    Duration::from_nanos(rng.random_range(lo..=hi))
}

/// Nanoseconds, saturating at ~584 years (far beyond any cap).
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::{Jitter, RestartPolicy, RestartTracker, Verdict};
    use rand::SeedableRng;
    use rand::rngs::StdRng;
    use std::time::{Duration, Instant};

    const MS: Duration = Duration::from_millis(1);

    fn policy(jitter: Jitter) -> RestartPolicy {
        RestartPolicy {
            jitter,
            max_restarts: 1_000,
            ..RestartPolicy::default()
        }
    }

    /// Fail `n` times in quick succession (each incarnation lives 1 ms), returning the delays.
    fn quick_failures(policy: &RestartPolicy, n: usize, seed: u64) -> Vec<Duration> {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut tracker = RestartTracker::default();
        let mut now = Instant::now();
        (0..n)
            .map(|_| {
                let started = now;
                now += MS;
                match tracker.on_failure(policy, started, now, &mut rng) {
                    Verdict::Restart(d) => {
                        now += d;
                        d
                    }
                    Verdict::GiveUp { .. } => panic!("gave up unexpectedly"),
                }
            })
            .collect()
    }

    #[test]
    fn delays_double_from_base_and_stop_at_the_cap() {
        let delays = quick_failures(&policy(Jitter::None), 12, 0);
        let secs: Vec<f64> = delays.iter().map(Duration::as_secs_f64).collect();
        assert_eq!(
            secs,
            [
                0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 300.0, 300.0
            ]
        );
    }

    #[test]
    fn ceiling_saturates_instead_of_overflowing() {
        let p = RestartPolicy::default();
        assert_eq!(p.ceiling(u32::MAX), p.cap);
        assert_eq!(p.ceiling(0), p.base);
    }

    #[test]
    fn equal_jitter_stays_in_upper_half_and_still_grows() {
        let p = policy(Jitter::Equal);
        for seed in 0..50 {
            let delays = quick_failures(&p, 12, seed);
            for (i, d) in delays.iter().enumerate() {
                let c = p.ceiling(i as u32);
                assert!(
                    *d >= c / 2 && *d <= c,
                    "seed {seed} attempt {i}: {d:?} vs {c:?}"
                );
            }
            // Below the cap each delay is >= the previous ceiling, so the sequence grows.
            for w in delays[..10].windows(2) {
                assert!(w[1] >= w[0], "seed {seed}: {delays:?}");
            }
        }
    }

    #[test]
    fn full_jitter_stays_within_zero_and_ceiling() {
        let p = policy(Jitter::Full);
        for seed in 0..50 {
            for (i, d) in quick_failures(&p, 12, seed).iter().enumerate() {
                assert!(*d <= p.ceiling(i as u32));
            }
        }
    }

    #[test]
    fn decorrelated_jitter_stays_within_base_and_three_times_previous() {
        let p = policy(Jitter::Decorrelated);
        for seed in 0..50 {
            let delays = quick_failures(&p, 20, seed);
            let mut previous = p.base;
            for d in delays {
                assert!(
                    d >= p.base && d <= p.cap && d <= previous * 3,
                    "{d:?} {previous:?}"
                );
                previous = d;
            }
        }
    }

    #[test]
    fn same_seed_same_delays() {
        let p = policy(Jitter::Full);
        assert_eq!(quick_failures(&p, 8, 7), quick_failures(&p, 8, 7));
    }

    #[test]
    fn a_child_that_stayed_up_for_the_stable_period_starts_again_from_base() {
        let p = policy(Jitter::None);
        let mut rng = StdRng::seed_from_u64(0);
        let mut t = RestartTracker::default();
        let t0 = Instant::now();
        assert_eq!(
            t.on_failure(&p, t0, t0 + MS, &mut rng),
            Verdict::Restart(p.base)
        );
        assert_eq!(
            t.on_failure(&p, t0, t0 + MS, &mut rng),
            Verdict::Restart(p.base * 2)
        );
        // Up for just under the stable period: keeps growing.
        let almost = t0 + p.stable_after - MS;
        assert_eq!(
            t.on_failure(&p, t0, almost, &mut rng),
            Verdict::Restart(p.base * 4)
        );
        // Up for the stable period: back to base.
        let stable = t0 + p.stable_after;
        assert_eq!(
            t.on_failure(&p, t0, stable, &mut rng),
            Verdict::Restart(p.base)
        );
        assert_eq!(t.attempt(), 1);
    }

    #[test]
    fn more_than_max_restarts_in_the_window_gives_up() {
        let p = RestartPolicy {
            jitter: Jitter::None,
            max_restarts: 3,
            window: Duration::from_secs(60),
            ..RestartPolicy::default()
        };
        let mut rng = StdRng::seed_from_u64(0);
        let mut t = RestartTracker::default();
        let t0 = Instant::now();
        for i in 0..3 {
            let at = t0 + Duration::from_secs(i);
            assert!(matches!(
                t.on_failure(&p, at, at, &mut rng),
                Verdict::Restart(_)
            ));
        }
        let at = t0 + Duration::from_secs(3);
        assert_eq!(
            t.on_failure(&p, at, at, &mut rng),
            Verdict::GiveUp {
                failures_in_window: 4
            }
        );
        t.reset();
        assert_eq!(t.failures_in_window(), 0);
        assert_eq!(t.on_failure(&p, at, at, &mut rng), Verdict::Restart(p.base));
    }

    #[test]
    fn failures_spread_wider_than_the_window_never_give_up() {
        let p = RestartPolicy {
            jitter: Jitter::None,
            max_restarts: 2,
            window: Duration::from_secs(60),
            ..RestartPolicy::default()
        };
        let mut rng = StdRng::seed_from_u64(0);
        let mut t = RestartTracker::default();
        let t0 = Instant::now();
        for i in 0..20 {
            let at = t0 + Duration::from_secs(30 * i);
            assert!(matches!(
                t.on_failure(&p, at, at, &mut rng),
                Verdict::Restart(_)
            ));
            assert!(t.failures_in_window() <= 2);
        }
    }
}
