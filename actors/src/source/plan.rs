//! What one TerdutAlertSource pass does, decided without IO (docs/design.md §4.5, §5).
//!
//! The server shows an integration's webhook key exactly once, in the answer to the POST that
//! created it. The three failures this module exists to prevent:
//! - **losing it**: the url and key go into the webhook Secret in the same step as the POST;
//! - **silently replacing a key someone configured**: a missing Secret for an integration that
//!   exists fails closed ([`Blocker::WebhookSecretLost`]) unless a spec change (a kind change)
//!   or an explicit rotate request explains a new key;
//! - **orphans and duplicates**: identity is the `external_id`, so a POST after a crash answers
//!   200 with the integration that was made but whose key was never stored; no Secret ever held
//!   that key, so no consumer can, and it is deleted and made again
//!   ([`RecreateReason::CrashWindow`]).
//!
//! How the actor feeds it: it looks up the integration by [`lookup_id`] (the id the Secret
//! records, else `status.integrationID`) and plans. A [`Decision::Create`] or
//! [`Decision::Recreate`] ends in a POST; when that POST answers 200 (the `external_id`
//! exists), the actor plans again with [`ServerView::ByExternalId`].

use kube::ResourceExt;
use terdut_crds::v1alpha1::{AlertSourceKind, TerdutAlertSource};

use super::names::{ANNOTATION_ROTATE, ANNOTATION_ROTATED_FOR};
use crate::api::{Id, Integration, IntegrationKind, IntegrationPatch, NewIntegration};

/// The API's kind for the spec's.
pub fn integration_kind(kind: AlertSourceKind) -> IntegrationKind {
    match kind {
        AlertSourceKind::Alertmanager => IntegrationKind::Alertmanager,
        AlertSourceKind::Grafana => IntegrationKind::Grafana,
        AlertSourceKind::Generic => IntegrationKind::Generic,
    }
}

/// What the spec and annotations of the TerdutAlertSource ask for. A spec field the server
/// keeps is read here ([`desired`]) and sent from here ([`Desired::new_integration`],
/// [`Desired::patch`]): the one module a new one changes besides the CRD and the wire types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Desired<'a> {
    pub kind: IntegrationKind,
    pub name: &'a str,
    /// The value of the rotate annotation, when set.
    pub rotate: Option<&'a str>,
    /// The rotate value already handled, as recorded on the TerdutAlertSource itself.
    pub rotated_for: Option<&'a str>,
}

/// What the spec and the annotations of `source` ask for.
pub fn desired(source: &TerdutAlertSource) -> Desired<'_> {
    let annotations = source.annotations();
    Desired {
        kind: integration_kind(source.spec.kind),
        name: &source.spec.name,
        rotate: annotations.get(ANNOTATION_ROTATE).map(String::as_str),
        rotated_for: annotations.get(ANNOTATION_ROTATED_FOR).map(String::as_str),
    }
}

impl Desired<'_> {
    /// The body of the integration's create: the pass's POST and the deletion's lookup POST.
    pub fn new_integration(&self, external_id: String) -> NewIntegration {
        NewIntegration {
            kind: self.kind,
            name: self.name.to_owned(),
            external_id,
        }
    }

    /// The body of the PATCH that makes an integration of the right kind match the spec.
    pub fn patch(&self) -> IntegrationPatch {
        IntegrationPatch {
            name: self.name.to_owned(),
        }
    }
}

/// The Secret found under the webhook Secret's name (never its values).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretView {
    Absent,
    /// A Secret of that name that this TerdutAlertSource does not control: never overwritten.
    Foreign,
    Owned(OwnedSecret),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedSecret {
    /// The integration whose key it holds (its annotation).
    pub integration_id: Option<Id>,
    /// Both `url` and `key` are present and non-empty.
    pub has_credentials: bool,
    /// The rotate value whose rotation wrote it.
    pub rotated_for: Option<String>,
}

impl SecretView {
    /// The integration id the Secret records, if it is ours.
    pub fn integration_id(&self) -> Option<Id> {
        match self {
            Self::Owned(o) => o.integration_id,
            _ => None,
        }
    }

