//! The observing half of a TerdutAlertSource pass (docs/design.md §4.5, §5). Children resolve
//! through the team, but trust nothing a tenant can write (docs/security.md):
//!
//! - the team must exist, be Ready with a `teamID`, its server must accept this namespace
//!   (the same consent function as the team's, asked of the parent), and the server must
//!   confirm that id is `<namespace>/<teamRef>` before any integration is created, renamed,
//!   rotated or deleted on it;
//! - the webhook Secret comes from the cache (a live read before anything drastic);
//! - the integration named by the Secret (else by the status) is looked up by id every pass,
//!   which is how a deletion on the server is noticed at the next resync, and kept only when
//!   the server says it is this source's.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use terdut_crds::v1alpha1::conditions::{READY, find, is_ready};
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutTeam};
use tracing::warn;

use super::SourceMemory;
use super::names::{ANNOTATION_INTEGRATION_ID, external_id, secret_name, validate_source_name};
use super::plan::{Inputs, SecretView, ServerView, desired, lookup_id, plan};
use super::secret::{describe, view, view_of_metadata};
use super::status::Outcome;
use crate::api::{ApiError, Id, TerdutClient};
use crate::consent::Consent;
use crate::context::Ctx;
use crate::error::{KubeCall, ReconcileError};
use crate::key::ObjectKey;
use crate::pipeline::{Observation, Pass};
use crate::server::observe::team_server_key;
use crate::team::plan::external_id as team_external_id;
use crate::tree::Credentials;
use crate::write::events;

/// A source whose team and server are proven, with its Secret and integration as found.
#[derive(Debug)]
pub struct Reachable {
    pub granted: Granted,
    /// `status.integrationID` (a hint).
    pub status_id: Option<Id>,
    pub secret: SecretObservation,
    pub server: ServerView,
}

pub async fn observe(
    pass: Pass<'_>,
    source: &TerdutAlertSource,
    memory: &mut SourceMemory,
) -> Result<Observation<Reachable, Outcome>, ReconcileError> {
    let ctx = pass.ctx;
    let key = ObjectKey::of(source);
    if let Err(m) = validate_source_name(&key.name) {
        return Ok(Observation::End(Outcome::InvalidSpec(m)));
    }
    let granted = match access(pass, source).await? {
        Access::Granted(g) => g,
        Access::Denied(outcome) => return Ok(Observation::End(outcome)),
    };
    let status_id = source.status.as_ref().and_then(|s| s.integration_id);
    let uid = source.uid().unwrap_or_default();
    let name = secret_name(&key.name);
    let cached = Read::Cache {
        checked: memory.secret_checked,
    };
    let mut secret = self::secret(ctx, &key.namespace, &name, &uid, cached).await?;
    let mut server = integration(
        ctx,
        source,
        &granted.client,
        granted.team_id,
        &secret.view,
        status_id,
    )
    .await?;
    // The integration this runtime itself last had Ready is gone: the server lost its data
    // (docs/design.md §5), so every team and source of it looks now.
    if let ServerView::Gone(id) = &server
        && memory.integration_id == Some(*id)
    {
        pass.parent.data_lost(&granted.server);
    }
    let first = plan(&Inputs {
        desired: desired(source),
        status_id,
        secret: &secret.view,
        server: &server,
    });
    if first.is_drastic() && !secret.live {
        // Never mint, destroy or fail closed on a cache's word: read the Secret itself (once:
        // a first read that already went to the API server, e.g. for an absent Secret, is
        // that read).
        secret = self::secret(ctx, &key.namespace, &name, &uid, Read::Live).await?;
        server = integration(
            ctx,
            source,
            &granted.client,
            granted.team_id,
            &secret.view,
            status_id,
        )
        .await?;
    }
    memory.secret_checked = secret.checked;
    Ok(Observation::Go(Reachable {
        granted,
        status_id,
        secret,
        server,
    }))
}

