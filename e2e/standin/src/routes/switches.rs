//! Dead man's switches, names unique per team (terdut-api.md "Dead man's switches").

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;

use crate::error::{ApiJson, ApiPath, ContractError};
use crate::state::AppState;
use crate::wire::{Id, Switch, SwitchBody};

pub async fn list(
    State(state): State<AppState>,
    ApiPath(team): ApiPath<Id>,
) -> Result<Json<Vec<Switch>>, ContractError> {
    Ok(Json(state.read(|s| s.list_switches(team))?))
}

pub async fn create(
    State(state): State<AppState>,
    ApiPath(team): ApiPath<Id>,
    ApiJson(body): ApiJson<SwitchBody>,
) -> Result<(StatusCode, Json<Switch>), ContractError> {
    let switch = state.write(|s| s.create_switch(team, body))?;
    Ok((StatusCode::CREATED, Json(switch)))
}

pub async fn update(
    State(state): State<AppState>,
    ApiPath((team, switch)): ApiPath<(Id, Id)>,
    ApiJson(body): ApiJson<SwitchBody>,
) -> Result<Json<Switch>, ContractError> {
    Ok(Json(state.write(|s| s.update_switch(team, switch, body))?))
}

pub async fn delete(
    State(state): State<AppState>,
    ApiPath((team, switch)): ApiPath<(Id, Id)>,
) -> Result<StatusCode, ContractError> {
    state.write(|s| s.delete_switch(team, switch))?;
    Ok(StatusCode::NO_CONTENT)
}
