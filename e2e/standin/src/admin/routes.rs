//! The admin endpoints. See [`super`] for what they are for.

use axum::Json;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};

use super::types::{
    AdminState, CallCounts, Fault, FaultCreated, FaultRule, KeyCheck, KeyCheckRequest,
    OpenIncidentsBody, UsersBody,
};
use crate::error::{ApiJson, ApiPath, ContractError};
use crate::routes::auth_bearer;
use crate::state::AppState;
use crate::wire::Id;

pub(crate) fn router(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/admin/state", get(snapshot))
        .route("/admin/reset", post(reset))
        .route("/admin/users", post(seed_users))
        .route("/admin/users/{username}", delete(remove_user))
        .route("/admin/teams/{id}/open-incidents", put(set_open_incidents))
        .route("/admin/integrations/key-check", post(key_check))
        .route("/admin/calls", get(calls).delete(reset_calls))
        .route("/admin/calls/log", get(call_log))
        .route(
            "/admin/faults",
            get(list_faults).post(add_fault).delete(clear_faults),
        )
        .route("/admin/faults/{id}", delete(remove_fault))
        .route_layer(from_fn_with_state(state, require_admin_token))
}

async fn require_admin_token(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    if state.admin_token_matches(auth_bearer(request.headers())) {
        next.run(request).await
    } else {
        ContractError::Unauthorized.into_response()
    }
}

async fn snapshot(State(state): State<AppState>) -> Json<AdminState> {
    Json(state.read(|s| s.snapshot()))
}

async fn reset(State(state): State<AppState>) -> Result<StatusCode, ContractError> {
    state.reset()?;
    Ok(StatusCode::NO_CONTENT)
}

async fn seed_users(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<UsersBody>,
) -> Result<StatusCode, ContractError> {
    if body.usernames.iter().any(|u| u.trim().is_empty()) {
        return Err(ContractError::Invalid("usernames must not be empty".into()));
    }
    state.write(|s| {
        s.seed_users(body.usernames);
        Ok(())
    })?;
    Ok(StatusCode::NO_CONTENT)
}

async fn remove_user(
    State(state): State<AppState>,
    ApiPath(username): ApiPath<String>,
) -> Result<StatusCode, ContractError> {
    state.write(|s| {
        s.remove_user(&username)
            .then_some(())
            .ok_or(ContractError::NotFound("user"))
    })?;
    Ok(StatusCode::NO_CONTENT)
}

async fn set_open_incidents(
    State(state): State<AppState>,
    ApiPath(team): ApiPath<Id>,
    ApiJson(body): ApiJson<OpenIncidentsBody>,
) -> Result<StatusCode, ContractError> {
    state.write(|s| s.set_open_incidents(team, body.count))?;
    Ok(StatusCode::NO_CONTENT)
}

async fn key_check(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<KeyCheckRequest>,
) -> Json<KeyCheck> {
    Json(state.read(|s| s.key_check(&body.key)))
}

async fn calls(State(state): State<AppState>) -> Json<CallCounts> {
    Json(state.calls())
}

async fn call_log(State(state): State<AppState>) -> Json<Vec<String>> {
    Json(state.call_log())
}

async fn reset_calls(State(state): State<AppState>) -> StatusCode {
    state.reset_calls();
    StatusCode::NO_CONTENT
}

async fn list_faults(State(state): State<AppState>) -> Json<Vec<Fault>> {
    Json(state.faults().list())
}

async fn add_fault(
    State(state): State<AppState>,
    ApiJson(rule): ApiJson<FaultRule>,
) -> Result<(StatusCode, Json<FaultCreated>), ContractError> {
    let id = state.faults().add(rule)?;
    Ok((StatusCode::CREATED, Json(FaultCreated { id })))
}

async fn clear_faults(State(state): State<AppState>) -> StatusCode {
    state.faults().clear();
    StatusCode::NO_CONTENT
}

async fn remove_fault(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<u64>,
) -> Result<StatusCode, ContractError> {
    if state.faults().remove(id) {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ContractError::NotFound("fault"))
    }
}
