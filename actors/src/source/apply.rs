//! Carries out a TerdutAlertSource's [`Decision`] (docs/design.md §4.5, §5): PATCH, DELETE,
//! and the POST whose url and key go straight into the webhook Secret, in the step that made
//! them (the server shows a key exactly once).
//!
//! A POST that answers 200 (the `external_id` exists) is fed back to [`plan`] as
//! [`ServerView::ByExternalId`]: an integration whose key no Secret ever held (the crash window)
//! is deleted and created again, so no orphan and no duplicate is left on the server.
//!
//! Nothing here logs or returns a Secret's data: errors carry the object's name and the API's
//! own error, which never echoes `data`.

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::EventType;
use serde_json::json;
use terdut_crds::v1alpha1::TerdutAlertSource;
use tracing::{debug, info};

use super::SourceMemory;
use super::hooks;
use super::names::{ANNOTATION_ROTATE, ANNOTATION_ROTATED_FOR, external_id, secret_name};
use super::observe::{Reachable, SecretObservation, version_hash};
use super::plan::{
    Blocker, Decision, Desired, Inputs, RecreateReason, SecretView, ServerView, desired, plan,
};
use super::secret::{controlled_by, refill, webhook_secret};
use super::status::Outcome;
use crate::api::{CreatedIntegration, Id, IntegrationCreate, TerdutClient};
use crate::context::Ctx;
use crate::error::{KubeCall, ReconcileError};
use crate::key::ObjectKey;
use crate::kind::{Kind, Written};
use crate::pipeline::Pass;
use crate::write::apply::FIELD_MANAGER;
use crate::write::events;

/// `kube_writes_total{kind}` of the webhook Secret writes is the source's kind.
const KIND: &str = Kind::Source.label();

/// Carries out `decision` (the plan of `observed`, made once by the pipeline).
pub async fn apply(
    pass: Pass<'_>,
    source: &TerdutAlertSource,
    observed: Reachable,
    decision: Decision,
    memory: &mut SourceMemory,
) -> Result<Outcome, ReconcileError> {
    let ctx = pass.ctx;
    let Reachable {
        granted,
        status_id,
        secret,
        server,
    } = observed;
    // The driver added the finalizer before any POST (`Pipeline::holds`).
    let team_name = source.spec.team_ref.name.clone();
    let target = Target {
        client: &granted.client,
        team_id: granted.team_id,
        team_name: &team_name,
    };
    let desired = desired(source);
    let executed = converge(
        ctx,
        source,
        &target,
        desired,
        status_id,
        &secret,
        server,
        Some(decision),
    )
    .await?;
    let outcome = match executed {
        Executed::InSync { id, written } => {
            memory.integration_id = Some(id);
            if written.is_some() {
                // This pass wrote the Secret with the url and key: its next passes trust the
                // cache at that version (`observe::Read::Cache`) instead of reading it again.
                memory.secret_checked = written;
            }
            Outcome::Ready {
                id,
                kind: desired.kind,
                team: team_name,
            }
        }
        Executed::Blocked(Blocker::WebhookSecretLost { id }) => Outcome::SecretLost { id },
        Executed::Blocked(Blocker::SecretConflict) => Outcome::SecretConflict,
    };
    Ok(outcome)
}

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
    /// The Secret holds the key of integration `id`, which matches the spec; `written`: the
    /// version (hashed) at which this pass wrote it, when it did.
    InSync {
        id: Id,
        written: Option<u64>,
    },
    Blocked(Blocker),
}

