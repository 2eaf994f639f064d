//! `POST /api/v1/ingest/{kind}/{token}` (assumption: the real server's alert ingest, reduced
//! to what e2e needs): accepts any payload when the integration key comes as
//! `Authorization: Bearer <key>` or `X-Terdut-Key: <key>`, so a test can prove that the key
//! in a webhook Secret is live. Authenticated by the integration key, not the operator key.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use super::auth::bearer;
use crate::error::{ApiPath, ContractError};
use crate::state::AppState;

pub const KEY_HEADER: &str = "x-terdut-key";

pub async fn ingest(
    State(state): State<AppState>,
    ApiPath((kind, token)): ApiPath<(String, String)>,
    headers: HeaderMap,
    _payload: Bytes,
) -> Result<(StatusCode, Json<Value>), ContractError> {
    let key = bearer(&headers)
        .or_else(|| headers.get(KEY_HEADER).and_then(|v| v.to_str().ok()))
        .ok_or(ContractError::Unauthorized)?
        .to_owned();
    let id = state.write(|s| s.ingest(&kind, &token, &key))?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"status": "accepted", "integration_id": id})),
    ))
}
