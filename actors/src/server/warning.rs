//! Things in a spec the builders overrode or dropped. They are not errors: the operator's value
//! wins and the server still converges, but the user should hear about it (a Warning Event,
//! docs/design.md §12), or they will wonder why their setting has no effect.

use std::fmt;

/// One overridden or dropped user setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpecWarning {
    /// `spec.pod.extraEnv` names a variable the operator sets itself; the operator's value wins.
    EnvReserved { name: String },
    /// `spec.pod.extraEnv` names a variable twice; the last one wins, as the kubelet would do.
    /// Deduplicated because server-side apply refuses duplicate keys in `env`.
    EnvDuplicate { name: String },
    /// `spec.pod.annotations` sets an annotation the operator manages; the operator's value wins.
    AnnotationReserved { key: String },
    /// The spec makes the pods break the `restricted` Pod Security level (applied anyway).
    BreaksRestricted { fields: Vec<String> },
}

impl SpecWarning {
    /// Event reason: stable, CamelCase.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::EnvReserved { .. } => "ExtraEnvIgnored",
            Self::EnvDuplicate { .. } => "ExtraEnvDuplicate",
            Self::AnnotationReserved { .. } => "PodAnnotationIgnored",
            Self::BreaksRestricted { .. } => "PodSecurityBreaksRestricted",
        }
    }
}

impl fmt::Display for SpecWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::EnvReserved { name } => write!(
                f,
                "spec.pod.extraEnv sets {name}, which the operator manages; the operator's \
                 value is used. Set it through its own spec field instead"
            ),
            Self::EnvDuplicate { name } => write!(
                f,
                "spec.pod.extraEnv sets {name} more than once; only the last one is used"
            ),
            Self::AnnotationReserved { key } => write!(
                f,
                "spec.pod.annotations sets {key}, which the operator manages; the operator's \
                 value is used"
            ),
            Self::BreaksRestricted { fields } => write!(
                f,
                "the terdut-server pods break the restricted Pod Security level: {}; a namespace \
                 enforcing it refuses them (ReplicaFailure)",
                fields.join("; ")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_setting() {
        let w = SpecWarning::EnvReserved {
            name: "TERDUT_OPERATOR_KEY".into(),
        };
        assert!(w.to_string().contains("TERDUT_OPERATOR_KEY"));
        assert_eq!(w.reason(), "ExtraEnvIgnored");
        let a = SpecWarning::AnnotationReserved { key: "k".into() };
        assert!(a.to_string().contains("k,"));
    }
}
