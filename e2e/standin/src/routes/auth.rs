//! `Authorization: Bearer <operator key>` on every `/api/` call; anything else is 401
//! (terdut-api.md "Transport"). The key is compared by digest, in constant time.

use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ContractError;
use crate::state::AppState;

pub async fn require_operator_key(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    match bearer(request.headers()) {
        Some(key) if state.operator_key_matches(key) => next.run(request).await,
        _ => ContractError::Unauthorized.into_response(),
    }
}

/// The token of an `Authorization: Bearer <token>` header (scheme case-insensitive).
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}