    /// Whether the Secret holds the url and key of integration `id`.
    pub fn holds_key_of(&self, id: Id) -> bool {
        matches!(self, Self::Owned(o) if o.integration_id == Some(id) && o.has_credentials)
    }

    fn rotated_for(&self) -> Option<&str> {
        match self {
            Self::Owned(o) => o.rotated_for.as_deref(),
            _ => None,
        }
    }
}

/// What the server said about the integration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerView {
    /// No integration id is known (nothing created yet, or the operator stopped before it
    /// recorded one): nothing was looked up.
    Unknown,
    /// `GET` by [`lookup_id`] found it.
    Found(Integration),
    /// `GET` by [`lookup_id`] answered 404: deleted on the server (or by an interrupted
    /// recreate).
    Gone(Id),
    /// `POST` answered 200: the team already has an integration with this `external_id`.
    ByExternalId(Integration),
}

/// Everything [`plan`] decides from.
#[derive(Clone, Debug)]
pub struct Inputs<'a> {
    pub desired: Desired<'a>,
    /// `status.integrationID`: set only once a Secret held that integration's key.
    pub status_id: Option<Id>,
    pub secret: &'a SecretView,
    pub server: &'a ServerView,
}

/// Why a pass deletes an integration and makes it again (which gives it a new key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecreateReason {
    /// `spec.kind` changed; a kind cannot be changed in place (docs/design.md §5).
    KindChanged { from: IntegrationKind },
    /// The integration no longer exists on the server (docs/design.md §5).
    DeletedOnServer,
    /// It exists by `external_id`, but no Secret ever held its key: the operator stopped
    /// between the POST and the Secret write.
    CrashWindow,
    /// The rotate annotation has a value not handled yet.
    Requested { value: String },
}

/// Why nothing is done until someone acts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Blocker {
    /// The integration exists but no Secret holds its key, and nothing explains minting a new
    /// one (docs/design.md §5 "A webhook Secret that is lost fails closed").
    WebhookSecretLost { id: Id },
    /// A Secret of the webhook Secret's name belongs to someone else.
    SecretConflict,
}

/// The one thing a pass does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// In sync: the Secret holds the key of integration `id`, which matches the spec.
    Noop {
        id: Id,
    },
    /// `PATCH` the name; the key is unchanged.
    Rename {
        id: Id,
        from: String,
    },
    /// `POST`, then write the Secret.
    Create,
    /// `DELETE` `delete` (when it still exists), then `POST` and write the Secret.
    Recreate {
        delete: Option<Id>,
        reason: RecreateReason,
    },
    Blocked(Blocker),
}

impl Decision {
    /// Decisions that create, delete or fail closed. The actor confirms the Secret with a live
    /// read before acting on one, so a lagging cache can never make it mint or destroy a key.
    pub fn is_drastic(&self) -> bool {
        !matches!(self, Self::Noop { .. } | Self::Rename { .. })
    }

    /// The integration the status should name after this decision, when it is known without
    /// acting (a create or recreate names the new one once it exists).
    pub fn integration_id(&self) -> Option<Id> {
        match self {
            Self::Noop { id } | Self::Rename { id, .. } => Some(*id),
            Self::Blocked(Blocker::WebhookSecretLost { id }) => Some(*id),
            _ => None,
        }
    }
}

/// The id to look the integration up by: the one the Secret records (it holds that key), else
/// the one in status.
pub fn lookup_id(secret: &SecretView, status_id: Option<Id>) -> Option<Id> {
    secret.integration_id().or(status_id)
}

/// The rotate value still to be handled, if any.
pub fn pending_rotation<'a>(desired: &Desired<'a>, secret: &SecretView) -> Option<&'a str> {
    desired
        .rotate
        .filter(|v| Some(*v) != desired.rotated_for && Some(*v) != secret.rotated_for())
}

