//! What the answers of terdut-servers may hold of the operator's memory at once, process-wide
//! (docs/security.md "A broken or hostile server costs little").
//!
//! Each answer is read up to `MAX_RESPONSE_BYTES` (1 MiB), and each client keeps at most 64
//! requests in flight; a hostile server could therefore make the operator hold 64 MiB, and
//! every further server as much again. Here every byte of an answer being read is counted
//! against two budgets before it is kept: its server's share ([`AnswerBudget::SHARE`]) and the
//! process's ([`AnswerBudget::TOTAL`]). A declared length is reserved before anything is read;
//! an undeclared one chunk by chunk as it arrives. A request that finds a budget spent waits
//! for it (the request timeout, which covers reading the body, bounds the wait), and gives
//! what it holds back when its answer has been decoded.
//!
//! The share keeps one server's answers from spending the process's budget: the contract's
//! answers are a few KiB, so 64 of them fit in a share many times over, and a server sending
//! megabytes waits on its own share while every other server reads on. Only as many hostile
//! servers as shares fit in the total (32) can make other servers' answers wait.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Budgets are counted in units of this many bytes.
const UNIT: usize = 1024;

/// The process's budget for answers being read; cheap to clone.
#[derive(Clone, Debug)]
pub struct AnswerBudget {
    total: Arc<Semaphore>,
    share: usize,
    /// Bytes held now: `terdut_api_answer_bytes` for the process's budget (`ApiMetrics`).
    held: Gauge,
    peak: Arc<AtomicUsize>,
}

impl AnswerBudget {
    /// What all answers may hold at once.
    pub const TOTAL: usize = 64 * 1024 * 1024;
    /// What the answers of one server may hold at once.
    pub const SHARE: usize = 2 * 1024 * 1024;

    /// A budget of `total` bytes, of which one server's answers hold at most `share`.
    pub fn new(total: usize, share: usize) -> Self {
        Self {
            total: Arc::new(Semaphore::new(units(total))),
            share: share.min(total),
            held: Gauge::default(),
            peak: Arc::default(),
        }
    }

    /// The one budget of this process, which every client shares unless told otherwise.
    pub fn process() -> Self {
        static PROCESS: std::sync::OnceLock<AnswerBudget> = std::sync::OnceLock::new();
        PROCESS
            .get_or_init(|| Self::new(Self::TOTAL, Self::SHARE))
            .clone()
    }

    /// A server's share of this budget (one per client).
    pub fn share(&self) -> ServerShare {
        ServerShare {
            budget: self.clone(),
            own: Arc::new(Semaphore::new(units(self.share))),
        }
    }

    /// Bytes of answers held now.
    pub fn held(&self) -> usize {
        usize::try_from(self.held.get()).unwrap_or(0)
    }

    /// The gauge of [`Self::held`], for a registry.
    pub fn held_gauge(&self) -> Gauge {
        self.held.clone()
    }

    /// The most bytes of answers held at once since the budget was made.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }
}

impl Default for AnswerBudget {
    fn default() -> Self {
        Self::process()
    }
}

/// One server's share of an [`AnswerBudget`].
#[derive(Clone, Debug)]
pub struct ServerShare {
    budget: AnswerBudget,
    own: Arc<Semaphore>,
}

impl ServerShare {
    /// An empty reservation for one answer.
    pub fn reserve(&self) -> Reservation {
        Reservation {
            share: self.clone(),
            units: 0,
            permits: vec![],
        }
    }
}

/// What one answer holds of its share and of the process's budget; given back on drop.
#[derive(Debug)]
pub struct Reservation {
    share: ServerShare,
    units: usize,
    permits: Vec<(OwnedSemaphorePermit, OwnedSemaphorePermit)>,
}

impl Reservation {
    /// Waits until `bytes` are reserved in all (the answer's length so far, or its declared
    /// length). The server's share is taken first, then the process's: every reservation
    /// takes them in that order, so two never wait on each other crosswise.
    pub async fn cover(&mut self, bytes: usize) {
        let want = units(bytes);
        if want <= self.units {
            return;
        }
        let more = u32::try_from(want - self.units).unwrap_or(u32::MAX);
        // Neither semaphore is ever closed, so `acquire` cannot fail.
        let (Ok(own), Ok(total)) = (
            self.share.own.clone().acquire_many_owned(more).await,
            self.share
                .budget
                .total
                .clone()
                .acquire_many_owned(more)
                .await,
        ) else {
            return std::future::pending().await;
        };
        self.permits.push((own, total));
        self.units = want;
        let budget = &self.share.budget;
        let added = more as usize * UNIT;
        let before = budget.held.inc_by(i64::try_from(added).unwrap_or(i64::MAX));
        let now = usize::try_from(before).unwrap_or(0) + added;
        budget.peak.fetch_max(now, Ordering::Relaxed);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let held = i64::try_from(self.units * UNIT).unwrap_or(i64::MAX);
        self.share.budget.held.dec_by(held);
    }
}

/// Whole units for `bytes`, rounded up.
fn units(bytes: usize) -> usize {
    bytes.div_ceil(UNIT)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn reservations_wait_for_their_share_and_give_it_back() {
        let budget = AnswerBudget::new(8 * UNIT, 4 * UNIT);
        let share = budget.share();
        let mut a = share.reserve();
        a.cover(3 * UNIT).await;
        a.cover(2 * UNIT).await;
        assert_eq!(budget.held(), 3 * UNIT, "covering less takes nothing more");
        let mut b = share.reserve();
        // The share has one unit left: two more wait until `a` gives its back.
        let waiting = tokio::time::timeout(Duration::from_millis(50), b.cover(2 * UNIT)).await;
        assert!(waiting.is_err(), "waits for the share");
        drop(a);
        b.cover(2 * UNIT).await;
        assert_eq!(budget.held(), 2 * UNIT);
        assert_eq!(budget.peak(), 3 * UNIT);
    }

    #[tokio::test]
    async fn one_servers_spent_share_leaves_the_others_reading() {
        let budget = AnswerBudget::new(8 * UNIT, 4 * UNIT);
        let hostile = budget.share();
        let mut held = hostile.reserve();
        held.cover(4 * UNIT).await;
        let mut blocked = hostile.reserve();
        assert!(
            tokio::time::timeout(Duration::from_millis(50), blocked.cover(UNIT))
                .await
                .is_err()
        );
        let mut other = budget.share().reserve();
        tokio::time::timeout(Duration::from_secs(1), other.cover(4 * UNIT))
            .await
            .expect("another server's share is its own");
        assert_eq!(budget.held(), 8 * UNIT);
        // The process's budget is spent now: a third server waits too.
        let mut third = budget.share().reserve();
        assert!(
            tokio::time::timeout(Duration::from_millis(50), third.cover(UNIT))
                .await
                .is_err()
        );
        drop(held);
        third.cover(UNIT).await;
        assert!(budget.peak() <= 8 * UNIT);
    }

    #[test]
    fn the_process_budget_is_one() {
        let (a, b) = (AnswerBudget::process(), AnswerBudget::process());
        assert!(Arc::ptr_eq(&a.total, &b.total));
        assert_eq!(units(0), 0);
        assert_eq!(units(1), 1);
        assert_eq!(units(UNIT + 1), 2);
    }
}
