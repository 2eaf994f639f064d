//! [`TerdutClient`]: one per TerdutServer, holding its base URL and operator key (docs/design.md
//! §6), with a method for every row of docs/terdut-api.md. Each method returns the row's typed
//! result or an [`ApiError`] classifying the answer; every call is counted and timed in
//! [`ApiMetrics`].

use std::fmt;
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use reqwest::header::{CONTENT_TYPE, HeaderValue};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::Semaphore;
use zeroize::Zeroizing;

use super::budget::{AnswerBudget, Reservation, ServerShare};
use super::endpoint::Endpoint;
use super::error::{ApiError, TransientCause};
use super::metrics::ApiMetrics;
use super::secret::OperatorKey;
use super::wire::{
    CreatedIntegration, Deletion, Id, Integration, IntegrationCreate, IntegrationPatch, Ladder,
    NameBody, NewIntegration, NewTeam, OidcGroups, Switch, SwitchSpec, Team, TeamCreate, WhoAmI,
};

/// Installs ring as the process-wide rustls crypto provider, once. reqwest is built with
/// `rustls-no-provider` (one provider in the binary, shared with kube), so a client cannot be
/// built before this ran; [`TerdutClient::new`] calls it. Installing when another provider is
/// already in place is not an error: that one is kept.
pub fn init_tls() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _already_installed = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The most of a response body the client reads. The largest answer of the contract (a team's
/// switches, an escalation ladder) is a few KiB; an unbounded read let one hostile server fill
/// the operator's memory (docs/security.md). What all answers being read hold at once is
/// bounded too, per server and for the process ([`AnswerBudget`]).
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// How to reach one terdut-server.
#[derive(Clone)]
pub struct ClientConfig {
    base_url: String,
    key: OperatorKey,
    connect_timeout: Duration,
    request_timeout: Duration,
    max_in_flight: usize,
    metrics: Option<ApiMetrics>,
    budget: AnswerBudget,
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientConfig")
            .field("base_url", &self.base_url)
            .field("key", &self.key)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("max_in_flight", &self.max_in_flight)
            .finish_non_exhaustive()
    }
}

impl ClientConfig {
    /// In-cluster the Service answers in milliseconds; 5s to connect covers a restarting pod's
    /// endpoints being re-published.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
    /// Long enough for a slow database write, short enough that a hung server does not stall a
    /// reconcile for long.
    pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
    /// Requests one client (one terdut-server) has open at once; more wait for a slot. Every
    /// team and source pass runs concurrently (one actor each), so without a bound a cold
    /// start or resync of 10,000 teams opened 10,000 connections to one server (the benchmark
    /// ran out of file descriptors, and each idle connection's buffers stayed in the RSS).
    pub const DEFAULT_MAX_IN_FLIGHT: usize = 64;

    /// `base_url` is `http(s)://host[:port][/prefix]` (terdut-api.md "Transport").
    pub fn new(base_url: impl Into<String>, key: OperatorKey) -> Self {
        Self {
            base_url: base_url.into(),
            key,
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            request_timeout: Self::DEFAULT_REQUEST_TIMEOUT,
            max_in_flight: Self::DEFAULT_MAX_IN_FLIGHT,
            metrics: None,
            budget: AnswerBudget::process(),
        }
    }

    /// The budget this client's answers count against (by default the process's one).
    pub fn answer_budget(mut self, budget: AnswerBudget) -> Self {
        self.budget = budget;
        self
    }

    /// See [`Self::DEFAULT_MAX_IN_FLIGHT`] (at least 1).
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = n.max(1);
        self
    }

    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The whole request, from sending to the last byte of the body.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    pub fn metrics(mut self, metrics: ApiMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }
}

/// A client of one terdut-server. Cheap to clone (the connection pool is shared).
#[derive(Clone)]
pub struct TerdutClient {
    http: reqwest::Client,
    base_url: String,
    key: OperatorKey,
    connect_timeout: Duration,
    request_timeout: Duration,
    /// Slots for requests in flight (see [`ClientConfig::DEFAULT_MAX_IN_FLIGHT`]).
    in_flight: Arc<Semaphore>,
    /// This server's share of the answer budget.
    answers: ServerShare,
    metrics: Option<ApiMetrics>,
}

