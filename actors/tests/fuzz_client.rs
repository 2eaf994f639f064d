//! Bad input to the terdut-server API client: random status codes, random and
//! truncated bodies, valid JSON of the wrong shape, contract-shaped errors carrying
//! secret-looking text, bodies cut short of their `Content-Length`, huge bodies, silence and
//! resets. Each case is served by a raw HTTP/1.1 server on 127.0.0.1 and read through the real
//! `TerdutClient` (reqwest, then the client's own classification).
//!
//! Properties, for every endpoint:
//! - no panic; an answer is `Ok` or a typed [`ApiError`];
//! - the classification follows terdut-api.md: 5xx and 429 are `Transient` and retryable; 401
//!   is `Unauthorized` (retryable: a rolling key, docs/design.md §6); 409 `team_has_open_incidents`
//!   is retryable; every other 4xx, every 3xx and every unexpected 2xx is not; a listed success
//!   with a body of the wrong shape is `Decode` (not retryable); a body cut short is a
//!   retryable transport failure; 404 is success for deletions and "no ladder" for the ladder;
//! - neither an error's `Display` nor its `Debug` (nor the `Debug` of a success) contains a
//!   key or webhook token the body carried.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use terdut_actors::api::{
    ApiError, ClientConfig, IntegrationKind, NewIntegration, OperatorKey, SwitchSpec, TerdutClient,
    TransientCause,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Secrets a body may carry; none may come out of the client in an error or a `Debug`.
const KEY: &str = "tdik_0123456789abcdef0123456789abcdef0123456789abcdef";
const OP_KEY: &str = "tdsa_fedcba9876543210fedcba9876543210fedcba9876543210";
const URL_TOKEN: &str = "Zq8sEcReTuRlToKeN0123456789";
fn url() -> String {
    format!("https://terdut.example/api/v1/ingest/generic/{URL_TOKEN}")
}
/// What must not show, in full or in part.
fn secret_fragments() -> [String; 5] {
    [
        KEY[5..].to_owned(),
        OP_KEY[5..].to_owned(),
        URL_TOKEN.to_owned(),
        KEY[5..25].to_owned(),
        OP_KEY[30..].to_owned(),
    ]
}

/// One canned answer.
#[derive(Clone, Debug)]
struct Answer {
    status: u16,
    body: Vec<u8>,
    /// Declare this many more bytes than are sent, then close: a body cut short.
    short_by: usize,
}

/// What the server does with the next connection.
#[derive(Clone, Debug)]
enum Mode {
    Answer(Answer),
    /// Read the request and never answer.
    Silent,
    /// Read the request and close the connection.
    Close,
}

struct Server {
    port: u16,
    mode: Arc<Mutex<Mode>>,
    rt: tokio::runtime::Runtime,
}

thread_local! {
    /// One server per test (tests run on threads of their own), so modes never mix.
    static SERVER: Server = Server::start();
}

/// Runs `f` with this test's server.
fn with_server<T>(f: impl FnOnce(&Server) -> T) -> T {
    SERVER.with(f)
}

impl Server {
    fn start() -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let mode = Arc::new(Mutex::new(Mode::Close));
        let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let port = listener.local_addr().unwrap().port();
        let m = mode.clone();
        rt.spawn(async move {
            loop {
                let (mut sock, _) = listener.accept().await.unwrap();
                let mode = m.lock().unwrap().clone();
                tokio::spawn(async move {
                    if read_request(&mut sock).await.is_none() {
                        return;
                    }
                    match mode {
                        Mode::Close => {}
                        Mode::Silent => tokio::time::sleep(Duration::from_secs(30)).await,
                        Mode::Answer(a) => {
                            let reason = "X";
                            let head = format!(
                                "HTTP/1.1 {} {reason}\r\ncontent-type: application/json\r\n\
                                 content-length: {}\r\nconnection: close\r\n\r\n",
                                a.status,
                                a.body.len() + a.short_by
                            );
                            let _ = sock.write_all(head.as_bytes()).await;
                            let _ = sock.write_all(&a.body).await;
                            let _ = sock.flush().await;
                        }
                    }
                    let _ = sock.shutdown().await;
                });
            }
        });
        Server { port, mode, rt }
    }

    fn set(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }
}

