//! Every way a terdut-server call can fail, classified once so callers match on meaning, not on
//! status codes (terdut-api.md lists the status and `error` code of each row).
//!
//! No variant holds a secret: the bearer key travels only in a header, the integration key and
//! webhook URL only in [`CreatedIntegration`](super::wire::CreatedIntegration), and transport
//! failures are rendered from their root cause without the request URL.

use std::error::Error as StdError;
use std::fmt;

use super::wire::{ErrorBody, codes};

/// Why a call failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// 404: the team, ladder, switch or integration does not exist.
    #[error("not found on the server")]
    NotFound,
    /// 409 `team_name_taken`: the name belongs to a team with another `external_id`
    /// (docs/design.md §2: never an adoption).
    #[error("the team name belongs to another team on the server")]
    TeamNameTaken,
    /// 409 `team_has_open_incidents`: the server refuses to delete the team for now.
    #[error("the team has open incidents; the server refuses to delete it until they are resolved")]
    OpenIncidents,
    /// 422 `unknown_user`: the ladder names a user the server does not know (docs/design.md §2).
    #[error("the server knows no user {username:?}")]
    UnknownUser { username: String },
    /// 409 `switch_name_taken`: another switch of the team has this name.
    #[error("another dead man's switch of the team has this name")]
    SwitchNameTaken,
    /// 401: the operator key was refused.
    #[error("the server refused the operator key (401)")]
    Unauthorized,
    /// 422 `invalid` (or 400): the server refused the body; `message` is the server's text.
    #[error("the server refused the request as invalid: {message}")]
    Invalid { message: String },
    /// 5xx, 429, a timeout, a refused or reset connection: the same call may succeed soon.
    #[error("transient failure ({cause}): {detail}")]
    Transient {
        cause: TransientCause,
        detail: String,
    },
    /// A status or `error` code the contract does not list for the call.
    #[error("unexpected response: HTTP {status}{}", code.as_deref().map(|c| format!(" ({c})")).unwrap_or_default())]
    Unexpected { status: u16, code: Option<String> },
    /// The response body was longer than [`MAX_RESPONSE_BYTES`](super::client::MAX_RESPONSE_BYTES):
    /// no answer of the contract is anywhere near that, so the server is broken or hostile,
    /// and reading on would let it fill the operator's memory. Not read further.
    #[error("the server's response exceeded {limit} bytes; the rest was not read")]
    TooLarge { limit: usize },
    /// A success status whose body is not what the contract says.
    #[error("the server's response did not decode: {detail}")]
    Decode { detail: String },
    /// The client could not be built or the request could not be formed (a bad base URL).
    #[error("API client configuration: {message}")]
    Config { message: String },
}

/// What made a failure [`ApiError::Transient`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransientCause {
    /// The server answered 5xx or 429.
    Status(u16),
    /// The connect or request timeout expired.
    Timeout,
    /// No connection could be made (refused, unreachable, DNS).
    Connect,
    /// The connection broke before a whole response arrived (reset, closed, truncated body).
    Connection,
}

impl fmt::Display for TransientCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Status(s) => write!(f, "HTTP {s}"),
            Self::Timeout => f.write_str("timeout"),
            Self::Connect => f.write_str("connect"),
            Self::Connection => f.write_str("connection broken"),
        }
    }
}

