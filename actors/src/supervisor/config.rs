//! The settings of one children table (a keyed supervisor, or a host's table).

use std::sync::Arc;
use std::time::Duration;

use super::metrics::SupervisorMetrics;
use super::restart_policy::RestartPolicy;
use crate::clock::{Clock, SystemClock};

/// Settings of one keyed supervisor.
#[derive(Clone, Debug)]
pub struct SupervisorConfig {
    /// Backoff, stability reset and intensity limit.
    pub policy: RestartPolicy,
    /// Monotonic time for backoff bookkeeping (timers themselves use tokio time).
    pub clock: Arc<dyn Clock>,
    /// Where `actor_*{kind}` series go.
    pub metrics: SupervisorMetrics,
    /// Seed for the jitter RNG; `None` seeds from the OS. Tests set it for repeatability.
    pub jitter_seed: Option<u64>,
    /// How long a stopping supervisor waits for its children to stop before ractor kills them.
    pub shutdown_timeout: Duration,
    /// At most this many passive children started with no change of their own (a relist, a
    /// resync, a due deadline) run at once; the others wait in order. A relist of 10,000 idle
    /// objects would otherwise start 10,000 actors at once (ADR 0011).
    pub wake_budget: usize,
    /// The longest a child started that way holds its place, if it neither stops nor says its
    /// pass is done (`ChildContext::release_place`): a backstop, so no child can stall the
    /// queue for ever.
    pub wake_hold: Duration,
}

impl Default for SupervisorConfig {
    fn default() -> Self {
        Self {
            policy: RestartPolicy::default(),
            clock: Arc::new(SystemClock),
            metrics: SupervisorMetrics::default(),
            jitter_seed: None,
            shutdown_timeout: Duration::from_secs(10),
            wake_budget: 1024,
            wake_hold: Duration::from_secs(60),
        }
    }
}
