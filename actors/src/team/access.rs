//! How a team actor gets to its server: the TerdutServer must exist, its actor must run, the
//! actor must consent (DESIGN §4.6, re-asked every pass) and hand out an API client carrying
//! the operator key (DESIGN §6). The server actor answers from its own state and never calls a
//! team actor, so these calls cannot deadlock; each is bounded by `config.call_timeout`.

use std::sync::Arc;

use kube::runtime::reflector::ObjectRef;
use ractor::rpc::CallResult;

use super::status::Outcome;
use crate::api::TerdutClient;
use crate::consent::Consent;
use crate::context::Ctx;
use crate::key::ObjectKey;
use crate::server::actor::{Credentials, ServerMsg};

/// The answer: a client, or why there is none (a Ready reason).
#[derive(Debug)]
pub enum Access {
    Granted(Arc<TerdutClient>),
    Denied(Outcome),
}

/// Whether the TerdutServer `server` is in the informer cache.
pub fn server_cached(ctx: &Ctx, server: &ObjectKey) -> bool {
    ctx.stores
        .servers
        .get(&ObjectRef::new(&server.name).within(&server.namespace))
        .is_some()
}

/// Asks the actor of `server` for consent (when `check_consent`: a deletion does not need it,
/// DESIGN §4.6 last bullet) and for its client, for a team in `team_namespace`.
pub async fn access(
    ctx: &Ctx,
    team_namespace: &str,
    server: &ObjectKey,
    check_consent: bool,
) -> Access {
    if !server_cached(ctx, server) {
        return Access::Denied(Outcome::ServerRefNotFound);
    }
    let Some(actor) = ctx.servers.get(server).map(|r| r.clone()) else {
        return Access::Denied(Outcome::WaitingForServer(format!(
            "the operator has not started reconciling TerdutServer {server} yet"
        )));
    };
    let timeout = ctx.config.call_timeout;
    let unanswered = |what: &str, r: Option<&str>| {
        Access::Denied(Outcome::WaitingForServer(match r {
            Some(r) => format!("TerdutServer {server}'s actor did not answer {what}: {r}"),
            None => {
                format!("TerdutServer {server}'s actor did not answer {what} within {timeout:?}")
            }
        }))
    };
    if check_consent {
        let namespace = team_namespace.to_owned();
        match actor
            .call(
                |reply| ServerMsg::Consent { namespace, reply },
                Some(timeout),
            )
            .await
        {
            Ok(CallResult::Success(Consent::Allowed)) => {}
            Ok(CallResult::Success(Consent::Refused(why))) => {
                return Access::Denied(Outcome::RefNotPermitted(why));
            }
            Ok(CallResult::Timeout) => return unanswered("the consent question", None),
            Ok(CallResult::SenderError) | Err(_) => {
                return unanswered("the consent question", Some("it is restarting"));
            }
        }
    }
    match actor.call(ServerMsg::Credentials, Some(timeout)).await {
        Ok(CallResult::Success(Credentials::Ready(client))) => Access::Granted(client),
        Ok(CallResult::Success(Credentials::NotReady(why))) => {
            Access::Denied(Outcome::WaitingForServer(why))
        }
        Ok(CallResult::Timeout) => unanswered("for credentials", None),
        Ok(CallResult::SenderError) | Err(_) => {
            unanswered("for credentials", Some("it is restarting"))
        }
    }
}