/// Reads one request (head and `content-length` body).
async fn read_request(sock: &mut tokio::net::TcpStream) -> Option<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some(())
}

fn client(port: u16, timeout: Duration) -> TerdutClient {
    TerdutClient::new(
        ClientConfig::new(
            format!("http://127.0.0.1:{port}"),
            OperatorKey::from(OP_KEY),
        )
        .connect_timeout(Duration::from_secs(2))
        .request_timeout(timeout),
    )
    .unwrap()
}

/// The endpoints exercised, and what each treats as success.
#[derive(Clone, Copy, Debug)]
enum Call {
    Healthz,
    WhoAmI,
    CreateTeam,
    GetTeam,
    DeleteTeam,
    GetEscalation,
    DeleteEscalation,
    ListSwitches,
    CreateSwitch,
    CreateIntegration,
    GetIntegration,
    DeleteIntegration,
}

const CALLS: [Call; 12] = [
    Call::Healthz,
    Call::WhoAmI,
    Call::CreateTeam,
    Call::GetTeam,
    Call::DeleteTeam,
    Call::GetEscalation,
    Call::DeleteEscalation,
    Call::ListSwitches,
    Call::CreateSwitch,
    Call::CreateIntegration,
    Call::GetIntegration,
    Call::DeleteIntegration,
];

impl Call {
    /// Success statuses whose body is decoded.
    fn decoded(self) -> &'static [u16] {
        match self {
            Self::WhoAmI | Self::GetTeam | Self::GetEscalation | Self::ListSwitches => &[200],
            Self::GetIntegration => &[200],
            Self::CreateTeam | Self::CreateIntegration => &[200, 201],
            Self::CreateSwitch => &[201],
            _ => &[],
        }
    }

    /// Statuses that are success without a body to decode.
    fn empty_ok(self) -> &'static [u16] {
        match self {
            Self::Healthz => &[200],
            Self::DeleteEscalation => &[200, 204],
            Self::DeleteTeam | Self::DeleteIntegration => &[200, 204, 404],
            Self::GetEscalation => &[404],
            _ => &[],
        }
    }

    /// A body of the right shape for a success status.
    fn good_body(self, status: u16) -> serde_json::Value {
        use serde_json::json;
        let team = json!({"id": 7, "name": "Platform", "external_id": "ns/p",
            "oidc": {"member_group": null, "owner_group": "g"}});
        let integration = json!({"id": 9, "kind": "generic", "name": "am", "external_id": "ns/am"});
        match self {
            Self::WhoAmI => json!({"account": "terdut-operator", "scope": "instance"}),
            Self::CreateTeam | Self::GetTeam => team,
            Self::GetEscalation => json!({"repeat_count": 1, "fallback_topic": null,
                "levels": [{"timeout_seconds": 300, "targets": [{"kind": "oncall"},
                    {"kind": "user", "username": "alice"}]}]}),
            Self::ListSwitches => json!([{"id": 1, "name": "w", "matcher": "a=b",
                "timeout_seconds": 60, "severity": "critical"}]),
            Self::CreateSwitch => json!({"id": 1, "name": "w", "matcher": "a=b",
                "timeout_seconds": 60, "severity": "critical"}),
            Self::CreateIntegration if status == 201 => {
                let mut v = integration;
                v["url"] = json!(url());
                v["key"] = json!(KEY);
                v
            }
            Self::CreateIntegration | Self::GetIntegration => integration,
            _ => json!({}),
        }
    }

    /// Runs the call; `Ok` as its `Debug`.
    async fn run(self, c: &TerdutClient) -> Result<String, ApiError> {
        let spec = SwitchSpec {
            name: "w".into(),
            matcher: "a=b".into(),
            timeout_seconds: 60,
            severity: "critical".into(),
        };
        let new = NewIntegration {
            kind: IntegrationKind::Generic,
            name: "am".into(),
            external_id: "ns/am".into(),
        };
        fn dbg<T: std::fmt::Debug>(r: Result<T, ApiError>) -> Result<String, ApiError> {
            r.map(|v| format!("{v:?}"))
        }
        match self {
            Self::Healthz => dbg(c.healthz().await),
            Self::WhoAmI => dbg(c.whoami().await),
            Self::CreateTeam => dbg(c.create_team("Platform", "ns/p").await),
            Self::GetTeam => dbg(c.get_team(7).await),
            Self::DeleteTeam => dbg(c.delete_team(7).await),
            Self::GetEscalation => dbg(c.get_escalation(7).await),
            Self::DeleteEscalation => dbg(c.delete_escalation(7).await),
            Self::ListSwitches => dbg(c.list_switches(7).await),
            Self::CreateSwitch => dbg(c.create_switch(7, &spec).await),
            Self::CreateIntegration => dbg(c.create_integration(7, &new).await),
            Self::GetIntegration => dbg(c.get_integration(7, 9).await),
            Self::DeleteIntegration => dbg(c.delete_integration(7, 9).await),
        }
    }
}