/// Decides the next step. See the module documentation for the rules.
pub fn plan(i: &Inputs<'_>) -> Decision {
    if *i.secret == SecretView::Foreign {
        // Whatever the server holds, a key could not be stored: never POST.
        return Decision::Blocked(Blocker::SecretConflict);
    }
    let (integration, by_external_id) = match i.server {
        ServerView::Unknown => return Decision::Create,
        ServerView::Gone(_) => {
            return Decision::Recreate {
                delete: None,
                reason: RecreateReason::DeletedOnServer,
            };
        }
        ServerView::Found(integration) => (integration, false),
        ServerView::ByExternalId(integration) => (integration, true),
    };
    let id = integration.id;
    let rotation = pending_rotation(&i.desired, i.secret);
    let recreate = |reason| Decision::Recreate {
        delete: Some(id),
        reason,
    };
    if i.secret.holds_key_of(id) {
        if let Some(value) = rotation {
            return recreate(RecreateReason::Requested {
                value: value.to_owned(),
            });
        }
        if integration.kind != i.desired.kind {
            return recreate(RecreateReason::KindChanged {
                from: integration.kind,
            });
        }
        if integration.name != i.desired.name {
            return Decision::Rename {
                id,
                from: integration.name.clone(),
            };
        }
        return Decision::Noop { id };
    }
    // No Secret holds this integration's key. Did one ever? The status records an id only
    // after its Secret was written, and the Secret records the id it holds.
    let ever_stored = i.status_id == Some(id) || i.secret.integration_id() == Some(id);
    if by_external_id && !ever_stored {
        return recreate(RecreateReason::CrashWindow);
    }
    // The key was stored once and is lost: only a spec change or an explicit request may mint
    // a new one.
    if integration.kind != i.desired.kind {
        return recreate(RecreateReason::KindChanged {
            from: integration.kind,
        });
    }
    if let Some(value) = rotation {
        return recreate(RecreateReason::Requested {
            value: value.to_owned(),
        });
    }
    Decision::Blocked(Blocker::WebhookSecretLost { id })
}

