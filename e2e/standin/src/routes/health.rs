//! The unauthenticated probes and `whoami` (terdut-api.md "Transport", "Operator account").

use axum::Json;
use serde_json::{Value, json};

use crate::wire::WhoAmI;

/// Liveness: the process answers.
pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// Readiness: the stand-in has no database, so it is ready once it listens. A test that needs
/// "not ready" injects a fault on `GET /readyz`.
pub async fn readyz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// The account the operator key belongs to (assumption: lets the operator prove its key).
pub async fn whoami() -> Json<WhoAmI> {
    Json(WhoAmI {
        account: "terdut-operator".into(),
        scope: "instance".into(),
    })
}