/// How the body of a case is made.
#[derive(Clone, Debug)]
enum Body {
    /// The contract's shape for the call (used with success statuses).
    Good,
    /// The good body cut at `at` (a fraction of its length, in thousandths).
    Truncated(u16),
    /// Arbitrary bytes.
    Bytes(Vec<u8>),
    /// Arbitrary JSON (mostly of the wrong shape).
    Json(serde_json::Value),
    /// A contract error body: `error` code, a message mixing text and secrets, maybe a username.
    Error {
        code: String,
        message: String,
        username: Option<String>,
    },
    /// A huge body: `n` KiB of `fill`, as a JSON string in an error message or bare.
    Huge { kib: usize, json: bool },
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(serde_json::Value::from),
        ".{0,20}".prop_map(serde_json::Value::from),
        Just(serde_json::Value::from(KEY)),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    "[a-z_]{1,12}",
                    Just("id".to_owned()),
                    Just("name".to_owned()),
                    Just("key".to_owned()),
                    Just("url".to_owned()),
                    Just("error".to_owned()),
                    Just("message".to_owned()),
                ],
                inner,
                0..6
            )
            .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

fn message() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            ".{0,12}",
            Just(KEY.to_owned()),
            Just(OP_KEY.to_owned()),
            Just(url()),
            Just(format!("Bearer {OP_KEY}")),
            Just(format!("key={KEY};")),
            Just(format!("\"{}\"", url())),
        ],
        0..5,
    )
    .prop_map(|parts| parts.join(" "))
}

fn body() -> impl Strategy<Value = Body> {
    prop_oneof![
        3 => Just(Body::Good),
        2 => (0u16..1000).prop_map(Body::Truncated),
        2 => prop::collection::vec(any::<u8>(), 0..300).prop_map(Body::Bytes),
        2 => json_value().prop_map(Body::Json),
        4 => (
            prop_oneof![
                Just("not_found".to_owned()),
                Just("team_name_taken".to_owned()),
                Just("team_has_open_incidents".to_owned()),
                Just("unknown_user".to_owned()),
                Just("switch_name_taken".to_owned()),
                Just("invalid".to_owned()),
                Just("unauthorized".to_owned()),
                Just(KEY.to_owned()),
                "[a-z_]{0,80}",
            ],
            message(),
            prop::option::of(prop_oneof![Just(KEY.to_owned()), "[a-z]{1,10}"]),
        )
            .prop_map(|(code, message, username)| Body::Error { code, message, username }),
        1 => (256usize..2048, any::<bool>()).prop_map(|(kib, json)| Body::Huge { kib, json }),
    ]
}

fn status() -> impl Strategy<Value = u16> {
    prop_oneof![
        4 => prop::sample::select(vec![
            200u16, 201, 204, 400, 401, 403, 404, 409, 418, 422, 429, 500, 502, 503, 504,
        ]),
        2 => 200u16..=599,
        1 => 100u16..=599,
    ]
}

