//! The observing half of a TerdutAlertSource pass: the webhook Secret (cache, or a live read
//! before anything drastic) and the integration on the server (a GET by id every pass, which is
//! how a deletion on the server is noticed at the next resync, DESIGN §5), kept only when the
//! server says it is this source's.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;

use kube::runtime::events::EventType;
use terdut_crds::v1alpha1::TerdutAlertSource;
use tracing::warn;

use super::apply::event;
use super::names::{ANNOTATION_INTEGRATION_ID, external_id};
use super::plan::{SecretView, ServerView, lookup_id};
use super::secret::{describe, view};
use crate::api::{ApiError, Id, TerdutClient};
use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::key::ObjectKey;

/// Where to read the Secret from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read {
    /// The informer cache: cheap, may lag a write by a moment, and sees only Secrets labelled
    /// `terdut.ryuvia.com/managed=true`.
    Cache,
    /// A GET: sees every Secret of that name (a foreign one too) as it is now.
    Live,
}

/// The webhook Secret as found (for rewriting it) and as the planner sees it.
#[derive(Clone)]
pub struct SecretObservation {
    /// Never `Debug`-print the Secret itself: its data is the key.
    pub object: Option<Arc<Secret>>,
    pub view: SecretView,
}

impl std::fmt::Debug for SecretObservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretObservation")
            .field("object", &self.object.as_deref().map(describe))
            .field("view", &self.view)
            .finish()
    }
}

/// Reads the webhook Secret `name` in `namespace`. With [`Read::Cache`], an absent Secret is
/// confirmed live: the cache sees only labelled Secrets and may lag the create of a moment ago.
pub async fn secret(
    ctx: &Ctx,
    namespace: &str,
    name: &str,
    source_uid: &str,
    read: Read,
) -> Result<SecretObservation, ReconcileError> {
    let cached = match read {
        Read::Cache => ctx
            .stores
            .secrets
            .get(&ObjectRef::new(name).within(namespace)),
        Read::Live => None,
    };
    let object = match cached {
        Some(s) => Some(s),
        None => {
            let api: Api<Secret> = Api::namespaced(ctx.kube.clone(), namespace);
            api.get_opt(name)
                .await
                .map_err(|e| ReconcileError::kube("get", format!("Secret {namespace}/{name}"), e))?
                .map(Arc::new)
        }
    };
    let view = view(object.as_deref(), source_uid);
    Ok(SecretObservation { object, view })
}

/// Looks up the integration the Secret (else the status) names, and keeps it only if the
/// server says it is this source's (`external_id == <namespace>/<name>`). Both ids are hints a
/// tenant can write (its own Secret's annotation, its own status): an id naming someone else's
/// integration is dropped with a Warning, and the pass goes on as if none were recorded, so it
/// never renames, rotates or deletes an integration it did not make.
pub async fn server(
    ctx: &Ctx,
    source: &TerdutAlertSource,
    client: &TerdutClient,
    team_id: Id,
    secret: &SecretView,
    status_id: Option<Id>,
) -> Result<ServerView, ReconcileError> {
    let Some(id) = lookup_id(secret, status_id) else {
        return Ok(ServerView::Unknown);
    };
    let key = ObjectKey::of(source);
    let want = external_id(&key.namespace, &key.name);
    match client.get_integration(team_id, id).await {
        Ok(integration) if integration.id == id && integration.external_id == want => {
            Ok(ServerView::Found(integration))
        }
        Ok(integration) if integration.id == id => {
            foreign_hint(ctx, source, id, &want).await;
            Ok(ServerView::Unknown)
        }
        // A server answering with another id than asked for breaks the contract.
        Ok(_) => Err(ReconcileError::Api(ApiError::Unexpected {
            status: 200,
            code: Some("id_mismatch".into()),
        })),
        Err(ApiError::NotFound) => Ok(ServerView::Gone(id)),
        Err(e) => Err(e.into()),
    }
}

/// The Warning for a recorded integration id that is not this source's. It names neither the
/// other integration nor its team: they may be another tenant's.
async fn foreign_hint(ctx: &Ctx, source: &TerdutAlertSource, id: Id, want: &str) {
    warn!(source = %ObjectKey::of(source), integration = id, "recorded integration id is not this source's; ignored");
    event(
        ctx,
        source,
        EventType::Warning,
        "IntegrationIDRejected",
        "Reconcile",
        format!(
            "integration {id}, recorded in the annotation {ANNOTATION_INTEGRATION_ID} of the \
             webhook Secret or in status.integrationID, is not {want} on the server; it is \
             ignored and never renamed, rotated or deleted, and the integration is looked up by \
             its external_id instead"
        ),
    )
    .await;
}