/// The changes `decision` makes, in words, for the plan in status and the last applied
/// changes (names and ids, never the key or the URL); `None` for a blocked decision, which is
/// a status, not a change.
pub fn describe(source: &TerdutAlertSource, decision: &Decision) -> Option<Vec<String>> {
    let name = &source.spec.name;
    let kind = integration_kind(source.spec.kind);
    let secret = super::names::secret_name(&source.name_any());
    Some(match decision {
        Decision::Noop { .. } => vec![],
        Decision::Rename { id, from } => {
            vec![format!("rename integration {id} from {from:?} to {name:?}")]
        }
        Decision::Create => vec![format!(
            "create the {kind} integration {name:?} and write its webhook URL and key to Secret \
             {secret}"
        )],
        Decision::Recreate { delete, reason } => {
            let why = match reason {
                RecreateReason::KindChanged { from } => format!("its kind changed from {from}"),
                RecreateReason::DeletedOnServer => "it is gone from the server".to_owned(),
                RecreateReason::CrashWindow => "no Secret holds its key".to_owned(),
                RecreateReason::Requested { value } => {
                    format!("the rotate annotation asks for it ({value:?})")
                }
            };
            let mut lines = vec![];
            if let Some(id) = delete {
                lines.push(format!("delete integration {id} ({why})"));
            }
            lines.push(format!(
                "create the {kind} integration {name:?} with a new webhook key in Secret {secret}"
            ));
            lines
        }
        Decision::Blocked(_) => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const AM: IntegrationKind = IntegrationKind::Alertmanager;
    const GF: IntegrationKind = IntegrationKind::Grafana;

    fn desired() -> Desired<'static> {
        Desired {
            kind: AM,
            name: "prod-am",
            rotate: None,
            rotated_for: None,
        }
    }

    fn integration(id: Id, kind: IntegrationKind, name: &str) -> Integration {
        Integration {
            id,
            kind,
            name: name.into(),
            external_id: "ns/am".into(),
        }
    }

    fn holding(id: Id) -> SecretView {
        SecretView::Owned(OwnedSecret {
            integration_id: Some(id),
            has_credentials: true,
            rotated_for: None,
        })
    }

    fn decide(
        desired: Desired<'_>,
        status_id: Option<Id>,
        secret: SecretView,
        server: ServerView,
    ) -> Decision {
        plan(&Inputs {
            desired,
            status_id,
            secret: &secret,
            server: &server,
        })
    }

    fn found(id: Id) -> ServerView {
        ServerView::Found(integration(id, AM, "prod-am"))
    }

    #[test]
    fn kinds_map_one_to_one() {
        for (k, want) in [
            (AlertSourceKind::Alertmanager, "alertmanager"),
            (AlertSourceKind::Grafana, "grafana"),
            (AlertSourceKind::Generic, "generic"),
        ] {
            assert_eq!(integration_kind(k).as_str(), want);
            assert_eq!(k.as_str(), want);
        }
    }

    #[test]
    fn nothing_known_creates() {
        assert_eq!(
            decide(desired(), None, SecretView::Absent, ServerView::Unknown),
            Decision::Create
        );
    }

    #[test]
    fn in_sync_is_a_noop() {
        let d = decide(desired(), Some(3), holding(3), found(3));
        assert_eq!(d, Decision::Noop { id: 3 });
        assert!(!d.is_drastic());
        assert_eq!(d.integration_id(), Some(3));
    }

    #[test]
    fn a_new_name_is_a_rename() {
        let server = ServerView::Found(integration(3, AM, "old"));
        assert_eq!(
            decide(desired(), Some(3), holding(3), server),
            Decision::Rename {
                id: 3,
                from: "old".into()
            }
        );
    }

    #[test]
    fn a_new_kind_recreates() {
        let server = ServerView::Found(integration(3, GF, "prod-am"));
        assert_eq!(
            decide(desired(), Some(3), holding(3), server),
            Decision::Recreate {
                delete: Some(3),
                reason: RecreateReason::KindChanged { from: GF }
            }
        );
    }

    #[test]
    fn an_integration_deleted_on_the_server_is_recreated() {
        let d = decide(desired(), Some(3), holding(3), ServerView::Gone(3));
        assert_eq!(
            d,
            Decision::Recreate {
                delete: None,
                reason: RecreateReason::DeletedOnServer
            }
        );
        assert!(d.is_drastic());
        // Also when the Secret is gone too: the old key is dead either way.
        assert_eq!(
            decide(desired(), Some(3), SecretView::Absent, ServerView::Gone(3)),
            d
        );
    }

    #[test]
    fn a_lost_secret_fails_closed() {
        let d = decide(desired(), Some(3), SecretView::Absent, found(3));
        assert_eq!(d, Decision::Blocked(Blocker::WebhookSecretLost { id: 3 }));
        assert_eq!(d.integration_id(), Some(3));
    }

    #[test]
    fn a_secret_without_its_key_fails_closed() {
        let emptied = SecretView::Owned(OwnedSecret {
            integration_id: Some(3),
            has_credentials: false,
            rotated_for: None,
        });
        assert_eq!(
            decide(desired(), Some(3), emptied, found(3)),
            Decision::Blocked(Blocker::WebhookSecretLost { id: 3 })
        );
    }

    #[test]
    fn a_lost_secret_also_fails_closed_when_found_by_external_id_it_was_stored_for() {
        // Status names the integration: its key was stored once, this is no crash window.
        let server = ServerView::ByExternalId(integration(3, AM, "prod-am"));
        assert_eq!(
            decide(desired(), Some(3), SecretView::Absent, server),
            Decision::Blocked(Blocker::WebhookSecretLost { id: 3 })
        );
    }

    #[test]
    fn a_lost_secret_with_a_kind_change_recreates() {
        let server = ServerView::Found(integration(3, GF, "prod-am"));
        assert_eq!(
            decide(desired(), Some(3), SecretView::Absent, server),
            Decision::Recreate {
                delete: Some(3),
                reason: RecreateReason::KindChanged { from: GF }
            }
        );
    }

    #[test]
    fn the_crash_window_deletes_and_recreates() {
        let server = ServerView::ByExternalId(integration(5, AM, "prod-am"));
        let d = decide(desired(), None, SecretView::Absent, server.clone());
        assert_eq!(
            d,
            Decision::Recreate {
                delete: Some(5),
                reason: RecreateReason::CrashWindow
            }
        );
        // Also during a recreate: the Secret still names the integration that was replaced.
        assert_eq!(decide(desired(), Some(3), holding(3), server.clone()), d);
        // Even with a kind change or a rotate request pending, the orphan goes first.
        let rotating = Desired {
            rotate: Some("r1"),
            ..desired()
        };
        assert_eq!(decide(rotating, None, SecretView::Absent, server), d);
    }

    #[test]
    fn found_by_external_id_with_its_key_in_the_secret_is_adopted() {
        let server = ServerView::ByExternalId(integration(3, AM, "prod-am"));
        assert_eq!(
            decide(desired(), None, holding(3), server),
            Decision::Noop { id: 3 }
        );
    }

    #[test]
    fn a_foreign_secret_blocks_everything() {
        for server in [
            ServerView::Unknown,
            found(3),
            ServerView::Gone(3),
            ServerView::ByExternalId(integration(3, AM, "prod-am")),
        ] {
            assert_eq!(
                decide(desired(), Some(3), SecretView::Foreign, server),
                Decision::Blocked(Blocker::SecretConflict)
            );
        }
    }

    #[test]
    fn a_new_rotate_value_rotates_once() {
        let rotating = Desired {
            rotate: Some("2026-10-01"),
            ..desired()
        };
        assert_eq!(
            decide(rotating, Some(3), holding(3), found(3)),
            Decision::Recreate {
                delete: Some(3),
                reason: RecreateReason::Requested {
                    value: "2026-10-01".into()
                }
            }
        );
        // Handled: recorded on the Secret ...
        let recorded = SecretView::Owned(OwnedSecret {
            integration_id: Some(3),
            has_credentials: true,
            rotated_for: Some("2026-10-01".into()),
        });
        assert_eq!(
            decide(rotating, Some(3), recorded, found(3)),
            Decision::Noop { id: 3 }
        );
        // ... or on the object.
        let handled = Desired {
            rotated_for: Some("2026-10-01"),
            ..rotating
        };
        assert_eq!(
            decide(handled, Some(3), holding(3), found(3)),
            Decision::Noop { id: 3 }
        );
    }

    #[test]
    fn a_lost_secret_with_a_new_rotate_value_rotates() {
        let rotating = Desired {
            rotate: Some("r2"),
            rotated_for: Some("r1"),
            ..desired()
        };
        assert_eq!(
            decide(rotating, Some(3), SecretView::Absent, found(3)),
            Decision::Recreate {
                delete: Some(3),
                reason: RecreateReason::Requested { value: "r2".into() }
            }
        );
    }

    #[test]
    fn a_lost_secret_with_an_old_rotate_value_still_fails_closed() {
        let handled = Desired {
            rotate: Some("r1"),
            rotated_for: Some("r1"),
            ..desired()
        };
        assert_eq!(
            decide(handled, Some(3), SecretView::Absent, found(3)),
            Decision::Blocked(Blocker::WebhookSecretLost { id: 3 })
        );
    }

    #[test]
    fn the_lookup_prefers_the_id_the_secret_holds() {
        assert_eq!(lookup_id(&holding(4), Some(3)), Some(4));
        assert_eq!(lookup_id(&SecretView::Absent, Some(3)), Some(3));
        assert_eq!(lookup_id(&SecretView::Foreign, None), None);
        let unannotated = SecretView::Owned(OwnedSecret {
            integration_id: None,
            has_credentials: true,
            rotated_for: None,
        });
        assert_eq!(lookup_id(&unannotated, Some(3)), Some(3));
    }

    #[test]
    fn a_secret_for_another_integration_does_not_hold_this_key() {
        // Whatever the lookup was: a Secret naming another integration does not hold this key.
        assert_eq!(
            decide(desired(), Some(3), holding(2), found(3)),
            Decision::Blocked(Blocker::WebhookSecretLost { id: 3 })
        );
    }
}
