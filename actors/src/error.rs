//! Typed reconcile errors: each says whether a retry can help and gives a stable category for
//! metrics labels and Event reasons, and a failed Kubernetes call names its call site
//! ([`KubeCall`]), so a test or a caller matches on the site, not on a message.

use crate::api::ApiError;

/// Where a failed Kubernetes call was made: one variant per call site of the operator. The
/// object is named in the error's `what`; the variant says which read or write of which pass
/// it was, and its [`verb`](KubeCall::verb) is the word the error message starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KubeCall {
    /// A TerdutServer pass reads an object it may own (metadata or whole), live, before it
    /// creates or applies one (`server/observe.rs`).
    ReadServerObject,
    /// Whether the API server serves a group (the Zalando or CNPG CRDs, `server/observe.rs`).
    DiscoverGroup,
    /// The Zalando `postgresql` a TerdutServer's database names.
    ReadZalandoCluster,
    /// The CloudNativePG `Cluster` a TerdutServer's database names.
    ReadCnpgCluster,
    /// The operator's team records (`team/records.rs`): listed, made (on the first start, or
    /// a shard missing when one is written), read for one uid, written.
    ListRecords,
    CreateRecords,
    ReadRecord,
    WriteRecord,
    /// A team's deletion lists the TerdutAlertSources of its namespace (`team/cleanup.rs`).
    ListTeamSources,
    /// A TerdutTeam read live: is it still the object, with our finalizer (`team/cleanup.rs`,
    /// `team/apply.rs`).
    ReadTeamLive,
    /// A team's TerdutServer read live when the cache does not have it (`team/observe.rs`).
    ReadTeamServer,
    /// A source's deletion detaches its webhook Secret (`source/cleanup.rs`).
    DetachWebhookSecret,
    /// A source's deletion confirms its team or server is gone (`source/cleanup.rs`).
    ReadSourceParent,
    /// A source pass reads its webhook Secret live (`source/observe.rs`, `source/apply.rs`).
    ReadWebhookSecret,
    /// The webhook Secret's name is taken by a Secret the source does not control.
    WebhookSecretTaken,
    /// The webhook Secret written (created or replaced).
    WriteWebhookSecret,
    /// The rotate annotation removed from a TerdutAlertSource after a rotation.
    AnnotateSource,
    /// A create-only object (the operator key Secret) or a delete of one no longer asked for
    /// (a PodDisruptionBudget), `write/owned.rs`.
    CreateOwned,
    DeleteOwned,
    /// The finalizer added or released (`write/finalizer.rs`): the patch, and the read
    /// before retrying it.
    PatchFinalizer,
    ReadForFinalizer,
    /// A status written (`write/status.rs`).
    WriteStatus,
    /// Server-side apply of an owned object, and the create-only POST before its first apply
    /// (`write/apply.rs`).
    Apply,
    CreateApplied,
}

impl KubeCall {
    /// The word the error message starts with ("get Secret ns/name: ...").
    pub fn verb(self) -> &'static str {
        use KubeCall::*;
        match self {
            ReadServerObject | ReadZalandoCluster | ReadCnpgCluster | ReadRecord | ReadTeamLive
            | ReadTeamServer | ReadSourceParent | ReadWebhookSecret | ReadForFinalizer => "get",
            DiscoverGroup => "discover",
            ListRecords | ListTeamSources => "list",
            CreateRecords | WebhookSecretTaken | CreateOwned | CreateApplied => "create",
            WriteRecord | PatchFinalizer => "patch",
            DetachWebhookSecret => "update",
            WriteWebhookSecret => "write",
            AnnotateSource => "annotate",
            DeleteOwned => "delete",
            WriteStatus => "patch status of",
            Apply => "apply",
        }
    }
}

impl std::fmt::Display for KubeCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.verb())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// A call to the Kubernetes API failed, at the call site `call`.
    #[error("{call} {what}: {source}")]
    Kube {
        call: KubeCall,
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
    pub fn kube(call: KubeCall, what: impl Into<String>, source: kube::Error) -> Self {
        Self::Kube {
            call,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("m", "r")
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn a_failed_call_names_its_site_and_its_message_starts_with_the_verb() {
        let e = ReconcileError::kube(KubeCall::WriteStatus, "TerdutTeam a/b", api_error(422));
        assert!(matches!(
            e,
            ReconcileError::Kube {
                call: KubeCall::WriteStatus,
                ..
            }
        ));
        assert!(
            e.to_string()
                .starts_with("patch status of TerdutTeam a/b: "),
            "{e}"
        );
        assert_eq!(e.category(), "kube_invalid");
        assert!(!e.is_retryable());
    }

    #[test]
    fn whether_a_kube_call_is_retried_follows_its_answer_not_its_site() {
        for (code, retry, category) in [
            (409, true, "kube_conflict"),
            (429, true, "kube_api"),
            (500, true, "kube_api"),
            (503, true, "kube_api"),
            (403, false, "kube_forbidden"),
            (404, false, "kube_not_found"),
            (422, false, "kube_invalid"),
        ] {
            let e = ReconcileError::kube(KubeCall::ReadRecord, "x", api_error(code));
            assert_eq!(e.is_retryable(), retry, "{code}");
            assert_eq!(e.category(), category, "{code}");
        }
    }
}
