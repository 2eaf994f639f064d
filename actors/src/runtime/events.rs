//! Kubernetes Events (events.k8s.io/v1) for every externally visible action.
//!
//! Repeats of the same (object, type, reason, action) within six minutes are folded into one
//! Event series, as kube's `Recorder` does, but with a compact cache of its own
//! ([`event_series`](super::event_series): the `Recorder` kept a clone of every Event, which
//! cost more per team than the cached TerdutTeam itself). Publishing never fails the caller
//! (an Event is a courtesy to the user, not part of the reconcile), failures are logged and
//! counted, every call is bounded by a timeout, and notes are kept within the API's limits.
//!
//! Caveat of that folding: a repeat within the window bumps the first Event's count but keeps
//! its *note*, so a detail that must be visible every time belongs in the reason or action.
//!
//! **Notes must never contain secrets** — keeping them out is the caller's duty. As defense in
//! depth, a note containing a terdut key prefix (`tdsa_`, `tdik_`) is replaced before it
//! leaves the process, and the incident is logged as an error so the leaking call site is found.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use prometheus_client::metrics::counter::Counter;
use serde_json::json;

use super::event_series::{Published, SeriesCache, SeriesKey};

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

/// Publishes Events as one reporting controller instance. Clones share the series cache.
#[derive(Clone)]
pub struct EventPublisher {
    client: Client,
    controller: String,
    instance: String,
    series: Arc<Mutex<SeriesCache>>,
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
        Self {
            client,
            controller: controller.into(),
            instance: instance.into(),
            series: Arc::default(),
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
        let reason = truncate(reason, MAX_WORD_BYTES);
        let action = truncate(action, MAX_WORD_BYTES);
        let error = match tokio::time::timeout(
            PUBLISH_TIMEOUT,
            self.send(regarding, type_, reason, action, note),
        )
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

    /// A repeat within the window bumps its series; anything else is a new Event.
    async fn send(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) -> Result<(), kube::Error> {
        let type_ = match type_ {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        };
        let key = SeriesKey::of(type_, reason, action, regarding);
        let now = Timestamp::now();
        let repeat = self.lock().repeat(key, now);
        if let Some(published) = repeat {
            match self.bump(&published, now).await {
                Err(kube::Error::Api(e)) if e.code == 404 => self.lock().forget(key),
                other => return other,
            }
        }
        let event = self.event(regarding, type_, reason, action, note, now);
        let namespace = event.metadata.namespace.clone().unwrap_or_default();
        let created = Api::<Event>::namespaced(self.client.clone(), &namespace)
            .create(&PostParams::default(), &event)
            .await?;
        let name = created.metadata.name.unwrap_or_default();
        self.lock().record(key, namespace, name, now);
        Ok(())
    }

    /// Counts one more occurrence on the published Event (its note stays the first one's).
    async fn bump(&self, published: &Published, now: Timestamp) -> Result<(), kube::Error> {
        let series = EventSeries {
            count: published.count,
            last_observed_time: MicroTime(now),
        };
        Api::<Event>::namespaced(self.client.clone(), &published.namespace)
            .patch(
                &published.name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "series": series })),
            )
            .await
            .map(drop)
    }

    fn event(
        &self,
        regarding: &ObjectReference,
        type_: &str,
        reason: &str,
        action: &str,
        note: String,
        now: Timestamp,
    ) -> Event {
        // Cluster-scoped objects get their Events in `default`, as with kube's Recorder.
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let base = regarding.name.as_deref().unwrap_or(&self.controller);
        Event {
            action: Some(action.to_owned()),
            reason: Some(reason.to_owned()),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            note: Some(note),
            metadata: ObjectMeta {
                namespace: Some(namespace),
                name: Some(format!("{base}.{:x}", now.as_nanosecond())),
                ..ObjectMeta::default()
            },
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(type_.to_owned()),
            ..Event::default()
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SeriesCache> {
        // The cache holds no invariant a panicking holder could break halfway.
        self.series.lock().unwrap_or_else(|p| p.into_inner())
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