/// Carries out `first` (the pass's plan), and plans again only after a POST answered that the
/// `external_id` exists, until in sync or blocked.
#[allow(clippy::too_many_arguments)]
async fn converge(
    ctx: &Ctx,
    source: &TerdutAlertSource,
    target: &Target<'_>,
    desired: Desired<'_>,
    status_id: Option<Id>,
    secret: &SecretObservation,
    mut server: ServerView,
    first: Option<Decision>,
) -> Result<Executed, ReconcileError> {
    let key = ObjectKey::of(source);
    let secret_name = secret_name(&key.name);
    let mut planned = first;
    for _ in 0..MAX_ROUNDS {
        let decision = match planned.take() {
            Some(decision) => decision,
            None => {
                let decision = plan(&Inputs {
                    desired,
                    status_id,
                    secret: &secret.view,
                    server: &server,
                });
                debug!(source = %key, ?decision, "planned again");
                decision
            }
        };
        match &decision {
            Decision::Noop { id } => {
                return Ok(Executed::InSync {
                    id: *id,
                    written: None,
                });
            }
            Decision::Blocked(b) => return Ok(Executed::Blocked(b.clone())),
            Decision::Rename { id, from } => {
                target
                    .client
                    .rename_integration(target.team_id, *id, &desired.patch())
                    .await?;
                info!(source = %key, integration = id, "renamed integration");
                let note = format!(
                    "renamed integration {id} from {from:?} to {:?}; its webhook key is unchanged",
                    desired.name
                );
                events::publish(
                    ctx,
                    source,
                    EventType::Normal,
                    "IntegrationRenamed",
                    "Rename",
                    note,
                )
                .await;
                return Ok(Executed::InSync {
                    id: *id,
                    written: None,
                });
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
        let new = desired.new_integration(external_id(&key.namespace, &key.name));
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
                let written = write_secret(ctx, source, found, &created, desired.rotate).await?;
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
                events::publish(
                    ctx,
                    source,
                    EventType::Normal,
                    "IntegrationCreated",
                    "Create",
                    note,
                )
                .await;
                return Ok(Executed::InSync { id, written });
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
    events::publish(ctx, source, EventType::Warning, reason_word, action, note).await;
}

/// A user-supplied annotation value, shortened and stripped of control characters for a note.
fn printable(value: &str) -> String {
    let clean: String = value.chars().filter(|c| !c.is_control()).take(64).collect();
    format!("{clean:?}")
}

fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    }
}

fn sources(ctx: &Ctx, key: &ObjectKey) -> Api<TerdutAlertSource> {
    Api::namespaced(ctx.kube.clone(), &key.namespace)
}

/// Writes `created`'s url and key into the webhook Secret, in the step that created them.
/// `found` is the Secret as observed (controlled by this object) or `None`: a new Secret is
/// created, never applied over a Secret of someone else; an existing one of ours is replaced
/// (with its resourceVersion, re-read on a conflict). Returns the written version, hashed as
/// `observe::Read::Cache` remembers it.
async fn write_secret(
    ctx: &Ctx,
    source: &TerdutAlertSource,
    found: Option<&Secret>,
    created: &CreatedIntegration,
    rotated_for: Option<&str>,
) -> Result<Option<u64>, ReconcileError> {
    let invalid = |e: super::secret::MissingMetadata| ReconcileError::Invalid(e.to_string());
    let ns = source.namespace().unwrap_or_default();
    let api: Api<Secret> = Api::namespaced(ctx.kube.clone(), &ns);
    let fresh = webhook_secret(source, created, rotated_for).map_err(invalid)?;
    let name = fresh.name_any();
    let what = || format!("Secret {ns}/{name}");
    let uid = source.uid().unwrap_or_default();
    let mut current = found.cloned();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let result = match current.take() {
            None => {
                ctx.metrics.kube_write(KIND, "create");
                api.create(&post_params(), &fresh).await
            }
            Some(existing) => {
                let next = refill(existing, source, created, rotated_for).map_err(invalid)?;
                ctx.metrics.kube_write(KIND, "replace");
                api.replace(&name, &post_params(), &next).await
            }
        };
        match result {
            Ok(written) => {
                // Its watch event is this pass's own write, no reason for another.
                ctx.own_writes.record(
                    Written::WebhookSecret,
                    &ObjectKey::new(ns.clone(), name.clone()),
                    written.resource_version(),
                );
                return Ok(written.resource_version().as_deref().map(version_hash));
            }
            // Created meanwhile, or changed since it was read: look again; ours is replaced,
            // anyone else's is left alone.
            Err(kube::Error::Api(e)) if e.code == 409 && attempt < 3 => {
                let live = api
                    .get_opt(&name)
                    .await
                    .map_err(|e| ReconcileError::kube(KubeCall::ReadWebhookSecret, what(), e))?;
                match live {
                    Some(s) if controlled_by(&s, &uid) => current = Some(s),
                    // Someone else's: never overwritten. The conflict is retried, and the next
                    // pass reports WebhookSecretConflict before it would POST again.
                    Some(_) => {
                        return Err(ReconcileError::kube(
                            KubeCall::WebhookSecretTaken,
                            what(),
                            kube::Error::Api(e),
                        ));
                    }
                    None => current = None,
                }
            }
            Err(e) => {
                return Err(ReconcileError::kube(
                    KubeCall::WriteWebhookSecret,
                    what(),
                    e,
                ));
            }
        }
    }
}

/// Records on the object that the rotate value `value` was handled; survives a lost Secret, so
/// an old value never mints a key again.
async fn record_rotation(
    ctx: &Ctx,
    source: &TerdutAlertSource,
    value: &str,
) -> Result<(), ReconcileError> {
    if source
        .annotations()
        .get(ANNOTATION_ROTATED_FOR)
        .map(String::as_str)
        == Some(value)
    {
        return Ok(());
    }
    let key = ObjectKey::of(source);
    let patch = json!({"metadata": {"annotations": {ANNOTATION_ROTATED_FOR: value}}});
    ctx.metrics.kube_write(KIND, "annotate");
    sources(ctx, &key)
        .patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|e| {
            ReconcileError::kube(
                KubeCall::AnnotateSource,
                format!("TerdutAlertSource {key}"),
                e,
            )
        })
}

/// Who set the rotate annotation: the field manager that owns it in `managedFields` (the
/// informer cache strips them, so this reads the object). `None` when it cannot be told.
async fn rotation_requester(ctx: &Ctx, key: &ObjectKey) -> Option<String> {
    let source = sources(ctx, key).get(&key.name).await.ok()?;
    let field = format!("f:{ANNOTATION_ROTATE}");
    source
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| {
            m.fields_v1
                .as_ref()
                .is_some_and(|f| f.0["f:metadata"]["f:annotations"].get(&field).is_some())
        })
        .max_by_key(|m| m.time.as_ref().map(|t| t.0))
        .and_then(|m| m.manager.clone())
}