impl ApiError {
    /// Whether repeating the same call, unchanged, can succeed later without anyone editing a
    /// spec:
    /// - `Transient`: soon (back off and retry).
    /// - `OpenIncidents`: once the incidents are resolved (terdut-api.md "retry later").
    /// - `Unauthorized`: while a replaced operator-key Secret rolls the pods, the old ones still
    ///   answer 401 (docs/design.md §6), so a retry with backoff heals it.
    ///
    /// Everything else needs a change first (a spec, another team's name, a user signing up) and
    /// is left to the periodic resync (docs/design.md §5).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::Transient { .. } | Self::OpenIncidents | Self::Unauthorized
        )
    }

    /// Whether this is a transport-level or server-side hiccup.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Transient { .. })
    }

    /// A stable snake_case label: the `outcome` of the request metrics and usable as a base for
    /// Event reasons. Never carries a value from the response.
    pub fn category(&self) -> &'static str {
        match self {
            Self::NotFound => "not_found",
            Self::TeamNameTaken => "team_name_taken",
            Self::OpenIncidents => "open_incidents",
            Self::UnknownUser { .. } => "unknown_user",
            Self::SwitchNameTaken => "switch_name_taken",
            Self::Unauthorized => "unauthorized",
            Self::Invalid { .. } => "invalid",
            Self::Transient { .. } => "transient",
            Self::Unexpected { .. } => "unexpected",
            Self::TooLarge { .. } => "too_large",
            Self::Decode { .. } => "decode",
            Self::Config { .. } => "config",
        }
    }

    /// Every category, for tests and dashboards.
    pub const CATEGORIES: [&'static str; 12] = [
        "not_found",
        "team_name_taken",
        "open_incidents",
        "unknown_user",
        "switch_name_taken",
        "unauthorized",
        "invalid",
        "transient",
        "unexpected",
        "too_large",
        "decode",
        "config",
    ];

    /// Classifies a non-2xx response by its status and `{"error", "message"}` body
    /// (terdut-api.md). A body that is not the contract's shape still classifies by status.
    ///
    /// Text taken from the body (message, code, username) is [`scrubbed`](scrub) of anything
    /// shaped like a key or a webhook URL's token before it is kept: the error ends up in logs,
    /// statuses and Events.
    pub fn from_response(status: u16, body: &[u8]) -> Self {
        let parsed: Option<ErrorBody> = serde_json::from_slice(body).ok();
        let code = parsed.as_ref().map(|b| scrub(&b.error)).unwrap_or_default();
        let code = code.as_str();
        let message = || {
            parsed
                .as_ref()
                .map(|b| scrub(&b.message))
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| format!("HTTP {status}"))
        };
        let unexpected = || Self::Unexpected {
            status,
            code: (!code.is_empty()).then(|| truncate(code, 64)),
        };
        match status {
            401 => Self::Unauthorized,
            404 => Self::NotFound,
            409 => match code {
                codes::TEAM_NAME_TAKEN => Self::TeamNameTaken,
                codes::TEAM_HAS_OPEN_INCIDENTS => Self::OpenIncidents,
                codes::SWITCH_NAME_TAKEN => Self::SwitchNameTaken,
                _ => unexpected(),
            },
            422 if code == codes::UNKNOWN_USER => Self::UnknownUser {
                username: parsed
                    .and_then(|b| b.username)
                    .map(|u| truncate(&scrub(&u), 256))
                    .unwrap_or_default(),
            },
            400 | 422 => Self::Invalid {
                message: truncate(&message(), 512),
            },
            429 | 500..=599 => Self::Transient {
                cause: TransientCause::Status(status),
                detail: truncate(&message(), 256),
            },
            _ => unexpected(),
        }
    }

    /// Classifies a transport failure. The rendering walks to the root cause of the error
    /// with the URL stripped, so nothing of the request but its kind shows.
    pub fn from_transport(err: reqwest::Error) -> Self {
        let err = err.without_url();
        let detail = root_cause(&err);
        if err.is_builder() {
            return Self::Config { message: detail };
        }
        let cause = if err.is_timeout() {
            TransientCause::Timeout
        } else if err.is_connect() {
            TransientCause::Connect
        } else {
            TransientCause::Connection
        };
        Self::Transient { cause, detail }
    }
}

