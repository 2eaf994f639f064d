//! Kubernetes Events (events.k8s.io/v1) for every externally visible action.
//!
//! A thin layer over kube's [`Recorder`], which already folds repeats of the same
//! (object, reason, action, type) within six minutes into one Event series. What it adds:
//! publishing never fails the caller (an Event is a courtesy to the user, not part of the
//! reconcile), failures are logged and counted, every call is bounded by a timeout, and notes
//! are kept within the API's limits.
//!
//! Caveat of that folding: a repeat within the window bumps the first Event's count but keeps
//! its *note*, so a detail that must be visible every time belongs in the reason or action.
//!
//! **Notes must never contain secrets** — keeping them out is the caller's duty. As defense in
//! depth, a note containing a terdut key prefix (`tdsa_`, `tdik_`) is replaced before it
//! leaves the process, and the incident is logged as an error so the leaking call site is found.

use std::fmt;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, Recorder, Reporter};
use prometheus_client::metrics::counter::Counter;

pub use kube::runtime::events::EventType;

/// What replaces a note that contained a key.
pub const REDACTED_NOTE: &str = "<redacted: note contained a secret>";

/// Prefixes of terdut secrets (service-account keys and ingest keys).
const SECRET_MARKERS: [&str; 2] = ["tdsa_", "tdik_"];

/// The API rejects notes over 1 kB and reasons/actions over 128 characters.
const MAX_NOTE_BYTES: usize = 1024;
const MAX_WORD_BYTES: usize = 128;

/// An Event that cannot be published within this is dropped rather than stall a reconcile.
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(10);

/// Publishes Events as one reporting controller instance. Clones share the dedup cache.
#[derive(Clone)]
pub struct EventPublisher {
    recorder: Recorder,
    failures: Counter,
}

impl fmt::Debug for EventPublisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventPublisher")
            .field("failures", &self.failures.get())
            .finish_non_exhaustive()
    }
}

impl EventPublisher {
    /// `controller` is `reportingController` (e.g. `terdut.io/operator`), `instance` is
    /// `reportingInstance` (the pod name).
    pub fn new(client: Client, controller: impl Into<String>, instance: impl Into<String>) -> Self {
        let reporter = Reporter {
            controller: controller.into(),
            instance: Some(instance.into()),
        };
        Self {
            recorder: Recorder::new(client, reporter),
            failures: Counter::default(),
        }
    }

    /// Counts failures in `counter`, e.g. [`OperatorMetrics::event_failures`].
    ///
    /// [`OperatorMetrics::event_failures`]: super::metrics::OperatorMetrics::event_failures
    #[must_use]
    pub fn with_failure_counter(mut self, counter: Counter) -> Self {
        self.failures = counter;
        self
    }

    /// Events that could not be published so far.
    pub fn failures(&self) -> u64 {
        self.failures.get()
    }

    /// Publishes an Event about `regarding`. Never fails: errors are logged at warn and counted.
    pub async fn publish(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let note = guard_note(note, reason, action);
        tracing::debug!(
            object = ?regarding.name, namespace = ?regarding.namespace,
            ?type_, reason, action, note, "publishing event"
        );
        let event = Event {
            type_,
            reason: truncate(reason, MAX_WORD_BYTES).to_owned(),
            action: truncate(action, MAX_WORD_BYTES).to_owned(),
            note: Some(note),
            secondary: None,
        };
        let error =
            match tokio::time::timeout(PUBLISH_TIMEOUT, self.recorder.publish(&event, regarding))
                .await
            {
                Ok(Ok(())) => return,
                Ok(Err(error)) => error.to_string(),
                Err(_) => format!("timed out after {PUBLISH_TIMEOUT:?}"),
            };
        self.failures.inc();
        tracing::warn!(
            object = ?regarding.name, namespace = ?regarding.namespace,
            reason, %error, "publishing an event failed"
        );
    }
}

/// Replaces a note carrying a key, and cuts an over-long one to the API's limit.
fn guard_note(note: String, reason: &str, action: &str) -> String {
    if SECRET_MARKERS.iter().any(|m| note.contains(m)) {
        // Never log the note itself here: it is the secret.
        tracing::error!(
            reason,
            action,
            "event note contained a secret; replaced it (fix the call site)"
        );
        return REDACTED_NOTE.to_owned();
    }
    if note.len() <= MAX_NOTE_BYTES {
        return note;
    }
    let mut cut = truncate(&note, MAX_NOTE_BYTES - '…'.len_utf8()).to_owned();
    cut.push('…');
    cut
}

/// The longest prefix of `s` within `max` bytes that ends on a character boundary.
fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::{MAX_NOTE_BYTES, REDACTED_NOTE, guard_note};

    #[test]
    fn notes_with_keys_are_replaced() {
        let key = format!("tdsa_{}", "ab".repeat(24));
        assert_eq!(
            guard_note(format!("created key {key}"), "R", "A"),
            REDACTED_NOTE
        );
        assert_eq!(
            guard_note("ingest tdik_123".into(), "R", "A"),
            REDACTED_NOTE
        );
        assert_eq!(
            guard_note("created Secret demo-operator-key".into(), "R", "A"),
            "created Secret demo-operator-key"
        );
    }

    #[test]
    fn long_notes_are_cut_on_a_char_boundary() {
        let note = "é".repeat(MAX_NOTE_BYTES);
        let cut = guard_note(note, "R", "A");
        assert!(cut.len() <= MAX_NOTE_BYTES, "{}", cut.len());
        assert!(cut.ends_with('…'));
    }
}