/// The team as far as its sources are concerned, from the cache (nothing proven yet).
#[derive(Debug)]
pub enum TeamView {
    /// Ready, with the id its status claims and the key of its TerdutServer.
    Ready {
        team: Arc<TerdutTeam>,
        team_id: Id,
        server: ObjectKey,
    },
    /// No TerdutTeam of that name in the namespace.
    NotFound,
    /// It exists but is not Ready (or has no `teamID` yet); why, for the condition.
    NotReady { team: Arc<TerdutTeam>, why: String },
}

/// Looks the team up in the cache.
pub fn team(ctx: &Ctx, source: &TerdutAlertSource) -> TeamView {
    let ns = source.namespace().unwrap_or_default();
    let Some(team) = ctx
        .stores
        .teams
        .get(&ObjectRef::new(&source.spec.team_ref.name).within(&ns))
    else {
        return TeamView::NotFound;
    };
    let status = team.status.clone().unwrap_or_default();
    let ready = is_ready(&status.conditions);
    match (ready, status.team_id) {
        (true, Some(team_id)) => TeamView::Ready {
            server: team_server_key(&team),
            team,
            team_id,
        },
        (_, team_id) => {
            let why = match find(&status.conditions, READY) {
                Some(c) if c.status != "True" => format!("{}: {}", c.reason, c.message),
                Some(_) if team_id.is_none() => "it has no status.teamID yet".to_owned(),
                Some(_) => "not Ready".to_owned(),
                None => "the operator has not reported on it yet".to_owned(),
            };
            TeamView::NotReady { team, why }
        }
    }
}

/// Everything a pass may act with, proven.
#[derive(Debug)]
pub struct Granted {
    pub client: Arc<TerdutClient>,
    /// Confirmed by the server to be `<namespace>/<teamRef>`.
    pub team_id: Id,
    pub server: ObjectKey,
}

/// The answer of [`access`].
#[derive(Debug)]
pub enum Access {
    Granted(Granted),
    /// Why not, as the status should say.
    Denied(Outcome),
}

/// Resolves and proves the team of `source` for a convergence pass: the team Ready with an id,
/// its server's consent for this namespace, the server's client, and the server's word that
/// the id is this team.
pub async fn access(pass: Pass<'_>, source: &TerdutAlertSource) -> Result<Access, ReconcileError> {
    let ctx = pass.ctx;
    let team_name = source.spec.team_ref.name.clone();
    let (team_id, server) = match team(ctx, source) {
        TeamView::NotFound => return Ok(Access::Denied(Outcome::TeamNotFound { team: team_name })),
        TeamView::NotReady { why, .. } => {
            return Ok(Access::Denied(Outcome::WaitingForTeam {
                team: team_name,
                detail: why,
            }));
        }
        TeamView::Ready {
            team_id, server, ..
        } => (team_id, server),
    };
    let namespace = source.namespace().unwrap_or_default();
    let asked = pass.parent.access(ctx, &server, &namespace).await;
    if let Consent::Refused(why) = asked.consent {
        return Ok(Access::Denied(Outcome::RefNotPermitted(why)));
    }
    let client = match asked.credentials {
        Credentials::Ready(c) => c,
        Credentials::NotReady(detail) => {
            return Ok(Access::Denied(Outcome::WaitingForServer { detail }));
        }
    };
    match verify_team(&client, team_id, &namespace, &team_name).await? {
        TeamCheck::Ours => Ok(Access::Granted(Granted {
            client,
            team_id,
            server,
        })),
        TeamCheck::NotOurs(detail) => Ok(Access::Denied(Outcome::TeamUnverified {
            team: team_name,
            detail: format!("{detail}; waiting for the TerdutTeam's next pass to correct it"),
        })),
    }
}

/// What the server says about a team id a status or a memory claims.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TeamCheck {
    /// It is `<namespace>/<team>`.
    Ours,
    /// It is another team or none; the message says which without naming another tenant's.
    NotOurs(String),
}

