//! Children resolve through the team (DESIGN §5), but trust nothing a tenant can write: a
//! TerdutAlertSource finds its TerdutTeam in its own namespace and waits until it is Ready with
//! a `teamID`, and then proves everything that Ready status claims before using it
//! (docs/security.md):
//!
//! - **consent**: the team's TerdutServer must accept TerdutTeams from this namespace, decided
//!   by the same function the team's own pass uses (`server::actor::consent`). A tenant who can
//!   write `terdutteams/status` can make a refused team look Ready; that does not make its
//!   server accept it.
//! - **identity**: `status.teamID` is a hint. The server must confirm that team has
//!   `external_id == <namespace>/<teamRef>` (one GET) before any integration is created,
//!   renamed, rotated or deleted on it; a forged or stale id names someone else's team, or none.
//!
//! What is proven is [`Access::Granted`]; anything else is the reason the pass waits.

use std::sync::Arc;

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use terdut_crds::v1alpha1::conditions::{READY, find, is_ready};
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutTeam};

use super::status::Outcome;
use crate::api::{ApiError, Id, TerdutClient};
use crate::consent::Consent;
use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::key::ObjectKey;
use crate::server::actor::{Credentials, consent, published_credentials};
use crate::server::observe::team_server_key;
use crate::team::plan::external_id as team_external_id;

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

/// What asking the server's actor for credentials gave.
#[derive(Debug)]
pub enum ServerAccess {
    Ready(Arc<TerdutClient>),
    /// No actor for that server, or it has no usable key yet; why, for the condition.
    NotReady(String),
}

/// The API client of TerdutServer `server`, as its running actor published it (the answer its
/// `Credentials` message gives, without queueing behind its passes).
pub async fn credentials(ctx: &Ctx, server: &ObjectKey) -> Result<ServerAccess, ReconcileError> {
    if !ctx.servers.contains_key(server) {
        let exists = ctx
            .stores
            .servers
            .get(&ObjectRef::new(&server.name).within(&server.namespace))
            .is_some();
        let why = if exists {
            format!("TerdutServer {server} is starting")
        } else {
            format!("TerdutServer {server} does not exist")
        };
        return Ok(ServerAccess::NotReady(why));
    }
    match published_credentials(ctx, server) {
        Some(Credentials::Ready(client)) => Ok(ServerAccess::Ready(client)),
        Some(Credentials::NotReady(why)) => Ok(ServerAccess::NotReady(why)),
        None => Err(ReconcileError::Actor {
            what: format!("TerdutServer {server} for credentials"),
            reason: "it is not running".into(),
        }),
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
pub async fn access(ctx: &Ctx, source: &TerdutAlertSource) -> Result<Access, ReconcileError> {
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
    if let Consent::Refused(why) = consent(ctx, &server, &namespace) {
        return Ok(Access::Denied(Outcome::RefNotPermitted(why)));
    }
    let client = match credentials(ctx, &server).await? {
        ServerAccess::Ready(c) => c,
        ServerAccess::NotReady(detail) => {
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
