//! The escalation ladder, one per team, replaced whole (terdut-api.md "Escalation ladder").

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;

use crate::error::{ApiJson, ApiPath, ContractError};
use crate::state::AppState;
use crate::wire::{Id, Ladder};

pub async fn get(
    State(state): State<AppState>,
    ApiPath(team): ApiPath<Id>,
) -> Result<Json<Ladder>, ContractError> {
    Ok(Json(state.read(|s| s.get_ladder(team))?))
}

pub async fn put(
    State(state): State<AppState>,
    ApiPath(team): ApiPath<Id>,
    ApiJson(body): ApiJson<Ladder>,
) -> Result<Json<Ladder>, ContractError> {
    Ok(Json(state.write(|s| s.put_ladder(team, body))?))
}

pub async fn delete(
    State(state): State<AppState>,
    ApiPath(team): ApiPath<Id>,
) -> Result<StatusCode, ContractError> {
    state.write(|s| s.delete_ladder(team))?;
    Ok(StatusCode::NO_CONTENT)
}
