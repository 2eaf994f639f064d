//! Children resolve through the team (DESIGN §5): a TerdutAlertSource finds its TerdutTeam in
//! its own namespace, requires it Ready with a `teamID`, and takes the API client the actor of
//! the team's TerdutServer published. The team's pass checks cross-namespace consent, so a
//! Ready team is a permitted one.

use std::sync::Arc;

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use terdut_crds::v1alpha1::conditions::{READY, find, is_ready};
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutTeam};

use crate::api::{Id, TerdutClient};
use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::key::ObjectKey;
use crate::server::actor::{Credentials, published_credentials};
use crate::server::observe::team_server_key;

/// The team as far as its sources are concerned.
#[derive(Debug)]
pub enum TeamView {
    /// Ready, with its id on the server and the key of its TerdutServer.
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
/// `Credentials` message gives, without queueing behind its passes, issue 8).
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
