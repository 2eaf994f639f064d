//! The contract's error answers (`{"error": "<code>", "message": "..."}`, terdut-api.md
//! "Transport") and the extractors that turn axum's own rejections into them, so a malformed
//! body is a 422 `invalid` like the real server's, not axum's plain-text 400/415.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use crate::wire::ErrorBody;

/// Every refusal the stand-in answers with.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ContractError {
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("the team name belongs to another team")]
    TeamNameTaken,
    #[error("the team has open incidents")]
    OpenIncidents,
    #[error("unknown user {0:?}")]
    UnknownUser(String),
    #[error("the team already has a dead man's switch with this name")]
    SwitchNameTaken,
    #[error("{0}")]
    Invalid(String),
    #[error("missing or wrong key")]
    Unauthorized,
    #[error("method not allowed on this route")]
    MethodNotAllowed,
    #[error("{0}")]
    Internal(String),
    /// A fault injected through the admin surface.
    #[error("fault injected by the stand-in admin surface")]
    Injected(StatusCode),
}

impl ContractError {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::TeamNameTaken | Self::OpenIncidents | Self::SwitchNameTaken => {
                StatusCode::CONFLICT
            }
            Self::UnknownUser(_) | Self::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::Injected(s) => *s,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "not_found",
            Self::TeamNameTaken => "team_name_taken",
            Self::OpenIncidents => "team_has_open_incidents",
            Self::UnknownUser(_) => "unknown_user",
            Self::SwitchNameTaken => "switch_name_taken",
            Self::Invalid(_) => "invalid",
            Self::Unauthorized => "unauthorized",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::Internal(_) => "internal",
            Self::Injected(_) => "injected_fault",
        }
    }

    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: self.code().to_owned(),
            message: self.to_string(),
            username: match self {
                Self::UnknownUser(u) => Some(u.clone()),
                _ => None,
            },
        }
    }
}

impl IntoResponse for ContractError {
    fn into_response(self) -> Response {
        (self.status(), Json(self.body())).into_response()
    }
}

/// `Json<T>` whose rejection is the contract's 422 `invalid`.
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ContractError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(value)) => Ok(Self(value)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

fn json_rejection(rejection: JsonRejection) -> ContractError {
    ContractError::Invalid(rejection.body_text())
}

/// `Path<T>` whose rejection (an id that is not a number) is a 404: no such resource
/// (assumption: the contract does not say).
#[derive(Debug)]
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ContractError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(Self(value)),
            Err(rejection) => Err(path_rejection(rejection)),
        }
    }
}

fn path_rejection(rejection: PathRejection) -> ContractError {
    match rejection {
        PathRejection::FailedToDeserializePathParams(_) => ContractError::NotFound("resource"),
        other => ContractError::Internal(other.body_text()),
    }
}
