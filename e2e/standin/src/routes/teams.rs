//! Teams (terdut-api.md "Teams"): create-or-find by `external_id`, get, rename, OIDC groups,
//! delete.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;

use crate::error::{ApiJson, ApiPath, ContractError};
use crate::state::AppState;
use crate::store::TeamOutcome;
use crate::wire::{Id, NameBody, NewTeam, Oidc, Team};

type Reply = Result<(StatusCode, Json<Team>), ContractError>;

pub async fn create(State(state): State<AppState>, ApiJson(body): ApiJson<NewTeam>) -> Reply {
    match state.write(|s| s.create_team(body))? {
        TeamOutcome::Created(t) => Ok((StatusCode::CREATED, Json(t))),
        TeamOutcome::Found(t) => Ok((StatusCode::OK, Json(t))),
    }
}

pub async fn get(State(state): State<AppState>, ApiPath(id): ApiPath<Id>) -> Reply {
    let team = state.read(|s| s.get_team(id))?;
    Ok((StatusCode::OK, Json(team)))
}

pub async fn rename(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Id>,
    ApiJson(body): ApiJson<NameBody>,
) -> Reply {
    let team = state.write(|s| s.rename_team(id, body.name))?;
    Ok((StatusCode::OK, Json(team)))
}

pub async fn set_oidc(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Id>,
    ApiJson(body): ApiJson<Oidc>,
) -> Reply {
    let team = state.write(|s| s.set_oidc(id, body))?;
    Ok((StatusCode::OK, Json(team)))
}

pub async fn delete(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Id>,
) -> Result<StatusCode, ContractError> {
    state.write(|s| s.delete_team(id))?;
    Ok(StatusCode::NO_CONTENT)
}
