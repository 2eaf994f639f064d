//! Leader election on a `coordination.k8s.io/v1` Lease, so two replicas can run and only one
//! reconciles.
//!
//! Written here rather than taken from a crate: `kube-leader-election` 0.44 targets kube 4, and
//! `kube-lease-manager` 0.13 (kube 5) judges expiry from the wall-clock `renewTime`, which
//! trusts clock agreement between nodes, and pulls a second `rand`. This module follows
//! client-go instead:
//!
//! - **Expiry is observed, not computed from timestamps.** A candidate notes when it last saw
//!   the lease spec change, on its own monotonic clock, and treats the lease as expired only
//!   after `leaseDurationSeconds` without a change. Clock skew between nodes does not matter.
//! - **Every write is guarded by `resourceVersion`** (create for a missing Lease, replace
//!   otherwise). Two candidates racing for the same version get one success and one 409: the
//!   409 is simply "lost the race".
//! - **The leader steps down before anyone may take over.** It measures its renew deadline from
//!   the instant *before* sending its last successful renew, and `renew_deadline` is shorter
//!   than the lease duration, so it reports "not leader" before any candidate can see the lease
//!   as expired (clocks are only assumed to run at the same rate).
//! - **Voluntary step-down releases the lease** (empty holder, duration 1 s), so the standby
//!   takes over on its next poll instead of waiting for expiry.
//!
//! All timing goes through `tokio::time`, so it follows paused time in tests.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until, timeout, timeout_at};
use tokio_util::sync::CancellationToken;

/// Election timings. `renew_deadline` must be shorter than `lease_duration`; the gap is the
/// safety margin against two leaders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseTimings {
    /// Written as `leaseDurationSeconds` (whole seconds, at least 1).
    pub lease_duration: Duration,
    /// How often the leader renews.
    pub renew_interval: Duration,
    /// The leader gives up when it has not renewed successfully for this long.
    pub renew_deadline: Duration,
    /// How often a candidate polls the lease, and the pause after a failed renew.
    pub retry_interval: Duration,
}

impl Default for LeaseTimings {
    /// 15 s lease, renew every 5 s, give up after 10 s, poll every second: a crashed leader is
    /// replaced within ~16 s, a voluntary step-down within ~1 s.
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_interval: Duration::from_secs(5),
            renew_deadline: Duration::from_secs(10),
            retry_interval: Duration::from_secs(1),
        }
    }
}

/// One candidate for one Lease.
#[derive(Clone, Debug)]
pub struct LeaderElector {
    api: Api<Lease>,
    name: String,
    identity: String,
    timings: LeaseTimings,
}

/// The lease spec this candidate last saw change, and when.
#[derive(Debug)]
struct Observed {
    spec: LeaseSpec,
    at: Instant,
}

/// Why a term as leader ended.
enum TermEnd {
    Lost,
    Shutdown(Box<Lease>),
}

impl LeaderElector {
    /// A candidate named `identity` (use the pod name: unique per replica) for the Lease
    /// `namespace/lease_name`. The Lease is created on first acquisition.
    ///
    /// # Panics
    /// When `timings.renew_deadline` is not shorter than the lease duration in whole seconds:
    /// that configuration could produce two leaders, so it is refused at construction.
    pub fn new(
        client: Client,
        namespace: &str,
        lease_name: impl Into<String>,
        identity: impl Into<String>,
        timings: LeaseTimings,
    ) -> Self {
        // Compared with the whole seconds actually written, not the configured Duration.
        let written = Duration::from_secs(timings.lease_duration.as_secs().max(1));
        assert!(
            timings.renew_deadline < written,
            "renew_deadline must be shorter than lease_duration"
        );
        Self {
            api: Api::namespaced(client, namespace),
            name: lease_name.into(),
            identity: identity.into(),
            timings,
        }
    }

