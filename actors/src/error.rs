//! Typed reconcile errors: each says whether a retry can help and gives a stable category for
//! metrics labels and Event reasons (engineering-notes: an error variant per IO call site).

use crate::api::ApiError;

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// A call to the Kubernetes API failed.
    #[error("{verb} {what}: {source}")]
    Kube {
        verb: &'static str,
        what: String,
        #[source]
        source: kube::Error,
    },
    /// A call to terdut-server failed.
    #[error("terdut-server: {0}")]
    Api(#[from] ApiError),
    /// The object cannot be reconciled as written (never retried until it changes).
    #[error("{0}")]
    Invalid(String),
    /// A write kept meeting a newer version of the object; retried with backoff.
    #[error("{0} kept changing under the write; retrying")]
    Conflict(String),
    /// The operator's own records (its namespace, `team::records`) could not be read or
    /// written; retried with backoff.
    #[error("{0}")]
    Records(String),
}

impl ReconcileError {
    pub fn kube(verb: &'static str, what: impl Into<String>, source: kube::Error) -> Self {
        Self::Kube {
            verb,
            what: what.into(),
            source,
        }
    }

    /// True when the same call later may succeed: Kubernetes 409/429/5xx and transport
    /// errors, terdut-server transient errors.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Kube { source, .. } => kube_retryable(source),
            Self::Api(e) => e.is_retryable(),
            Self::Conflict(_) | Self::Records(_) => true,
            Self::Invalid(_) => false,
        }
    }

    /// Stable snake_case label.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Kube { source, .. } => match source {
                kube::Error::Api(s) if s.code == 409 => "kube_conflict",
                kube::Error::Api(s) if s.code == 403 => "kube_forbidden",
                kube::Error::Api(s) if s.code == 404 => "kube_not_found",
                kube::Error::Api(s) if s.code == 422 => "kube_invalid",
                kube::Error::Api(_) => "kube_api",
                _ => "kube_transport",
            },
            Self::Api(e) => e.category(),
            Self::Invalid(_) => "invalid_spec",
            Self::Conflict(_) => "kube_conflict",
            Self::Records(_) => "records",
        }
    }
}

fn kube_retryable(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 409 || s.code == 429 || s.code >= 500,
        // Transport, TLS, timeouts: the API server may be back in a moment.
        _ => true,
    }
}