impl fmt::Debug for TerdutClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TerdutClient")
            .field("base_url", &self.base_url)
            .field("key", &self.key)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .finish_non_exhaustive()
    }
}

/// A response as far as the transport is concerned: its status and whole body, and the part of
/// the answer budget the body holds until the answer is interpreted.
struct Raw {
    status: u16,
    /// Zeroed when dropped: an integration's create answer carries its webhook URL and key.
    body: Zeroizing<Vec<u8>>,
    _held: Reservation,
}

impl TerdutClient {
    /// How long an idle connection stays open for the next request.
    pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

    /// Builds the client. Fails with [`ApiError::Config`] for a base URL that is not http(s).
    pub fn new(config: ClientConfig) -> Result<Self, ApiError> {
        init_tls();
        let base_url = normalize_base_url(&config.base_url)?;
        let http = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .timeout(config.request_timeout)
            // A redirect is not part of the contract; following one could carry the key to
            // another host.
            .redirect(reqwest::redirect::Policy::none())
            // No more idle connections than requests may be in flight.
            .pool_max_idle_per_host(config.max_in_flight)
            // An idle connection holds ~22 KB of buffers: a burst (a relist, a cold start)
            // left up to 64 of them for reqwest's default 90 s; in steady state passes are
            // minutes apart, so they are closed soon after the burst (docs/performance.md run 18).
            .pool_idle_timeout(Self::POOL_IDLE_TIMEOUT)
            .user_agent(concat!("terdut-operator/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(ApiError::from_transport)?;
        Ok(Self {
            http,
            base_url,
            key: config.key,
            connect_timeout: config.connect_timeout,
            request_timeout: config.request_timeout,
            in_flight: Arc::new(Semaphore::new(config.max_in_flight)),
            answers: config.budget.share(),
            metrics: config.metrics,
        })
    }

    /// The base URL calls go to (no secret: the key is never part of it).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    // ---- process -------------------------------------------------------------------------

    /// `GET /healthz`: the process is alive. Unauthenticated.
    pub async fn healthz(&self) -> Result<(), ApiError> {
        self.call(Endpoint::Healthz, &[], None, expect_empty(&[200]))
            .await
    }

    /// `GET /readyz`: the server and its database are ready. Unauthenticated.
    pub async fn readyz(&self) -> Result<(), ApiError> {
        self.call(Endpoint::Readyz, &[], None, expect_empty(&[200]))
            .await
    }

    /// `GET /api/v1/whoami`: proves the key works before acting (terdut-api.md, assumption).
    pub async fn whoami(&self) -> Result<WhoAmI, ApiError> {
        self.call(Endpoint::WhoAmI, &[], None, expect_json(&[200]))
            .await
    }

    // ---- teams ---------------------------------------------------------------------------

    /// `POST /api/v1/teams`: creates the team, or finds the one with this `external_id`
    /// (returned as is, name untouched). The idempotent step every reconcile repeats
    /// (docs/design.md §5).
    pub async fn create_team(&self, name: &str, external_id: &str) -> Result<TeamCreate, ApiError> {
        let body = NewTeam {
            name: name.to_owned(),
            external_id: external_id.to_owned(),
        };
        self.call(
            Endpoint::CreateTeam,
            &[],
            Some(json_body(&body)?),
            |raw| match raw.status {
                201 => decode(&raw.body).map(TeamCreate::Created),
                200 => decode(&raw.body).map(TeamCreate::Found),
                _ => Err(error_for(&raw)),
            },
        )
        .await
    }

    /// `GET /api/v1/teams/{id}`.
    pub async fn get_team(&self, team: Id) -> Result<Team, ApiError> {
        self.call(Endpoint::GetTeam, &[team], None, expect_json(&[200]))
            .await
    }

    /// `PUT /api/v1/teams/{id}/name`; [`ApiError::TeamNameTaken`] when another team has it.
    pub async fn rename_team(&self, team: Id, name: &str) -> Result<Team, ApiError> {
        let body = NameBody {
            name: name.to_owned(),
        };
        self.call(
            Endpoint::RenameTeam,
            &[team],
            Some(json_body(&body)?),
            expect_json(&[200]),
        )
        .await
    }

    /// `PUT /api/v1/teams/{id}/oidc-groups`; a `None` group clears it.
    pub async fn set_oidc_groups(&self, team: Id, groups: &OidcGroups) -> Result<Team, ApiError> {
        self.call(
            Endpoint::SetOidcGroups,
            &[team],
            Some(json_body(groups)?),
            expect_json(&[200]),
        )
        .await
    }

    /// `DELETE /api/v1/teams/{id}`: removes the team with its ladder, switches and
    /// integrations. [`ApiError::OpenIncidents`] while it has open incidents.
    pub async fn delete_team(&self, team: Id) -> Result<Deletion, ApiError> {
        self.call(Endpoint::DeleteTeam, &[team], None, expect_deletion)
            .await
    }

    // ---- escalation ladder ---------------------------------------------------------------

    /// `GET /api/v1/teams/{id}/escalation`; `None` on 404. The contract answers 404 both for a
    /// team without a ladder and for a missing team, so `None` means either.
    pub async fn get_escalation(&self, team: Id) -> Result<Option<Ladder>, ApiError> {
        self.call(Endpoint::GetEscalation, &[team], None, |raw| {
            match raw.status {
                200 => decode(&raw.body).map(Some),
                404 => Ok(None),
                _ => Err(error_for(&raw)),
            }
        })
        .await
    }

    /// `PUT /api/v1/teams/{id}/escalation`: replaces the whole ladder. The server resolves
    /// usernames: [`ApiError::UnknownUser`] names the first it does not know.
    pub async fn put_escalation(&self, team: Id, ladder: &Ladder) -> Result<Ladder, ApiError> {
        self.call(
            Endpoint::PutEscalation,
            &[team],
            Some(json_body(ladder)?),
            expect_json(&[200]),
        )
        .await
    }

    /// `DELETE /api/v1/teams/{id}/escalation`: idempotent, 204 also when there is none.
    pub async fn delete_escalation(&self, team: Id) -> Result<(), ApiError> {
        self.call(
            Endpoint::DeleteEscalation,
            &[team],
            None,
            expect_empty(&[204, 200]),
        )
        .await
    }

    // ---- dead man's switches -------------------------------------------------------------

    /// `GET /api/v1/teams/{id}/deadman-switches`.
    pub async fn list_switches(&self, team: Id) -> Result<Vec<Switch>, ApiError> {
        self.call(Endpoint::ListSwitches, &[team], None, expect_json(&[200]))
            .await
    }

    /// `POST /api/v1/teams/{id}/deadman-switches`; [`ApiError::SwitchNameTaken`] for a name
    /// the team already has.
    pub async fn create_switch(&self, team: Id, spec: &SwitchSpec) -> Result<Switch, ApiError> {
        self.call(
            Endpoint::CreateSwitch,
            &[team],
            Some(json_body(spec)?),
            expect_json(&[201]),
        )
        .await
    }

    /// `PUT /api/v1/teams/{id}/deadman-switches/{sid}`: updates in place (docs/design.md §5).
    pub async fn update_switch(
        &self,
        team: Id,
        switch: Id,
        spec: &SwitchSpec,
    ) -> Result<Switch, ApiError> {
        self.call(
            Endpoint::UpdateSwitch,
            &[team, switch],
            Some(json_body(spec)?),
            expect_json(&[200]),
        )
        .await
    }

    /// `DELETE /api/v1/teams/{id}/deadman-switches/{sid}`.
    pub async fn delete_switch(&self, team: Id, switch: Id) -> Result<Deletion, ApiError> {
        self.call(
            Endpoint::DeleteSwitch,
            &[team, switch],
            None,
            expect_deletion,
        )
        .await
    }

    // ---- integrations --------------------------------------------------------------------

    /// `POST /api/v1/teams/{id}/integrations`. [`IntegrationCreate::Created`] carries the
    /// webhook URL and key, shown this once (docs/design.md §4.5); [`IntegrationCreate::Existing`]
    /// is the integration this `external_id` already names, without them.
    pub async fn create_integration(
        &self,
        team: Id,
        new: &NewIntegration,
    ) -> Result<IntegrationCreate, ApiError> {
        self.call(
            Endpoint::CreateIntegration,
            &[team],
            Some(json_body(new)?),
            |raw| match raw.status {
                201 => decode::<CreatedIntegration>(&raw.body).map(IntegrationCreate::Created),
                200 => decode::<Integration>(&raw.body).map(IntegrationCreate::Existing),
                _ => Err(error_for(&raw)),
            },
        )
        .await
    }

    /// `GET /api/v1/teams/{id}/integrations/{iid}` (never url or key).
    pub async fn get_integration(
        &self,
        team: Id,
        integration: Id,
    ) -> Result<Integration, ApiError> {
        self.call(
            Endpoint::GetIntegration,
            &[team, integration],
            None,
            expect_json(&[200]),
        )
        .await
    }

    /// `PATCH /api/v1/teams/{id}/integrations/{iid}`: renames; the key is unchanged.
    pub async fn rename_integration(
        &self,
        team: Id,
        integration: Id,
        patch: &IntegrationPatch,
    ) -> Result<Integration, ApiError> {
        self.call(
            Endpoint::RenameIntegration,
            &[team, integration],
            Some(json_body(patch)?),
            expect_json(&[200]),
        )
        .await
    }

    /// `DELETE /api/v1/teams/{id}/integrations/{iid}`: the webhook key dies with it.
    pub async fn delete_integration(
        &self,
        team: Id,
        integration: Id,
    ) -> Result<Deletion, ApiError> {
        self.call(
            Endpoint::DeleteIntegration,
            &[team, integration],
            None,
            expect_deletion,
        )
        .await
    }

    // ---- plumbing ------------------------------------------------------------------------

    /// Sends one call, interprets the answer and records it. The only place a request leaves.
    async fn call<T>(
        &self,
        endpoint: Endpoint,
        ids: &[Id],
        body: Option<Vec<u8>>,
        interpret: impl FnOnce(Raw) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        // Waiting for a slot is not the server's latency: the clock starts once it has one.
        // The semaphore is never closed, so `acquire` cannot fail.
        let _slot = self.in_flight.acquire().await.ok();
        let started = Instant::now();
        let result = match self.send(endpoint, ids, body).await {
            Ok(raw) => interpret(raw),
            Err(e) => Err(e),
        };
        let took = started.elapsed();
        let outcome = match &result {
            Ok(_) => "ok",
            Err(e) => e.category(),
        };
        if let Some(metrics) = &self.metrics {
            metrics.observe(endpoint.template(), outcome, took);
        }
        match &result {
            Ok(_) => tracing::debug!(
                endpoint = endpoint.template(),
                outcome,
                took_ms = took.as_millis() as u64,
                "terdut-server call"
            ),
            Err(error) => tracing::debug!(
                endpoint = endpoint.template(),
                outcome,
                took_ms = took.as_millis() as u64,
                %error,
                "terdut-server call failed"
            ),
        }
        result
    }

    async fn send(
        &self,
        endpoint: Endpoint,
        ids: &[Id],
        body: Option<Vec<u8>>,
    ) -> Result<Raw, ApiError> {
        let url = format!("{}{}", self.base_url, endpoint.path(ids));
        let mut request = self.http.request(endpoint.method(), url);
        if endpoint.authenticated() {
            // reqwest marks this header sensitive, so not even its own Debug shows it.
            request = request.bearer_auth(self.key.expose());
        }
        if let Some(body) = body {
            request = request
                .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                .body(body);
        }
        // reqwest's own timeout covers the body only while it is being polled, and a read
        // waiting for the answer budget polls nothing: the whole read is bounded here too,
        // or answers that each hold part of a spent share would wait on each other forever.
        let deadline = tokio::time::Instant::now() + self.request_timeout;
        let response = request.send().await.map_err(ApiError::from_transport)?;
        let status = response.status().as_u16();
        let mut held = self.answers.reserve();
        let read = read_capped(response, MAX_RESPONSE_BYTES, &mut held);
        let body = tokio::time::timeout_at(deadline, read)
            .await
            .map_err(|_| ApiError::Transient {
                cause: TransientCause::Timeout,
                detail: "the answer was not read within the request timeout (a slow body, or \
                         this server's share of the answer budget stayed spent)"
                    .to_owned(),
            })??;
        Ok(Raw {
            status,
            body,
            _held: held,
        })
    }
}

/// Reads the body chunk by chunk and stops at `limit`: a declared length past it is refused
/// before anything is read, an undeclared one as soon as the chunks pass it. Every byte is
/// covered by `held` before it is kept: a declared length up front, else chunk by chunk.
async fn read_capped(
    mut response: reqwest::Response,
    limit: usize,
    held: &mut Reservation,
) -> Result<Zeroizing<Vec<u8>>, ApiError> {
    let declared = response.content_length();
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::TooLarge { limit });
    }
    if let Some(n) = declared {
        held.cover(n as usize).await;
    }
    let mut body = Zeroizing::new(Vec::with_capacity(declared.unwrap_or(0) as usize));
    while let Some(chunk) = response.chunk().await.map_err(ApiError::from_transport)? {
        if body.len() + chunk.len() > limit {
            return Err(ApiError::TooLarge { limit });
        }
        held.cover(body.len() + chunk.len()).await;
        append(&mut body, &chunk);
    }
    Ok(body)
}