fn root_cause(err: &(dyn StdError + 'static)) -> String {
    let mut cur = err;
    while let Some(next) = cur.source() {
        cur = next;
    }
    truncate(&cur.to_string(), 256)
}

/// The key prefixes of terdut-server (operator key, integration key) and the path segment
/// before a webhook URL's token (terdut-api.md).
const SECRET_MARKERS: [&str; 3] = ["tdsa_", "tdik_", "/ingest/"];

/// `text` with every key-shaped token (`tdsa_…`, `tdik_…`) and the rest of every webhook URL
/// path (`…/ingest/<kind>/<token>`) replaced by `<redacted>`: a server (or a proxy in front of
/// it) echoing a request or a key in its error text must not put it in a log line or a status.
pub(crate) fn scrub(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    // One pass: `copied` is where the text not yet copied to `out` starts.
    let mut copied = 0;
    let mut i = 0;
    let bytes = text.as_bytes();
    while i < bytes.len() {
        let Some(marker) = SECRET_MARKERS
            .iter()
            .find(|m| bytes[i..].starts_with(m.as_bytes()))
        else {
            i += 1;
            continue;
        };
        let start = i + marker.len();
        let after = &text[start..];
        let len = if *marker == "/ingest/" {
            after
                .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>'))
                .unwrap_or(after.len())
        } else {
            after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
                .unwrap_or(after.len())
        };
        out.push_str(&text[copied..start]);
        out.push_str(super::secret::REDACTED);
        i = start + len;
        copied = i;
    }
    out.push_str(&text[copied..]);
    out
}

fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(status: u16, body: &str) -> ApiError {
        ApiError::from_response(status, body.as_bytes())
    }

    #[test]
    fn classifies_every_contract_error() {
        assert_eq!(classify(401, ""), ApiError::Unauthorized);
        assert_eq!(
            classify(404, r#"{"error":"not_found","message":"x"}"#),
            ApiError::NotFound
        );
        assert_eq!(
            classify(409, r#"{"error":"team_name_taken","message":"x"}"#),
            ApiError::TeamNameTaken
        );
        assert_eq!(
            classify(409, r#"{"error":"team_has_open_incidents","message":"x"}"#),
            ApiError::OpenIncidents
        );
        assert_eq!(
            classify(409, r#"{"error":"switch_name_taken","message":"x"}"#),
            ApiError::SwitchNameTaken
        );
        assert_eq!(
            classify(
                422,
                r#"{"error":"unknown_user","message":"x","username":"alice"}"#
            ),
            ApiError::UnknownUser {
                username: "alice".into()
            }
        );
        assert_eq!(
            classify(422, r#"{"error":"invalid","message":"name is empty"}"#),
            ApiError::Invalid {
                message: "name is empty".into()
            }
        );
    }

    #[test]
    fn classifies_what_the_contract_does_not_list() {
        assert!(classify(500, "").is_retryable());
        assert!(classify(503, "<html>").is_transient());
        assert!(classify(429, "").is_transient());
        assert_eq!(
            classify(409, r#"{"error":"conflict"}"#),
            ApiError::Unexpected {
                status: 409,
                code: Some("conflict".into())
            }
        );
        assert_eq!(
            classify(403, "nope"),
            ApiError::Unexpected {
                status: 403,
                code: None
            }
        );
        assert!(matches!(classify(400, "garbage"), ApiError::Invalid { .. }));
    }

    #[test]
    fn retryable_only_where_a_retry_can_help() {
        assert!(ApiError::OpenIncidents.is_retryable());
        assert!(ApiError::Unauthorized.is_retryable());
        for e in [
            ApiError::NotFound,
            ApiError::TeamNameTaken,
            ApiError::SwitchNameTaken,
            ApiError::UnknownUser {
                username: "a".into(),
            },
            ApiError::Invalid {
                message: "m".into(),
            },
            ApiError::Unexpected {
                status: 418,
                code: None,
            },
            ApiError::Decode { detail: "d".into() },
            ApiError::Config {
                message: "c".into(),
            },
        ] {
            assert!(!e.is_retryable(), "{e:?}");
            assert!(ApiError::CATEGORIES.contains(&e.category()));
        }
    }

    #[test]
    fn server_text_is_scrubbed_of_keys_and_webhook_tokens() {
        let key = format!("tdik_{}", "ab".repeat(24));
        let op = format!("tdsa_{}", "cd".repeat(24));
        let url = "https://t.example/api/v1/ingest/generic/s3cr3ttok3n";
        let body = format!(r#"{{"error":"invalid","message":"bad {key} and {op} at {url} ok"}}"#);
        let e = classify(422, &body);
        let shown = format!("{e} {e:?}");
        for s in [key.as_str(), &key[5..], &op[5..], "s3cr3ttok3n"] {
            assert!(!shown.contains(s), "{shown}");
        }
        assert!(
            shown.contains("bad tdik_<redacted> and tdsa_<redacted> at"),
            "{shown}"
        );
        assert!(shown.contains("/api/v1/ingest/<redacted> ok"), "{shown}");
        let e = classify(503, &format!(r#"{{"error":"x","message":"{key}"}}"#));
        assert!(!format!("{e}").contains(&key[5..]));
        let e = classify(409, &format!(r#"{{"error":"{key}"}}"#));
        assert!(!format!("{e:?}").contains(&key[5..]));
        let e = classify(
            422,
            &format!(r#"{{"error":"unknown_user","message":"","username":"{key}"}}"#),
        );
        assert!(!format!("{e:?}").contains(&key[5..]));
        assert_eq!(scrub("plain text, tdik"), "plain text, tdik");
    }

    #[test]
    fn long_server_text_is_truncated() {
        let body = format!(r#"{{"error":"invalid","message":"{}"}}"#, "x".repeat(5000));
        let ApiError::Invalid { message } = classify(422, &body) else {
            panic!("not invalid")
        };
        assert!(message.chars().count() <= 513);
    }
}