    /// Campaigns until `shutdown` is cancelled, publishing `true` on `on_change` while this
    /// candidate leads and `false` otherwise. API errors are logged and retried, never returned.
    ///
    /// Consumers must stop writing as soon as they see `false`. On shutdown the leader first
    /// publishes `false`, then releases the lease; cancel the token after the reconcilers have
    /// stopped so the successor never overlaps with them.
    pub async fn run(self, on_change: watch::Sender<bool>, shutdown: CancellationToken) {
        let mut observed: Option<Observed> = None;
        loop {
            let Some((lease, sent)) = self.campaign(&mut observed, &shutdown).await else {
                return;
            };
            tracing::info!(lease = %self.name, identity = %self.identity, "became leader");
            on_change.send_replace(true);
            let end = self.lead(lease, sent, &shutdown).await;
            on_change.send_replace(false);
            observed = None;
            match end {
                TermEnd::Lost => tracing::warn!(lease = %self.name, "lost leadership"),
                TermEnd::Shutdown(lease) => {
                    self.release(*lease).await;
                    return;
                }
            }
        }
    }

    /// Polls until the lease is acquired (`Some`) or shutdown (`None`). The write itself is
    /// never cancelled by shutdown, only bounded by a timeout.
    async fn campaign(
        &self,
        observed: &mut Option<Observed>,
        shutdown: &CancellationToken,
    ) -> Option<(Lease, Instant)> {
        loop {
            if shutdown.is_cancelled() {
                return None;
            }
            if let Some(acquired) = self.try_acquire(observed).await {
                return Some(acquired);
            }
            tokio::select! {
                () = shutdown.cancelled() => return None,
                () = tokio::time::sleep(self.timings.retry_interval) => {}
            }
        }
    }