fn render(call: Call, status: u16, body: &Body) -> Vec<u8> {
    match body {
        Body::Good => serde_json::to_vec(&call.good_body(status)).unwrap(),
        Body::Truncated(at) => {
            let full = serde_json::to_vec(&call.good_body(status)).unwrap();
            let cut = full.len() * usize::from(*at) / 1000;
            full[..cut].to_vec()
        }
        Body::Bytes(b) => b.clone(),
        Body::Json(v) => serde_json::to_vec(v).unwrap(),
        Body::Error {
            code,
            message,
            username,
        } => {
            let mut v = serde_json::json!({"error": code, "message": message});
            if let Some(u) = username {
                v["username"] = serde_json::json!(u);
            }
            serde_json::to_vec(&v).unwrap()
        }
        Body::Huge { kib, json } => {
            let filler = format!("{KEY} ").repeat(kib * 1024 / (KEY.len() + 1));
            if *json {
                serde_json::to_vec(&serde_json::json!({"error": "invalid", "message": filler}))
                    .unwrap()
            } else {
                filler.into_bytes()
            }
        }
    }
}

/// The checks every outcome passes: `Ok` when the case holds, else what failed. `good`: the
/// body has the contract's shape for a success.
fn check(
    call: Call,
    status: u16,
    body: &[u8],
    short_by: usize,
    good: bool,
    got: &Result<String, ApiError>,
) -> Result<(), String> {
    // Nothing secret is shown, whatever happened.
    let shown = match got {
        Ok(dbg) => dbg.clone(),
        Err(e) => format!("{e} {e:?}"),
    };
    for s in secret_fragments() {
        if shown.contains(&s) {
            return Err(format!("a secret shows: {shown}"));
        }
    }
    if shown.len() > 2048 {
        return Err(format!("{} bytes shown", shown.len()));
    }
    if let Err(e) = got
        && (!ApiError::CATEGORIES.contains(&e.category()) || e.to_string().is_empty())
    {
        return Err(format!("untyped: {e:?}"));
    }
    // 1xx (101 switches protocols, others are interim): only the above.
    if status < 200 {
        return Ok(());
    }
    let no_body = matches!(status, 204 | 304);
    // Past the cap the client stops reading (docs/terdut-api.md), whatever the status.
    if !no_body && body.len() > terdut_actors::api::MAX_RESPONSE_BYTES {
        return match got {
            Err(ApiError::TooLarge { limit })
                if *limit == terdut_actors::api::MAX_RESPONSE_BYTES =>
            {
                Ok(())
            }
            other => Err(format!("a {} byte body gave {other:?}", body.len())),
        };
    }
    if short_by > 0 && !no_body {
        return match got {
            Err(
                e @ ApiError::Transient {
                    cause: TransientCause::Connection,
                    ..
                },
            ) if e.is_retryable() => Ok(()),
            other => Err(format!("a body cut short gave {other:?}")),
        };
    }
    let retryable = |e: &ApiError| e.is_retryable();
    if call.empty_ok().contains(&status) {
        return match got {
            Ok(_) => Ok(()),
            Err(e) => Err(format!("listed success {status} gave {e:?}")),
        };
    }
    if call.decoded().contains(&status) {
        return match got {
            Ok(_) => Ok(()),
            Err(e @ ApiError::Decode { .. }) if !retryable(e) && !good => Ok(()),
            Err(e) => Err(format!("listed success {status} gave {e:?}")),
        };
    }
    let Err(e) = got else {
        return Err(format!("status {status} not listed for {call:?} but Ok"));
    };
    // A 204 or 304 carries no body on the wire (HTTP forbids one), so whatever the server
    // rendered, the client classifies an empty body.
    let seen: &[u8] = if no_body { &[] } else { body };
    let want = if (200..300).contains(&status) {
        ApiError::Unexpected { status, code: None }
    } else {
        ApiError::from_response(status, seen)
    };
    if *e != want {
        return Err(format!("{e:?} != from_response {want:?}"));
    }
    let should_retry = status == 429
        || (500..600).contains(&status)
        || status == 401
        || matches!(e, ApiError::OpenIncidents);
    if retryable(e) != should_retry {
        return Err(format!("retryable({e:?}) = {}", retryable(e)));
    }
    let status_transient = matches!(
        e,
        ApiError::Transient { cause: TransientCause::Status(s), .. } if *s == status
    );
    if ((500..600).contains(&status) || status == 429) && !status_transient {
        return Err(format!("{status} is not Transient: {e:?}"));
    }
    if (400..500).contains(&status) && status != 429 && status != 401 {
        let ok_409 = status == 409 && matches!(e, ApiError::OpenIncidents);
        if retryable(e) && !ok_409 {
            return Err(format!("{status} retryable: {e:?}"));
        }
    }
    Ok(())
}

