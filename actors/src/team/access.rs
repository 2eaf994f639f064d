//! How a team actor gets to its server: the TerdutServer must exist, its actor must run, the
//! server must consent (DESIGN §4.6, re-asked every pass) and its actor must have built an API
//! client carrying the operator key (DESIGN §6). The actor publishes that client
//! (`Ctx::clients`) and consent is decided from the caches, so a team pass never waits for the
//! server actor (which never calls a team actor either).

use std::sync::Arc;

use kube::runtime::reflector::ObjectRef;

use super::status::Outcome;
use crate::api::TerdutClient;
use crate::consent::Consent;
use crate::context::Ctx;
use crate::key::ObjectKey;
use crate::server::actor::{Credentials, consent, published_credentials};

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

/// Asks for consent (when `check_consent`: a deletion does not need it, DESIGN §4.6 last
/// bullet) and for the client of `server`, for a team in `team_namespace`. Both are answered
/// from what the server's running actor published and the caches, the same answers its
/// `Consent` and `Credentials` messages give, without queueing behind its passes (issue 8).
pub async fn access(
    ctx: &Ctx,
    team_namespace: &str,
    server: &ObjectKey,
    check_consent: bool,
) -> Access {
    if !server_cached(ctx, server) {
        return Access::Denied(Outcome::ServerRefNotFound);
    }
    if !ctx.servers.contains_key(server) {
        return Access::Denied(Outcome::WaitingForServer(format!(
            "the operator has not started reconciling TerdutServer {server} yet"
        )));
    }
    let Some(credentials) = published_credentials(ctx, server) else {
        let what = if check_consent {
            "the consent question"
        } else {
            "for credentials"
        };
        return Access::Denied(Outcome::WaitingForServer(format!(
            "TerdutServer {server}'s actor did not answer {what}: it is restarting"
        )));
    };
    if check_consent && let Consent::Refused(why) = consent(ctx, server, team_namespace) {
        return Access::Denied(Outcome::RefNotPermitted(why));
    }
    match credentials {
        Credentials::Ready(client) => Access::Granted(client),
        Credentials::NotReady(why) => Access::Denied(Outcome::WaitingForServer(why)),
    }
}
