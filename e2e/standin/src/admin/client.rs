//! [`AdminClient`]: the typed client of the admin surface that tests and the e2e harness use
//! to seed the stand-in, read it back and inject faults.

use std::time::Duration;

use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::types::{
    AdminState, CallCounts, Fault, FaultCreated, FaultRule, KeyCheck, KeyCheckRequest,
    OpenIncidentsBody, UsersBody,
};
use crate::wire::Id;

/// Why an admin call failed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("admin call {what} failed: {source}")]
    Transport {
        what: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("admin call {what} answered HTTP {status}: {body}")]
    Status {
        what: String,
        status: u16,
        body: String,
    },
}

/// A client of one stand-in's `/admin/` surface.
#[derive(Clone)]
pub struct AdminClient {
    http: reqwest::Client,
    base_url: String,
    token: Option<String>,
}

impl std::fmt::Debug for AdminClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminClient")
            .field("base_url", &self.base_url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl AdminClient {
    /// `base_url` is the stand-in's, e.g. `http://127.0.0.1:8080`; `token` the admin token
    /// when one is configured.
    pub fn new(base_url: impl Into<String>, token: Option<String>) -> Self {
        crate::init_tls();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("a reqwest client with only a timeout set builds");
        Self {
            http,
            base_url: base_url.into().trim_end_matches('/').to_owned(),
            token,
        }
    }

    /// Everything the stand-in holds (no keys).
    pub async fn state(&self) -> Result<AdminState, AdminError> {
        self.json(Method::GET, "/admin/state", None::<&()>).await
    }

    /// Forgets all state, faults and call counts (the operator key stays).
    pub async fn reset(&self) -> Result<(), AdminError> {
        self.empty(Method::POST, "/admin/reset", None::<&()>).await
    }

    /// Adds users the server then knows (for `unknown_user` resolution).
    pub async fn seed_users<I, S>(&self, usernames: I) -> Result<(), AdminError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let body = UsersBody {
            usernames: usernames.into_iter().map(Into::into).collect(),
        };
        self.empty(Method::POST, "/admin/users", Some(&body)).await
    }

    pub async fn remove_user(&self, username: &str) -> Result<(), AdminError> {
        let path = format!("/admin/users/{}", encode_segment(username));
        self.empty(Method::DELETE, &path, None::<&()>).await
    }

    /// Sets the team's open incidents; while non-zero its DELETE is refused (409).
    pub async fn set_open_incidents(&self, team: Id, count: u32) -> Result<(), AdminError> {
        let path = format!("/admin/teams/{team}/open-incidents");
        self.empty(Method::PUT, &path, Some(&OpenIncidentsBody { count }))
            .await
    }

    /// Whether `key` is the key of a live integration.
    pub async fn key_check(&self, key: &str) -> Result<KeyCheck, AdminError> {
        let body = KeyCheckRequest {
            key: key.to_owned(),
        };
        self.json(Method::POST, "/admin/integrations/key-check", Some(&body))
            .await
    }

    /// Calls received per endpoint label since start or the last reset.
    pub async fn calls(&self) -> Result<CallCounts, AdminError> {
        self.json(Method::GET, "/admin/calls", None::<&()>).await
    }

    /// The calls received, in order (`"METHOD /path"`; ingest calls by route template only).
    pub async fn call_log(&self) -> Result<Vec<String>, AdminError> {
        self.json(Method::GET, "/admin/calls/log", None::<&()>)
            .await
    }

    pub async fn reset_calls(&self) -> Result<(), AdminError> {
        self.empty(Method::DELETE, "/admin/calls", None::<&()>)
            .await
    }

    /// Adds a fault rule; returns its id.
    pub async fn add_fault(&self, rule: &FaultRule) -> Result<u64, AdminError> {
        let created: FaultCreated = self.json(Method::POST, "/admin/faults", Some(rule)).await?;
        Ok(created.id)
    }

    pub async fn faults(&self) -> Result<Vec<Fault>, AdminError> {
        self.json(Method::GET, "/admin/faults", None::<&()>).await
    }

    pub async fn remove_fault(&self, id: u64) -> Result<(), AdminError> {
        self.empty(Method::DELETE, &format!("/admin/faults/{id}"), None::<&()>)
            .await
    }

    pub async fn clear_faults(&self) -> Result<(), AdminError> {
        self.empty(Method::DELETE, "/admin/faults", None::<&()>)
            .await
    }

    async fn send<B: Serialize>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<reqwest::Response, AdminError> {
        let what = format!("{method} {path}");
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base_url));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request
            .send()
            .await
            .map_err(|source| AdminError::Transport {
                what: what.clone(),
                source: source.without_url(),
            })?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body = response.text().await.unwrap_or_default();
        Err(AdminError::Status {
            what,
            status: status.as_u16(),
            body,
        })
    }

    async fn json<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<T, AdminError> {
        let what = format!("{method} {path}");
        self.send(method, path, body)
            .await?
            .json()
            .await
            .map_err(|source| AdminError::Transport {
                what,
                source: source.without_url(),
            })
    }

    async fn empty<B: Serialize>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<(), AdminError> {
        self.send(method, path, body).await.map(|_| ())
    }
}

/// Percent-encodes one path segment (usernames are plain, but a test may try odd ones).
fn encode_segment(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