fn run_case(call: Call, answer: Answer) -> Result<String, ApiError> {
    with_server(|s| {
        s.set(Mode::Answer(answer));
        // Short enough that a 101 (an upgrade nobody completes) costs little.
        let c = client(s.port, Duration::from_secs(3));
        s.rt.block_on(call.run(&c))
    })
}

/// `n` cases, times `TERDUT_FUZZ_SCALE` when set (`just fuzz` runs them longer, with random
/// seeds; `just test` pins `PROPTEST_RNG_SEED` so CI is reproducible: docs/adr/0006).
fn fuzz_cases(n: u32) -> u32 {
    std::env::var("TERDUT_FUZZ_SCALE")
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .map_or(n, |k| n.saturating_mul(k.max(1)))
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: fuzz_cases(400),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_answer_is_classified_per_contract_and_shows_no_secret(
        call in prop::sample::select(CALLS.to_vec()),
        status in status(),
        body in body(),
        short in prop_oneof![8 => Just(0usize), 1 => 1usize..5000],
    ) {
        let bytes = render(call, status, &body);
        let answer = Answer { status, body: bytes.clone(), short_by: short };
        let got = run_case(call, answer);
        let good = matches!(body, Body::Good);
        if let Err(why) = check(call, status, &bytes, short, good, &got) {
            prop_assert!(false, "{call:?} {status} {body:?} short_by={short}: {why}");
        }
    }

    /// The classification without the transport: any status, any bytes.
    #[test]
    fn from_response_is_total_and_shows_no_secret(
        status in 0u16..=999,
        body in body(),
        call in prop::sample::select(CALLS.to_vec()),
    ) {
        let bytes = render(call, status, &body);
        let e = ApiError::from_response(status, &bytes);
        let shown = format!("{e} {e:?}");
        for s in secret_fragments() {
            prop_assert!(!shown.contains(&s), "{shown}");
        }
        prop_assert!(shown.len() < 2048, "{} bytes", shown.len());
        prop_assert_eq!(
            e.is_retryable(),
            status == 429 || (500..600).contains(&status) || status == 401
                || e == ApiError::OpenIncidents
        );
    }
}

/// A listed success with the contract's body decodes, and the created integration's url and
/// key are there but never printed.
#[test]
fn good_answers_decode_and_created_credentials_stay_hidden() {
    for call in CALLS {
        for &status in call.decoded() {
            let body = serde_json::to_vec(&call.good_body(status)).unwrap();
            let got = run_case(
                call,
                Answer {
                    status,
                    body,
                    short_by: 0,
                },
            );
            let dbg = got.unwrap_or_else(|e| panic!("{call:?} {status}: {e:?}"));
            assert!(
                !dbg.contains(&KEY[5..]) && !dbg.contains(URL_TOKEN),
                "{dbg}"
            );
        }
    }
    let created = with_server(|s| {
        s.set(Mode::Answer(Answer {
            status: 201,
            body: serde_json::to_vec(&Call::CreateIntegration.good_body(201)).unwrap(),
            short_by: 0,
        }));
        let c = client(s.port, Duration::from_secs(10));
        s.rt.block_on(c.create_integration(
            7,
            &NewIntegration {
                kind: IntegrationKind::Generic,
                name: "am".into(),
                external_id: "ns/am".into(),
            },
        ))
    });
    let terdut_actors::api::IntegrationCreate::Created(created) = created.unwrap() else {
        panic!("not created")
    };
    assert_eq!(created.key.expose(), KEY);
    assert_eq!(created.url.expose(), url());
}

