//! The HTTP surface: every row of docs/terdut-api.md, plus the ingest endpoint and, when
//! enabled, the admin surface.
//!
//! Layering, outermost first: [`observe`] (call counting and fault injection, on every contract
//! route) then [`auth`] (the operator key, on every `/api/` route but ingest). Admin routes get
//! neither: they are not part of the contract and must keep working while faults are injected.

mod auth;
mod escalation;
mod health;
mod ingest;
mod integrations;
mod observe;
mod switches;
mod teams;

use axum::Router;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post, put};

use crate::admin;
use crate::error::ContractError;
use crate::state::AppState;

pub(crate) use auth::bearer as auth_bearer;
pub use observe::ConnKill;

pub fn router(state: AppState, admin_enabled: bool) -> Router {
    let protected = Router::new()
        .route("/api/v1/whoami", get(health::whoami))
        .route("/api/v1/teams", post(teams::create))
        .route("/api/v1/teams/{id}", get(teams::get).delete(teams::delete))
        .route("/api/v1/teams/{id}/name", put(teams::rename))
        .route("/api/v1/teams/{id}/oidc-groups", put(teams::set_oidc))
        .route(
            "/api/v1/teams/{id}/escalation",
            get(escalation::get)
                .put(escalation::put)
                .delete(escalation::delete),
        )
        .route(
            "/api/v1/teams/{id}/deadman-switches",
            get(switches::list).post(switches::create),
        )
        .route(
            "/api/v1/teams/{id}/deadman-switches/{sid}",
            put(switches::update).delete(switches::delete),
        )
        .route(
            "/api/v1/teams/{id}/integrations",
            post(integrations::create),
        )
        .route(
            "/api/v1/teams/{id}/integrations/{iid}",
            get(integrations::get)
                .patch(integrations::rename)
                .delete(integrations::delete),
        )
        .route_layer(from_fn_with_state(
            state.clone(),
            auth::require_operator_key,
        ));
    let public = Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/api/v1/ingest/{kind}/{token}", post(ingest::ingest));
    let mut app = protected
        .merge(public)
        .route_layer(from_fn_with_state(state.clone(), observe::observe));
    if admin_enabled {
        app = app.merge(admin::routes::router(state.clone()));
    }
    app.fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
}

async fn not_found() -> ContractError {
    ContractError::NotFound("route")
}

async fn method_not_allowed() -> ContractError {
    ContractError::MethodNotAllowed
}
