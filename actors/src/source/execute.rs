//! Carries out a TerdutAlertSource's [`Decision`] against the server: PATCH, DELETE, and the
//! POST whose url and key go straight into the webhook Secret.
//!
//! A POST that answers 200 (the `external_id` exists) is fed back to [`plan`] as
//! [`ServerView::ByExternalId`]: an integration whose key no Secret ever held (the crash window)
//! is deleted and created again, so no orphan and no duplicate is left on the server.

use kube::runtime::events::EventType;
use terdut_crds::v1alpha1::TerdutAlertSource;
use tracing::{debug, info};

use super::apply::{event, record_rotation, rotation_requester, write_secret};
use super::hooks;
use super::names::{ANNOTATION_ROTATE, external_id, secret_name};
use super::observe::SecretObservation;
use super::plan::{
    Blocker, Decision, Desired, Inputs, RecreateReason, SecretView, ServerView, plan,
};
use crate::api::{Id, IntegrationCreate, NewIntegration, TerdutClient};
use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::key::ObjectKey;

/// A create that answers "exists" more often than this in one pass means someone else keeps
/// creating the integration; the pass fails and retries later.
const MAX_ROUNDS: usize = 3;

/// Where the integration lives and how to reach it.
#[derive(Debug)]
pub struct Target<'a> {
    pub client: &'a TerdutClient,
    pub team_id: Id,
    pub team_name: &'a str,
}

/// How a pass ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Executed {
    /// The Secret holds the key of integration `id`, which matches the spec.
    InSync {
        id: Id,
    },
    Blocked(Blocker),
}

/// Plans and carries out until in sync or blocked.
pub async fn converge(
    ctx: &Ctx,
    source: &TerdutAlertSource,
    target: &Target<'_>,
    desired: Desired<'_>,
    status_id: Option<Id>,
    secret: &SecretObservation,
    mut server: ServerView,
) -> Result<Executed, ReconcileError> {
    let key = ObjectKey::of(source);
    let secret_name = secret_name(&key.name);
    for _ in 0..MAX_ROUNDS {
        let decision = plan(&Inputs {
            desired,
            status_id,
            secret: &secret.view,
            server: &server,
        });
        debug!(source = %key, ?decision, "planned");
        match &decision {
            Decision::Noop { id } => return Ok(Executed::InSync { id: *id }),
            Decision::Blocked(b) => return Ok(Executed::Blocked(b.clone())),
            Decision::Rename { id, from } => {
                target
                    .client
                    .rename_integration(target.team_id, *id, desired.name)
                    .await?;
                info!(source = %key, integration = id, "renamed integration");
                let note = format!(
                    "renamed integration {id} from {from:?} to {:?}; its webhook key is unchanged",
                    desired.name
                );
                event(
                    ctx,
                    source,
                    EventType::Normal,
                    "IntegrationRenamed",
                    "Rename",
                    note,
                )
                .await;
                return Ok(Executed::InSync { id: *id });
            }
            Decision::Create => {}
            Decision::Recreate { delete, reason } => {
                if let Some(id) = delete {
                    target
                        .client
                        .delete_integration(target.team_id, *id)
                        .await?;
                }
                let old = delete.or(match &server {
                    ServerView::Gone(id) => Some(*id),
                    _ => None,
                });
                info!(source = %key, integration = ?old, ?reason, "recreating integration");
                announce_recreate(ctx, source, &key, reason, old, &secret_name).await;
            }
        }
        let new = NewIntegration {
            kind: desired.kind,
            name: desired.name.to_owned(),
            external_id: external_id(&key.namespace, &key.name),
        };
        match target
            .client
            .create_integration(target.team_id, &new)
            .await?
        {
            IntegrationCreate::Created(created) => {
                let id = created.integration.id;
                hooks::after_create(ctx, source, id);
                let found = match &secret.view {
                    SecretView::Owned(_) => secret.object.as_deref(),
                    _ => None,
                };
                write_secret(ctx, source, found, &created, desired.rotate).await?;
                drop(created);
                info!(source = %key, integration = id, "created integration; key stored in its Secret");
                if let Some(v) = desired.rotate {
                    record_rotation(ctx, source, v).await?;
                }
                let note = format!(
                    "created integration {id} ({}) on TerdutTeam {}; its webhook URL and key are \
                     in Secret {secret_name}",
                    desired.kind, target.team_name
                );
                event(
                    ctx,
                    source,
                    EventType::Normal,
                    "IntegrationCreated",
                    "Create",
                    note,
                )
                .await;
                return Ok(Executed::InSync { id });
            }
            IntegrationCreate::Existing(integration) => {
                debug!(source = %key, integration = integration.id, "the external_id exists on the team");
                server = ServerView::ByExternalId(integration);
            }
        }
    }
    Err(ReconcileError::Invalid(format!(
        "integration {} kept reappearing on the server while being replaced; something else \
         creates it",
        external_id(&key.namespace, &key.name)
    )))
}

/// The Warning (or, for the crash window, the explanation) of a recreate, published right
/// after the old integration was deleted: from then on its key no longer works.
async fn announce_recreate(
    ctx: &Ctx,
    source: &TerdutAlertSource,
    key: &ObjectKey,
    reason: &RecreateReason,
    old: Option<Id>,
    secret_name: &str,
) {
    let old = old.map_or_else(
        || "the integration".to_owned(),
        |id| format!("integration {id}"),
    );
    let consequence = format!(
        "the old webhook key no longer works: update what sends alerts from Secret {secret_name}, \
         which gets the new URL and key"
    );
    let (reason_word, action, note) = match reason {
        RecreateReason::KindChanged { from } => (
            "WebhookKeyRotated",
            "RecreateForKindChange",
            format!(
                "spec.kind changed from {from} to {}: deleted {old} to create it again; {consequence}",
                source.spec.kind.as_str()
            ),
        ),
        RecreateReason::DeletedOnServer => (
            "WebhookKeyRotated",
            "RecreateDeletedOnServer",
            format!(
                "{old} no longer exists on the server (deleted there); creating it again; \
                 {consequence}"
            ),
        ),
        RecreateReason::Requested { value } => {
            let who = rotation_requester(ctx, key)
                .await
                .unwrap_or_else(|| "an unknown field manager".to_owned());
            (
                "WebhookKeyRotated",
                "RecreateOnRequest",
                format!(
                    "rotation requested by {who} ({ANNOTATION_ROTATE}={}): deleted {old} to create \
                     it again; {consequence}",
                    printable(value)
                ),
            )
        }
        RecreateReason::CrashWindow => (
            "OrphanIntegrationReplaced",
            "RecreateOrphan",
            format!(
                "{old} exists on the server under this object's external_id, but no Secret ever \
                 held its key (the operator stopped between creating it and storing the key), so \
                 nothing can be using it: deleted it to create it again with a key that is stored"
            ),
        ),
    };
    // All Warnings: a key in use stops working, or (crash window) the operator crashed
    // mid-create.
    event(ctx, source, EventType::Warning, reason_word, action, note).await;
}

/// A user-supplied annotation value, shortened and stripped of control characters for a note.
fn printable(value: &str) -> String {
    let clean: String = value.chars().filter(|c| !c.is_control()).take(64).collect();
    format!("{clean:?}")
}
