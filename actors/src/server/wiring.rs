//! What `spec.database` resolves to (docs/design.md §8), shared by the three paths
//! (`database.rs` for a DSN and Zalando, `cnpg.rs` for CloudNativePG): the wiring the pods get,
//! or why there is none yet.

use terdut_crds::v1alpha1::SecretKeyRef;

/// What the Deployment gets: `TERDUT_DATABASE_DSN` and, when there is one, `PGPASSWORD` by
/// `secretKeyRef` (never inline, terdut-api.md "Process environment").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatabaseWiring {
    pub dsn: String,
    pub password: Option<SecretKeyRef>,
}

/// Why the database is not (yet) usable, as a Ready condition reason and a message that says
/// what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatabaseIssue {
    pub reason: &'static str,
    pub message: String,
}

/// The outcome of `database::resolve`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DatabaseOutcome {
    /// The wiring is known, so the Deployment can be applied. `pending` is set when the named
    /// cluster exists but does not serve yet (Zalando: not `Running`; CloudNativePG: not
    /// `Ready`): the pods will simply not be ready until it does (the readiness probe gates
    /// traffic), and the status says why while none are available. A cluster that failed an
    /// update often still serves, so this never holds the Deployment back.
    Wired {
        wiring: DatabaseWiring,
        pending: Option<DatabaseIssue>,
    },
    /// No usable wiring: the Deployment is not applied (an existing one is left as it is) and
    /// Ready is False with this reason.
    Blocked(DatabaseIssue),
}

/// Percent-encodes everything but RFC 3986 unreserved characters, so an odd role or database
/// name cannot change the DSN's structure.
pub fn pct_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unreserved_characters_pass_unencoded() {
        assert_eq!(pct_encode("app_user-1.x~"), "app_user-1.x~");
        assert_eq!(pct_encode("a b@c/d?e"), "a%20b%40c%2Fd%3Fe");
    }
}
