//! Every `Ready` reason of every kind, in one typed place (docs/design.md §7): the operator
//! writes them, `kubectl terdut` explains them and the Argo CD health checks park on them
//! (the health module renders the checks from this list), so none of them spells a reason itself.
//!
//! `metav1.Condition.reason` is a string on the wire, so the type stops at [`Reason::as_str`];
//! each kind's `reasons` module ([`kind_reasons!`]) lists the reasons the kind can carry and
//! derives from that one list its string constants and its `PROGRESS` table.

use crate::v1alpha1::conditions::Progress;

/// A `Ready` reason: stable CamelCase, each documented in docs/runbook.md or
/// docs/runbook-server.md, each something a user can act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// Converged: for a server, the rollout of the current spec is complete with a pod available.
    Ready,
    /// `spec.management: ObserveOnly` and changes are planned (`status.plan`), none made.
    ObserveOnly,
    /// The operator stopped reconciling the object after repeated crashes (docs/design.md §7).
    CrashLooping,
    /// The spec cannot work as written (for a server, also its name).
    InvalidSpec,
    /// A Kubernetes write failed; the message has the error's text.
    ApplyFailed,
    /// Being deleted, and waiting for something before the finalizer can go (the message says
    /// what: e.g. alert sources whose integrations would otherwise stay live).
    DeletionBlocked,
    /// The TerdutServer does not accept TerdutTeams (and so their alert sources) from this
    /// namespace (its spec.allowedTeams).
    RefNotPermitted,
    /// The server cannot be used yet (no actor, no operator key, or its API did not answer as
    /// expected); the message has the detail.
    WaitingForServer,
    /// `spec.serverRef` names no TerdutServer.
    ServerRefNotFound,
    /// `spec.displayName` belongs to another team on the server; the operator never adopts it.
    TeamNameTaken,
    /// The escalation ladder names a username the server does not know.
    UnknownUser,
    /// A team with this object's `external_id` exists on the server and this object did not
    /// make it (an earlier object of the same namespace and name did).
    Adopted,
    /// `spec.serverRef` names a TerdutServer that exists but that this operator instance does
    /// not reconcile (outside its `--selector` or namespaces): exists, but not this instance's.
    ServerNotReconciled,
    /// The server owner's policy for this namespace does not allow what the spec asks for
    /// (docs/design.md §4.6 "Policies"); no call is made.
    PolicyDenied,
    /// Older TerdutTeams of this namespace fill the policy's `maxTeams`; no call is made.
    TeamLimitReached,
    /// No TerdutTeam named `spec.teamRef.name` in the alert source's namespace.
    TeamNotFound,
    /// The TerdutTeam exists but is not Ready, or its team id is not confirmed by the server.
    WaitingForTeam,
    /// The integration exists on the server but its webhook Secret is gone or no longer holds
    /// its key; the operator fails closed and never mints a new key for it.
    WebhookSecretLost,
    /// A Secret with the webhook Secret's name belongs to someone else.
    WebhookSecretConflict,
    /// A terdut-server call failed (the message says which and why).
    ServerError,
    /// Serving (a pod is available) while a rollout is in progress.
    RollingOut,
    /// The Deployment is applied; no pod is available yet.
    Progressing,
    /// `spec.replicas` is 0.
    ScaledToZero,
    /// The Deployment exceeded its progress deadline.
    RolloutStalled,
    /// Pods could not be created (quota, Pod Security admission, ...).
    ReplicaFailure,
    /// The operator key Secret exists but holds no valid key.
    KeySecretInvalid,
    /// A Secret with the operator key's name exists but is not this server's.
    KeySecretNotOwned,
    /// `postgresClusterRef` names a cluster that does not exist.
    DatabaseClusterNotFound,
    /// `postgresClusterRef` is set but the Zalando CRD is not installed.
    PostgresOperatorNotInstalled,
    /// The Zalando cluster exists but is not `Running`.
    DatabaseClusterNotRunning,
    /// An object with the name the operator needs exists and is not this server's.
    ResourceNotOwned,
    /// A Secret the spec names (database password, ntfy token, OIDC client secret, Zalando
    /// credentials) does not exist.
    SecretNotFound,
    /// A Secret the spec names exists without the key it names.
    SecretKeyNotFound,
}