    /// One acquisition attempt; returns the written lease and the instant before the write.
    async fn try_acquire(&self, observed: &mut Option<Observed>) -> Option<(Lease, Instant)> {
        let bound = self.timings.renew_deadline;
        let current = match timeout(bound, self.api.get_opt(&self.name)).await {
            Ok(Ok(current)) => current,
            Ok(Err(error)) => {
                tracing::warn!(lease = %self.name, %error, "reading the lease failed");
                return None;
            }
            Err(_) => {
                tracing::warn!(lease = %self.name, "reading the lease timed out");
                return None;
            }
        };
        let now = Instant::now();
        let Some(current) = current else {
            let lease = self.fresh_lease();
            return self
                .write(now, self.api.create(&PostParams::default(), &lease))
                .await;
        };
        let spec = current.spec.clone().unwrap_or_default();
        if observed.as_ref().is_none_or(|o| o.spec != spec) {
            *observed = Some(Observed {
                spec: spec.clone(),
                at: now,
            });
        }
        let holder = spec.holder_identity.as_deref().filter(|h| !h.is_empty());
        let free = match holder {
            None => true,
            Some(h) if h == self.identity => true,
            Some(_) => {
                let secs = spec.lease_duration_seconds.unwrap_or(1).max(1);
                let since = observed.as_ref().map_or(now, |o| o.at);
                now >= since + Duration::from_secs(u64::try_from(secs).unwrap_or(1))
            }
        };
        if !free {
            return None;
        }
        let takeover = holder != Some(self.identity.as_str());
        let stamp = MicroTime(Timestamp::now());
        let mut next = current;
        next.spec = Some(LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.duration_secs()),
            acquire_time: if takeover {
                Some(stamp.clone())
            } else {
                spec.acquire_time
            },
            renew_time: Some(stamp),
            lease_transitions: Some(spec.lease_transitions.unwrap_or(0) + i32::from(takeover)),
            ..spec
        });
        // `next` keeps the resourceVersion we read: a concurrent writer makes this a 409.
        self.write(
            now,
            self.api.replace(&self.name, &PostParams::default(), &next),
        )
        .await
    }

    /// Runs one acquiring write, mapping a 409 to "lost the race".
    async fn write(
        &self,
        sent: Instant,
        call: impl Future<Output = kube::Result<Lease>>,
    ) -> Option<(Lease, Instant)> {
        match timeout(self.timings.renew_deadline, call).await {
            Ok(Ok(lease)) => Some((lease, sent)),
            Ok(Err(kube::Error::Api(status))) if status.code == 409 => {
                tracing::debug!(lease = %self.name, "another candidate acquired the lease first");
                None
            }
            Ok(Err(error)) => {
                tracing::warn!(lease = %self.name, %error, "acquiring the lease failed");
                None
            }
            Err(_) => {
                tracing::warn!(lease = %self.name, "acquiring the lease timed out");
                None
            }
        }
    }

    /// Renews until shutdown or until leadership is lost (a 409 from another holder, or no
    /// successful renew within `renew_deadline`).
    async fn lead(&self, mut lease: Lease, sent: Instant, shutdown: &CancellationToken) -> TermEnd {
        let t = self.timings;
        let mut last_ok = sent;
        let mut next = sent + t.renew_interval;
        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return TermEnd::Shutdown(Box::new(lease)),
                () = sleep_until(next) => {}
            }
            let sent = Instant::now();
            let deadline = last_ok + t.renew_deadline;
            match timeout_at(deadline, self.renew(&lease)).await {
                Ok(Ok(renewed)) => {
                    lease = renewed;
                    last_ok = sent;
                    next = sent + t.renew_interval;
                }
                Ok(Err(Renew::Taken(by))) => {
                    tracing::warn!(lease = %self.name, holder = ?by, "lease taken over");
                    return TermEnd::Lost;
                }
                Ok(Err(Renew::Failed(error))) if Instant::now() < deadline => {
                    tracing::warn!(lease = %self.name, %error, "renewing the lease failed; retrying");
                    next = (Instant::now() + t.retry_interval).min(deadline);
                }
                Ok(Err(Renew::Failed(error))) => {
                    tracing::warn!(lease = %self.name, %error, "renew deadline passed");
                    return TermEnd::Lost;
                }
                Err(_) => {
                    tracing::warn!(lease = %self.name, "renew deadline passed");
                    return TermEnd::Lost;
                }
            }
        }
    }

    /// One renew, guarded by the held resourceVersion. On a 409 it re-reads: if we still hold
    /// the lease (someone touched metadata, or our own earlier write landed unseen) it retries
    /// once on the fresh version; otherwise leadership is gone.
    async fn renew(&self, held: &Lease) -> Result<Lease, Renew> {
        match self
            .api
            .replace(&self.name, &PostParams::default(), &self.renewed(held))
            .await
        {
            Ok(lease) => Ok(lease),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                let fresh = self.api.get(&self.name).await.map_err(Renew::Failed)?;
                let holder = fresh.spec.as_ref().and_then(|s| s.holder_identity.clone());
                if holder.as_deref() != Some(self.identity.as_str()) {
                    return Err(Renew::Taken(holder));
                }
                self.api
                    .replace(&self.name, &PostParams::default(), &self.renewed(&fresh))
                    .await
                    .map_err(Renew::Failed)
            }
            Err(error) => Err(Renew::Failed(error)),
        }
    }

    /// Hands the lease back: empty holder and a 1 s duration, so every client (including
    /// client-go ones, which ignore an empty holder) sees it free at once.
    async fn release(&self, held: Lease) {
        let mut next = held;
        if let Some(spec) = next.spec.as_mut() {
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.renew_time = Some(MicroTime(Timestamp::now()));
        }
        let pp = PostParams::default();
        let call = self.api.replace(&self.name, &pp, &next);
        match timeout(self.timings.renew_deadline, call).await {
            Ok(Ok(_)) => tracing::info!(lease = %self.name, "released the lease"),
            Ok(Err(error)) => {
                tracing::warn!(lease = %self.name, %error, "releasing the lease failed")
            }
            Err(_) => tracing::warn!(lease = %self.name, "releasing the lease timed out"),
        }
    }

    fn renewed(&self, held: &Lease) -> Lease {
        let mut next = held.clone();
        let spec = next.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = Some(self.identity.clone());
        spec.lease_duration_seconds = Some(self.duration_secs());
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        next
    }

    fn fresh_lease(&self) -> Lease {
        let stamp = MicroTime(Timestamp::now());
        Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.identity.clone()),
                lease_duration_seconds: Some(self.duration_secs()),
                acquire_time: Some(stamp.clone()),
                renew_time: Some(stamp),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        }
    }

    fn duration_secs(&self) -> i32 {
        i32::try_from(self.timings.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }
}

/// A failed renew: taken by someone else (definitive) or an error (retry until the deadline).
enum Renew {
    Taken(Option<String>),
    Failed(kube::Error),
}