/// Asks the server whether team `team_id` is the TerdutTeam `namespace/team`.
pub async fn verify_team(
    client: &TerdutClient,
    team_id: Id,
    namespace: &str,
    team: &str,
) -> Result<TeamCheck, ReconcileError> {
    let want = team_external_id(&ObjectKey::new(namespace, team));
    match client.get_team(team_id).await {
        Ok(t) if t.id == team_id && t.external_id == want => Ok(TeamCheck::Ours),
        // Never echo the other team's external_id or name: it may be another tenant's.
        Ok(_) => Ok(TeamCheck::NotOurs(format!(
            "status.teamID {team_id} of TerdutTeam {team} names a team on the server that is not \
             {want}, so it is not used"
        ))),
        Err(ApiError::NotFound) => Ok(TeamCheck::NotOurs(format!(
            "status.teamID {team_id} of TerdutTeam {team} names no team on the server"
        ))),
        Err(e) => Err(e.into()),
    }
}

/// Where to read the Secret from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read {
    /// The informer cache, which holds the metadata of Secrets of the operator's shape only
    /// (`cached.rs`; it may lag a write by a moment). The data is read live, unless the cached
    /// version is one this runtime itself saw holding the url and key (`checked`, a hash of
    /// that resourceVersion: any write of the Secret, by anyone, gives it a new one).
    Cache { checked: Option<u64> },
    /// A GET: sees every Secret of that name (a foreign one too) as it is now.
    Live,
}

/// The webhook Secret as found (for rewriting it) and as the planner sees it.
#[derive(Clone)]
pub struct SecretObservation {
    /// The Secret as read live (`None` when it was not read, or does not exist). Never
    /// `Debug`-print the Secret itself: its data is the key.
    pub object: Option<Arc<Secret>>,
    pub view: SecretView,
    /// The version (hashed) at which this runtime saw the Secret hold this source's url and
    /// key: what [`Read::Cache`] may trust next time.
    pub checked: Option<u64>,
    /// Read by a GET just now ([`Read::Live`], or a cache that could not be trusted), not
    /// from the cache.
    pub live: bool,
}

impl std::fmt::Debug for SecretObservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretObservation")
            .field("object", &self.object.as_deref().map(describe))
            .field("view", &self.view)
            .field("checked", &self.checked)
            .field("live", &self.live)
            .finish()
    }
}

/// Reads the webhook Secret `name` in `namespace` (see [`Read`]). An absent Secret is always
/// confirmed live: the cache may lag the create of a moment ago.
pub async fn secret(
    ctx: &Ctx,
    namespace: &str,
    name: &str,
    source_uid: &str,
    read: Read,
) -> Result<SecretObservation, ReconcileError> {
    if let Read::Cache {
        checked: Some(checked),
    } = read
        && let Some(cached) = ctx
            .stores
            .secrets
            .get(&ObjectRef::new(name).within(namespace))
        && cached
            .metadata
            .resource_version
            .as_deref()
            .map(version_hash)
            == Some(checked)
        && let view @ SecretView::Owned(_) = view_of_metadata(&cached.metadata, source_uid, true)
    {
        return Ok(SecretObservation {
            object: None,
            view,
            checked: Some(checked),
            live: false,
        });
    }
    let api: Api<Secret> = Api::namespaced(ctx.kube.clone(), namespace);
    let object = api
        .get_opt(name)
        .await
        .map_err(|e| {
            ReconcileError::kube(
                KubeCall::ReadWebhookSecret,
                format!("Secret {namespace}/{name}"),
                e,
            )
        })?
        .map(Arc::new);
    let view = view(object.as_deref(), source_uid);
    let checked = match (&view, &object) {
        (SecretView::Owned(o), Some(s)) if o.has_credentials => {
            s.metadata.resource_version.as_deref().map(version_hash)
        }
        _ => None,
    };
    Ok(SecretObservation {
        object,
        view,
        checked,
        live: true,
    })
}

/// A resourceVersion as [`Read::Cache`] remembers it: 8 bytes per source, not the string.
pub fn version_hash(rv: &str) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut h = std::hash::DefaultHasher::new();
    rv.hash(&mut h);
    h.finish()
}

/// Looks up the integration the Secret (else the status) names, and keeps it only if the
/// server says it is this source's (`external_id == <namespace>/<name>`). Both ids are hints a
/// tenant can write (its own Secret's annotation, its own status): an id naming someone else's
/// integration is dropped with a Warning, and the pass goes on as if none were recorded, so it
/// never renames, rotates or deletes an integration it did not make.
pub async fn integration(
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
    events::publish(
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