impl Reason {
    /// Every reason, each once.
    pub const ALL: [Self; 33] = [
        Self::Ready,
        Self::ObserveOnly,
        Self::CrashLooping,
        Self::InvalidSpec,
        Self::ApplyFailed,
        Self::DeletionBlocked,
        Self::RefNotPermitted,
        Self::WaitingForServer,
        Self::ServerRefNotFound,
        Self::TeamNameTaken,
        Self::UnknownUser,
        Self::Adopted,
        Self::ServerNotReconciled,
        Self::PolicyDenied,
        Self::TeamLimitReached,
        Self::TeamNotFound,
        Self::WaitingForTeam,
        Self::WebhookSecretLost,
        Self::WebhookSecretConflict,
        Self::ServerError,
        Self::RollingOut,
        Self::Progressing,
        Self::ScaledToZero,
        Self::RolloutStalled,
        Self::ReplicaFailure,
        Self::KeySecretInvalid,
        Self::KeySecretNotOwned,
        Self::DatabaseClusterNotFound,
        Self::PostgresOperatorNotInstalled,
        Self::DatabaseClusterNotRunning,
        Self::ResourceNotOwned,
        Self::SecretNotFound,
        Self::SecretKeyNotFound,
    ];

    /// The reason as a condition carries it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "Ready",
            Self::ObserveOnly => "ObserveOnly",
            Self::CrashLooping => "CrashLooping",
            Self::InvalidSpec => "InvalidSpec",
            Self::ApplyFailed => "ApplyFailed",
            Self::DeletionBlocked => "DeletionBlocked",
            Self::RefNotPermitted => "RefNotPermitted",
            Self::WaitingForServer => "WaitingForServer",
            Self::ServerRefNotFound => "ServerRefNotFound",
            Self::TeamNameTaken => "TeamNameTaken",
            Self::UnknownUser => "UnknownUser",
            Self::Adopted => "Adopted",
            Self::ServerNotReconciled => "ServerNotReconciled",
            Self::PolicyDenied => "PolicyDenied",
            Self::TeamLimitReached => "TeamLimitReached",
            Self::TeamNotFound => "TeamNotFound",
            Self::WaitingForTeam => "WaitingForTeam",
            Self::WebhookSecretLost => "WebhookSecretLost",
            Self::WebhookSecretConflict => "WebhookSecretConflict",
            Self::ServerError => "ServerError",
            Self::RollingOut => "RollingOut",
            Self::Progressing => "Progressing",
            Self::ScaledToZero => "ScaledToZero",
            Self::RolloutStalled => "RolloutStalled",
            Self::ReplicaFailure => "ReplicaFailure",
            Self::KeySecretInvalid => "KeySecretInvalid",
            Self::KeySecretNotOwned => "KeySecretNotOwned",
            Self::DatabaseClusterNotFound => "DatabaseClusterNotFound",
            Self::PostgresOperatorNotInstalled => "PostgresOperatorNotInstalled",
            Self::DatabaseClusterNotRunning => "DatabaseClusterNotRunning",
            Self::ResourceNotOwned => "ResourceNotOwned",
            Self::SecretNotFound => "SecretNotFound",
            Self::SecretKeyNotFound => "SecretKeyNotFound",
        }
    }

    /// The reason a condition carries, if it is one of these.
    pub fn parse(reason: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == reason)
    }

    /// What the reason says about progress, from which `Reconciling` and `Stalled` follow
    /// (docs/design.md §7, the table in docs/gitops.md). One classification for every kind
    /// that carries the reason.
    ///
    /// In progress: a rollout, pods starting, a Zalando cluster coming up, waiting for a team
    /// or a server, retries after a failed call or write, and a referent that may still be on
    /// its way (applied in the same commit; its watch event resumes the object). Stalled:
    /// whatever only a change by someone resolves (a name, user, Secret or object that belongs
    /// to someone else, a refused consent, an invalid spec, a parked crash loop). Settled:
    /// converged, or parked as the spec asks ([`Reason::parked_by`]).
    pub const fn progress(self) -> Progress {
        match self {
            Self::Ready | Self::ObserveOnly | Self::ScaledToZero => Progress::Settled,
            Self::ServerRefNotFound
            | Self::WaitingForServer
            | Self::DeletionBlocked
            | Self::TeamNotFound
            | Self::WaitingForTeam
            | Self::ServerError
            | Self::ApplyFailed
            | Self::RollingOut
            | Self::Progressing
            | Self::DatabaseClusterNotRunning
            | Self::DatabaseClusterNotFound
            | Self::SecretNotFound => Progress::Reconciling,
            Self::CrashLooping
            | Self::InvalidSpec
            | Self::RefNotPermitted
            | Self::TeamNameTaken
            | Self::UnknownUser
            | Self::Adopted
            | Self::ServerNotReconciled
            | Self::PolicyDenied
            | Self::TeamLimitReached
            | Self::WebhookSecretLost
            | Self::WebhookSecretConflict
            | Self::RolloutStalled
            | Self::ReplicaFailure
            | Self::KeySecretInvalid
            | Self::KeySecretNotOwned
            | Self::PostgresOperatorNotInstalled
            | Self::ResourceNotOwned
            | Self::SecretKeyNotFound => Progress::Stalled,
        }
    }

    /// For a reason that means "parked as the spec asks" (settled, and Ready False): what in
    /// the spec asks for it. The Argo CD checks show these as Suspended, like a paused
    /// Deployment (docs/gitops.md).
    pub const fn parked_by(self) -> Option<&'static str> {
        match self {
            Self::ScaledToZero => Some("spec.replicas 0"),
            Self::ObserveOnly => {
                Some("spec.management ObserveOnly with changes planned (status.plan)")
            }
            _ => None,
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A kind's `reasons` module body from one list of `CONST = Variant` lines: a `&str` constant
/// per reason (what the operator writes), `ALL` (the kind's reasons, in that order) and
/// `PROGRESS` (each with [`Reason::progress`]), so the three cannot disagree.
macro_rules! kind_reasons {
    ($($(#[$doc:meta])* $name:ident = $variant:ident,)+) => {
        $(
            $(#[$doc])*
            pub const $name: &str = $crate::v1alpha1::reason::Reason::$variant.as_str();
        )+

        /// The kind's `Ready` reasons, each once.
        pub const ALL: &[$crate::v1alpha1::reason::Reason] =
            &[$($crate::v1alpha1::reason::Reason::$variant),+];

        /// What each of the kind's reasons says about progress ([`Reason::progress`]), the
        /// table `conditions::progress_of` reads.
        ///
        /// [`Reason::progress`]: crate::v1alpha1::reason::Reason::progress
        pub const PROGRESS: &[(&str, $crate::v1alpha1::conditions::Progress)] =
            &[$(($name, $crate::v1alpha1::reason::Reason::$variant.progress())),+];
    };
}
pub(crate) use kind_reasons;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_is_listed_once_and_parses_back() {
        let mut seen = std::collections::BTreeSet::new();
        for r in Reason::ALL {
            assert!(seen.insert(r.as_str()), "{r} twice");
            assert_eq!(Reason::parse(r.as_str()), Some(r));
        }
        assert_eq!(Reason::parse("PausedByAnnotation"), None);
    }

    #[test]
    fn only_settled_reasons_park() {
        for r in Reason::ALL {
            let parks = r.parked_by().is_some();
            assert_eq!(
                parks,
                r.progress() == Progress::Settled && r != Reason::Ready,
                "{r}"
            );
        }
    }
}
