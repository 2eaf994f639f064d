//! The bodies of the test-only admin surface (docs/terdut-api.md "Stand-in admin surface"),
//! shared by the server side and [`AdminClient`](super::client::AdminClient). None carries a
//! key or token: the admin view can only say whether a key is live.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::wire::{Id, Kind, Ladder, Oidc, Switch};

/// `GET /admin/state`: everything the stand-in holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminState {
    pub users: Vec<String>,
    pub teams: Vec<AdminTeam>,
}

impl AdminState {
    pub fn team(&self, id: Id) -> Option<&AdminTeam> {
        self.teams.iter().find(|t| t.id == id)
    }

    pub fn team_by_external_id(&self, external_id: &str) -> Option<&AdminTeam> {
        self.teams.iter().find(|t| t.external_id == external_id)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminTeam {
    pub id: Id,
    pub name: String,
    pub external_id: String,
    pub oidc: Oidc,
    pub open_incidents: u32,
    pub ladder: Option<Ladder>,
    pub switches: Vec<Switch>,
    pub integrations: Vec<AdminIntegration>,
}

/// An integration as the admin sees it: no url, no key; `ingested` counts accepted payloads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminIntegration {
    pub id: Id,
    pub kind: Kind,
    pub name: String,
    pub external_id: String,
    pub ingested: u64,
}

/// `POST /admin/integrations/key-check` answer: whether a key (e.g. read from a webhook
/// Secret) belongs to a live integration, and which.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyCheck {
    pub live: bool,
    pub integration_id: Option<Id>,
    pub team_id: Option<Id>,
}

/// `POST /admin/integrations/key-check` body. Its `Debug` hides the key.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyCheckRequest {
    pub key: String,
}

impl std::fmt::Debug for KeyCheckRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyCheckRequest { key: <redacted> }")
    }
}

/// `POST /admin/users` body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsersBody {
    pub usernames: Vec<String>,
}

/// `PUT /admin/teams/{id}/open-incidents` body; 0 clears.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenIncidentsBody {
    pub count: u32,
}

/// One fault rule (`POST /admin/faults`). `endpoint` is a pattern over call labels
/// `"METHOD /route/{template}"`: exact, `*` for every call, a trailing `*` for a prefix
/// (`"* /api/v1/teams*"`), and `*` as the method for any method. For a matching call, the
/// latencies of every matching rule add up; then the first rule that fires decides, checked
/// in this order: `reset_next`, `fail_next`, `reset_rate`, `error_rate`, `oversize_bytes`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FaultRule {
    pub endpoint: String,
    /// Fixed delay before the call is handled.
    pub latency_ms: u64,
    /// Extra random delay, uniform in `0..=jitter_ms`.
    pub jitter_ms: u64,
    /// Probability (0..=1) that a call is answered with `status`.
    pub error_rate: f64,
    /// The status of an injected error; 500 when absent.
    pub status: Option<u16>,
    /// The next N matching calls are answered with `status`.
    pub fail_next: u32,
    /// The next N matching calls get their connection closed without an answer.
    pub reset_next: u32,
    /// Probability (0..=1) that a call gets its connection closed without an answer.
    pub reset_rate: f64,
    /// When not 0: every matching call is answered 200 with a body of this many bytes, sent
    /// in chunks with no declared length (a hostile or broken server; the operator's client
    /// must stop reading at its limit).
    pub oversize_bytes: u64,
    /// With `oversize_bytes`: how long the body stays open after its last byte, so a client
    /// holds what it read (a server trickling its answers).
    #[serde(default)]
    pub oversize_stall_ms: u64,
}

impl FaultRule {
    pub fn new(endpoint: impl Into<String>) -> Self {
        Self {
            endpoint: endpoint.into(),
            ..Self::default()
        }
    }

    pub fn latency_ms(mut self, ms: u64) -> Self {
        self.latency_ms = ms;
        self
    }

    pub fn jitter_ms(mut self, ms: u64) -> Self {
        self.jitter_ms = ms;
        self
    }

    pub fn error_rate(mut self, rate: f64, status: u16) -> Self {
        self.error_rate = rate;
        self.status = Some(status);
        self
    }

    pub fn fail_next(mut self, calls: u32, status: u16) -> Self {
        self.fail_next = calls;
        self.status = Some(status);
        self
    }

    pub fn reset_next(mut self, calls: u32) -> Self {
        self.reset_next = calls;
        self
    }

    pub fn reset_rate(mut self, rate: f64) -> Self {
        self.reset_rate = rate;
        self
    }

    pub fn oversize_bytes(mut self, bytes: u64) -> Self {
        self.oversize_bytes = bytes;
        self
    }

    pub fn oversize_stall_ms(mut self, ms: u64) -> Self {
        self.oversize_stall_ms = ms;
        self
    }
}

/// A rule as stored, with the id that removes it and how many calls it failed or reset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fault {
    pub id: u64,
    #[serde(flatten)]
    pub rule: FaultRule,
    /// Calls this rule answered with an error or reset (delays alone do not count).
    #[serde(default)]
    pub fired: u64,
}

/// `POST /admin/faults` answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultCreated {
    pub id: u64,
}

/// `GET /admin/calls`: calls received per endpoint label, admin calls excluded, faulted ones
/// included (they did arrive).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CallCounts(pub BTreeMap<String, u64>);

impl CallCounts {
    pub fn get(&self, endpoint: &str) -> u64 {
        self.0.get(endpoint).copied().unwrap_or(0)
    }

    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// Calls that can change state: every `/api/` call but GETs and ingest. "The operator made
    /// no writes" is `writes() == 0`.
    pub fn writes(&self) -> u64 {
        self.0
            .iter()
            .filter(|(label, _)| {
                !label.starts_with("GET ")
                    && label.contains(" /api/")
                    && !label.contains("/api/v1/ingest/")
            })
            .map(|(_, n)| n)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_exclude_reads_and_ingest() {
        let counts = CallCounts(BTreeMap::from([
            ("GET /api/v1/teams/{id}".to_owned(), 3),
            ("POST /api/v1/teams".to_owned(), 2),
            ("DELETE /api/v1/teams/{id}".to_owned(), 1),
            ("POST /api/v1/ingest/{kind}/{token}".to_owned(), 5),
            ("GET /healthz".to_owned(), 9),
        ]));
        assert_eq!(counts.writes(), 3);
        assert_eq!(counts.total(), 20);
        assert_eq!(counts.get("GET /readyz"), 0);
    }

    #[test]
    fn fault_rule_json_is_flat_with_defaults() {
        let f: Fault = serde_json::from_str(r#"{"id":1,"endpoint":"*","fail_next":2}"#).unwrap();
        assert_eq!(f.rule.fail_next, 2);
        assert_eq!(f.rule.status, None);
    }
}