/// Appends `chunk`, growing the buffer into a new one rather than letting `Vec` reallocate:
/// the old buffer is zeroed as it is dropped, so no copy of a key stays behind in the heap.
fn append(body: &mut Zeroizing<Vec<u8>>, chunk: &[u8]) {
    let needed = body.len() + chunk.len();
    if needed > body.capacity() {
        let mut grown = Zeroizing::new(Vec::with_capacity(needed.max(body.capacity() * 2)));
        grown.extend_from_slice(body);
        std::mem::swap(body, &mut grown);
    }
    body.extend_from_slice(chunk);
}

fn normalize_base_url(raw: &str) -> Result<String, ApiError> {
    let url = reqwest::Url::parse(raw).map_err(|e| ApiError::Config {
        message: format!("base URL is not a URL: {e}"),
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(ApiError::Config {
            message: "base URL must be http(s)://host[:port]".into(),
        });
    }
    if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() {
        return Err(ApiError::Config {
            message: "base URL must not carry a query, fragment or credentials".into(),
        });
    }
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

fn json_body<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, ApiError> {
    serde_json::to_vec(value).map_err(|e| ApiError::Config {
        message: format!("request body does not serialize: {e}"),
    })
}

/// Decodes a success body. The error names only where decoding failed, never a value: the
/// body may hold a webhook key.
fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::Decode {
        detail: format!(
            "{:?} error at line {} column {}",
            e.classify(),
            e.line(),
            e.column()
        ),
    })
}