/// Silence until the request timeout, a closed connection, nothing listening: retryable
/// transport failures, each of its cause.
#[test]
fn timeouts_resets_and_refusals_are_transient() {
    with_server(|s| {
        s.set(Mode::Silent);
        let c = client(s.port, Duration::from_millis(300));
        for call in [Call::WhoAmI, Call::CreateIntegration, Call::DeleteTeam] {
            let e = s.rt.block_on(call.run(&c)).unwrap_err();
            assert!(
                matches!(
                    e,
                    ApiError::Transient {
                        cause: TransientCause::Timeout,
                        ..
                    }
                ),
                "{call:?}: {e:?}"
            );
            assert!(e.is_retryable());
        }
        s.set(Mode::Close);
        let c = client(s.port, Duration::from_secs(5));
        for call in CALLS {
            let e = s.rt.block_on(call.run(&c)).unwrap_err();
            assert!(
                matches!(
                    e,
                    ApiError::Transient {
                        cause: TransientCause::Connection,
                        ..
                    }
                ),
                "{call:?}: {e:?}"
            );
            assert!(e.is_retryable());
            assert!(!format!("{e} {e:?}").contains("127.0.0.1"), "{e:?}");
        }
        // Nothing listening: connect refused.
        let port = s.rt.block_on(async {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            l.local_addr().unwrap().port()
        });
        let c = client(port, Duration::from_secs(5));
        let e = s.rt.block_on(Call::GetTeam.run(&c)).unwrap_err();
        assert!(
            matches!(
                e,
                ApiError::Transient {
                    cause: TransientCause::Connect,
                    ..
                }
            ),
            "{e:?}"
        );
    });
}

/// The harness itself can fail: a plain 500 is retryable, a 400 is not, and a body holding a
/// secret in a field the client never echoes (`username` on a 400) would be caught if shown.
#[test]
fn the_checks_can_fail() {
    let e500 = Err(ApiError::from_response(500, b""));
    assert!(check(Call::GetTeam, 500, b"", 0, false, &e500).is_ok());
    let wrong = Err(ApiError::Invalid {
        message: "m".into(),
    });
    assert!(check(Call::GetTeam, 500, b"", 0, false, &wrong).is_err());
    let leaked = Err(ApiError::Invalid {
        message: KEY.to_owned(),
    });
    assert!(check(Call::GetTeam, 400, b"", 0, false, &leaked).is_err());
    let ok_when_not = Ok("Team".to_owned());
    assert!(check(Call::GetTeam, 409, b"", 0, false, &ok_when_not).is_err());
    let short = Ok("Team".to_owned());
    assert!(check(Call::GetTeam, 200, b"{}", 10, false, &short).is_err());
    let undecoded = Err(ApiError::Decode { detail: "d".into() });
    assert!(check(Call::GetTeam, 200, b"{}", 0, false, &undecoded).is_ok());
    assert!(check(Call::GetTeam, 200, b"{}", 0, true, &undecoded).is_err());
}

/// Found by the fuzzer in CI: a 304 with an error body. HTTP gives a 304 no body, so the
/// client classifies what it received (nothing), not what the server tried to send.
#[test]
fn a_not_modified_answer_is_classified_without_its_body() {
    let body = Body::Error {
        code: "not_found".into(),
        message: String::new(),
        username: None,
    };
    let bytes = render(Call::Healthz, 304, &body);
    let got = run_case(
        Call::Healthz,
        Answer {
            status: 304,
            body: bytes.clone(),
            short_by: 0,
        },
    );
    assert_eq!(
        check(Call::Healthz, 304, &bytes, 0, false, &got),
        Ok(()),
        "{got:?}"
    );
    assert!(
        matches!(
            got,
            Err(ApiError::Unexpected {
                status: 304,
                code: None
            })
        ),
        "{got:?}"
    );
}
