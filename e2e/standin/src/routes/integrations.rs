//! Integrations (terdut-api.md "Integrations"): the create answer is the only one that ever
//! carries the webhook url and key.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::error::{ApiJson, ApiPath, ContractError};
use crate::state::AppState;
use crate::store::IntegrationOutcome;
use crate::wire::{Id, Integration, NameBody, NewIntegration};

pub async fn create(
    State(state): State<AppState>,
    ApiPath(team): ApiPath<Id>,
    ApiJson(body): ApiJson<NewIntegration>,
) -> Result<Response, ContractError> {
    let public_url = state.public_url().to_owned();
    Ok(
        match state.write(|s| s.create_integration(team, body, &public_url))? {
            IntegrationOutcome::Created(c) => (StatusCode::CREATED, Json(c)).into_response(),
            IntegrationOutcome::Existing(i) => (StatusCode::OK, Json(i)).into_response(),
        },
    )
}

pub async fn get(
    State(state): State<AppState>,
    ApiPath((team, id)): ApiPath<(Id, Id)>,
) -> Result<Json<Integration>, ContractError> {
    Ok(Json(state.read(|s| s.get_integration(team, id))?))
}

pub async fn rename(
    State(state): State<AppState>,
    ApiPath((team, id)): ApiPath<(Id, Id)>,
    ApiJson(body): ApiJson<NameBody>,
) -> Result<Json<Integration>, ContractError> {
    Ok(Json(
        state.write(|s| s.rename_integration(team, id, body.name))?,
    ))
}

pub async fn delete(
    State(state): State<AppState>,
    ApiPath((team, id)): ApiPath<(Id, Id)>,
) -> Result<StatusCode, ContractError> {
    state.write(|s| s.delete_integration(team, id))?;
    Ok(StatusCode::NO_CONTENT)
}