fn error_for(raw: &Raw) -> ApiError {
    if (200..300).contains(&raw.status) {
        // A success status the row does not list.
        ApiError::Unexpected {
            status: raw.status,
            code: None,
        }
    } else {
        ApiError::from_response(raw.status, &raw.body)
    }
}

fn expect_json<T: DeserializeOwned>(ok: &'static [u16]) -> impl FnOnce(Raw) -> Result<T, ApiError> {
    move |raw| {
        if ok.contains(&raw.status) {
            decode(&raw.body)
        } else {
            Err(error_for(&raw))
        }
    }
}

fn expect_empty(ok: &'static [u16]) -> impl FnOnce(Raw) -> Result<(), ApiError> {
    move |raw| {
        if ok.contains(&raw.status) {
            Ok(())
        } else {
            Err(error_for(&raw))
        }
    }
}

/// 204 deleted; 404 already gone, which a finalizer counts as done (docs/design.md §5).
fn expect_deletion(raw: Raw) -> Result<Deletion, ApiError> {
    match raw.status {
        204 | 200 => Ok(Deletion::Deleted),
        404 => Ok(Deletion::AlreadyGone),
        _ => Err(error_for(&raw)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_url_is_normalized_and_checked() {
        assert_eq!(
            normalize_base_url("http://terdut.ns.svc:8080/").unwrap(),
            "http://terdut.ns.svc:8080"
        );
        assert_eq!(
            normalize_base_url("https://x.example/prefix/").unwrap(),
            "https://x.example/prefix"
        );
        for bad in ["ftp://x", "not a url", "http://u:p@x", "http://x/?a=1"] {
            assert!(
                matches!(normalize_base_url(bad), Err(ApiError::Config { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn debug_shows_no_key() {
        let key = OperatorKey::from("tdsa_ffffffffffffffffffffffffffffffffffffffffffffffff");
        let config = ClientConfig::new("https://terdut.example", key);
        let client = TerdutClient::new(config.clone()).unwrap();
        for dbg in [format!("{config:?}"), format!("{client:?}")] {
            assert!(!dbg.contains("tdsa_"), "{dbg}");
            assert!(dbg.contains("<redacted>"), "{dbg}");
        }
    }
}
