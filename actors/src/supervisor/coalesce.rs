//! Keeping ractor's unbounded mailboxes small, and measuring them.
//!
//! ractor mailboxes have no bound and expose no length. Two tools make up for that:
//! - **coalescing**: a "reconcile pending" flag per object, so a burst of watch events for one
//!   object enqueues at most one nudge while one is still queued. Only coalesce messages that
//!   carry no data (the handler re-reads the latest state); coalescing a message that carries
//!   a spec would drop the newer spec.
//! - **depth accounting**: senders count what they enqueue, the actor counts what it handles,
//!   and the difference feeds the `actor_mailbox_depth{kind}` gauge.

use dashmap::DashSet;
use prometheus_client::metrics::gauge::Gauge;
use ractor::{ActorRef, MessagingErr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

use crate::key::ObjectKey;

/// "A nudge is already queued" for one actor.
///
/// The sender calls [`mark`](Self::mark) and sends only when it returns `true`; the actor calls
/// [`clear`](Self::clear) when it *starts* handling the nudge, before reading state, so a change
/// that lands while it works enqueues a fresh nudge instead of being lost.
///
/// It also remembers when the oldest event the queued nudge stands for happened, so the
/// handler can tell how long dispatch took (`actor_dispatch_seconds`).
#[derive(Clone, Debug, Default)]
pub struct PendingFlag(Arc<Pending>);

#[derive(Debug, Default)]
struct Pending {
    set: AtomicBool,
    /// Nanoseconds after [`EPOCH`] of the oldest event, plus one; 0: unknown.
    since: AtomicU64,
}

/// The instant stamps count from.
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

impl PendingFlag {
    /// Set the flag; `true` when it was clear, i.e. the caller should enqueue a message.
    pub fn mark(&self) -> bool {
        !self.0.set.swap(true, Ordering::AcqRel)
    }

    /// [`mark`](Self::mark), for an event that happened at `at`: a nudge that was clear
    /// remembers it; a queued one keeps the older instant it has.
    pub fn mark_at(&self, at: Instant) -> bool {
        let nanos = at.saturating_duration_since(*EPOCH).as_nanos();
        let stamp = u64::try_from(nanos).unwrap_or(u64::MAX - 1) + 1;
        let _ = self
            .0
            .since
            .compare_exchange(0, stamp, Ordering::AcqRel, Ordering::Acquire);
        self.mark()
    }

    /// Clear the flag: the queued message is being handled. Returns how long ago the oldest
    /// event it stands for happened, when that is known.
    pub fn clear(&self) -> Option<Duration> {
        self.0.set.store(false, Ordering::Release);
        match self.0.since.swap(0, Ordering::AcqRel) {
            0 => None,
            stamp => {
                let at = *EPOCH + Duration::from_nanos(stamp - 1);
                Some(Instant::now().saturating_duration_since(at))
            }
        }
    }

    /// Whether a message is queued.
    pub fn is_set(&self) -> bool {
        self.0.set.load(Ordering::Acquire)
    }
}

/// [`PendingFlag`]s for many objects, for one actor that receives messages about many keys
/// (for example the informer fan-in). Entries exist only while a message is queued.
#[derive(Clone, Debug, Default)]
pub struct Coalescer {
    pending: Arc<DashSet<ObjectKey>>,
}

impl Coalescer {
    /// Mark `key` pending; `true` when it was not, i.e. the caller should enqueue a message.
    pub fn mark(&self, key: &ObjectKey) -> bool {
        // The contains() check avoids cloning the key on the hot "already pending" path.
        !self.pending.contains(key) && self.pending.insert(key.clone())
    }

    /// The message for `key` is being handled.
    pub fn clear(&self, key: &ObjectKey) {
        self.pending.remove(key);
    }

    /// Number of keys with a queued message.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether no key has a queued message.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

/// The queue depth of one actor incarnation, added into a per-kind gauge.
///
/// Per incarnation because a dead actor's queued messages are dropped with its mailbox: the
/// supervisor [`close`](Self::close)s the old counter, which takes its remainder out of the
/// gauge, so the gauge cannot drift however actors die.
#[derive(Clone, Debug)]
pub struct MailboxDepth {
    inner: Arc<Mutex<Depth>>,
    gauge: Gauge,
}

#[derive(Debug, Default)]
struct Depth {
    queued: i64,
    closed: bool,
}

impl MailboxDepth {
    /// A counter at zero feeding `gauge` (typically `actor_mailbox_depth{kind}`).
    pub fn new(gauge: Gauge) -> Self {
        Self {
            inner: Arc::default(),
            gauge,
        }
    }

    /// A message was put in the mailbox.
    pub fn enqueued(&self) {
        let mut d = self.lock();
        if !d.closed {
            d.queued += 1;
            self.gauge.inc();
        }
    }

    /// The actor took a message out of the mailbox. Never goes below zero, so a message
    /// sent without [`enqueued`](Self::enqueued) cannot skew the gauge.
    pub fn handled(&self) {
        let mut d = self.lock();
        if !d.closed && d.queued > 0 {
            d.queued -= 1;
            self.gauge.dec();
        }
    }

    /// The actor is gone: whatever is still counted was dropped with its mailbox.
    pub fn close(&self) {
        let mut d = self.lock();
        if !d.closed {
            self.gauge.dec_by(d.queued);
            d.queued = 0;
            d.closed = true;
        }
    }

    /// Messages currently counted as queued.
    pub fn queued(&self) -> i64 {
        self.lock().queued
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Depth> {
        // A panic while holding this lock cannot leave `Depth` inconsistent (single fields).
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Send `msg` to `actor`, counting it in `depth`; undone when the actor is already gone.
pub fn send_counted<M: ractor::Message>(
    actor: &ActorRef<M>,
    depth: &MailboxDepth,
    msg: M,
) -> Result<(), MessagingErr<M>> {
    depth.enqueued();
    actor.send_message(msg).inspect_err(|_| depth.close())
}

#[cfg(test)]
mod tests {
    use super::{Coalescer, MailboxDepth, PendingFlag};
    use crate::key::ObjectKey;
    use prometheus_client::metrics::gauge::Gauge;

    #[test]
    fn a_burst_for_one_key_enqueues_once_until_handled() {
        let c = Coalescer::default();
        let a = ObjectKey::new("ns", "a");
        let b = ObjectKey::new("ns", "b");
        let sent = (0..100).filter(|_| c.mark(&a)).count();
        assert_eq!(sent, 1);
        assert!(c.mark(&b), "another key is independent");
        c.clear(&a);
        assert!(c.mark(&a), "after handling, the next event enqueues again");
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn pending_flag_marks_once() {
        let f = PendingFlag::default();
        assert!(f.mark());
        assert!(!f.mark());
        assert!(f.is_set());
        f.clear();
        assert!(f.mark());
    }

    #[test]
    fn depth_feeds_the_kind_gauge_and_close_removes_the_remainder() {
        let gauge = Gauge::default();
        let one = MailboxDepth::new(gauge.clone());
        let two = MailboxDepth::new(gauge.clone());
        one.enqueued();
        one.enqueued();
        two.enqueued();
        assert_eq!(gauge.get(), 3);
        one.handled();
        assert_eq!((one.queued(), gauge.get()), (1, 2));
        one.close();
        one.handled();
        one.enqueued();
        assert_eq!(gauge.get(), 1, "a closed counter no longer moves the gauge");
        two.handled();
        two.handled();
        assert_eq!(gauge.get(), 0, "never below zero");
    }
}
