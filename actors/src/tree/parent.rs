//! What a team or alert-source pass asks of its parent: the API client of its TerdutServer
//! (with the operator key, docs/design.md §6) and whether that server accepts the object's
//! namespace (§4.6). One question carries both ([`Access`]): a server actor answers it from its
//! state, at once, and a pass asks once rather than twice (each round trip is a hop through
//! the runtime's queue, docs/performance.md run 16). The holding supervisor answers why there
//! is no server to use.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use kube::runtime::reflector::ObjectRef;

use crate::api::TerdutClient;
use crate::consent::{Consent, decide};
use crate::context::Ctx;
use crate::key::ObjectKey;

/// What a child gets when it asks for credentials.
#[derive(Clone, Debug)]
pub enum Credentials {
    /// The server accepts the operator key; this client carries it.
    Ready(Arc<TerdutClient>),
    /// No usable key yet, or the server rejects it; why (for the child's condition).
    NotReady(String),
}

/// A server's answer to a child: its consent for the child's namespace and its credentials,
/// from the same state. A deletion needs no consent (§4.6) but reads it to decide what it may
/// look up, so every pass asks the same one question.
#[derive(Clone, Debug)]
pub struct Access {
    pub consent: Consent,
    pub credentials: Credentials,
}

/// What a child may ask of its server's actor (implemented for the actor's reference in
/// `tree/messages.rs`; a trait here so that the children, which the server actor's messages
/// carry, need not name those messages). `None`: no answer within [`CALL_TIMEOUT`].
pub trait AskServer: Send + Sync + std::fmt::Debug {
    /// Consent for `namespace` and credentials, in one message.
    fn access(&self, namespace: String) -> BoxFuture<'_, Option<Access>>;
    /// Fire and forget: the child found its server's data lost (docs/design.md §5).
    fn data_lost(&self);
}

/// Finds the actor of a TerdutServer (the registry of running server actors).
pub trait FindServer: Send + Sync + std::fmt::Debug {
    fn find(&self, server: &ObjectKey) -> Option<Arc<dyn AskServer>>;
}

/// Who a pass asks.
#[derive(Clone, Debug)]
pub enum Parent {
    /// The actor of the object's TerdutServer, hosting it.
    Server(Arc<dyn AskServer>),
    /// No server accepts the object yet: the answers say why, from the caches.
    Holding,
    /// Not in the tree (the benchmark's Controller baselines): the server's actor is looked
    /// up in the registry and asked the same way.
    Lookup(Arc<dyn FindServer>),
}

/// How long a question to a server actor may take. It answers from its state at once; only
/// a server actor that is gone or stuck would take longer.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);

impl Parent {
    fn actor(&self, server: &ObjectKey) -> Option<Arc<dyn AskServer>> {
        match self {
            Self::Server(actor) => Some(actor.clone()),
            Self::Holding => None,
            Self::Lookup(registry) => registry.find(server),
        }
    }

    /// Whether `server` accepts objects of `namespace` (docs/design.md §4.6) and its
    /// credentials, as its actor holds them: one question.
    pub async fn access(&self, ctx: &Ctx, server: &ObjectKey, namespace: &str) -> Access {
        let from_caches = |why: String| Access {
            consent: consent_from_caches(ctx, server, namespace),
            credentials: Credentials::NotReady(why),
        };
        if matches!(self, Self::Holding) {
            let consent = consent_from_caches(ctx, server, namespace);
            let why = why_held(server, &consent);
            return Access {
                consent,
                credentials: Credentials::NotReady(why),
            };
        }
        let Some(actor) = self.actor(server) else {
            // No actor to ask: the same consent function over the caches it would answer with.
            return from_caches(format!(
                "the operator has not started reconciling TerdutServer {server} yet"
            ));
        };
        let asked = std::time::Instant::now();
        let answer = actor.access(namespace.to_owned()).await;
        ctx.metrics.parent_call("access", asked.elapsed());
        answer.unwrap_or_else(|| {
            let why = format!("TerdutServer {server}'s actor did not answer: it is restarting");
            Access {
                consent: Consent::Refused(why.clone()),
                credentials: Credentials::NotReady(why),
            }
        })
    }

    /// A pass found a team or integration it had recorded gone from `server`: its data was
    /// lost, and every child of it must look now (docs/design.md §5).
    pub fn data_lost(&self, server: &ObjectKey) {
        if let Some(actor) = self.actor(server) {
            actor.data_lost();
        }
    }
}

/// Whether TerdutServer `key` accepts a team in `team_namespace` (docs/design.md §4.6), from
/// the caches: the function a server actor answers `Consent` with.
pub fn consent_from_caches(ctx: &Ctx, key: &ObjectKey, team_namespace: &str) -> Consent {
    let Some(server) = ctx
        .stores
        .servers
        .get(&ObjectRef::new(&key.name).within(&key.namespace))
    else {
        return Consent::Refused(format!("TerdutServer {key} does not exist"));
    };
    let labels = ctx
        .stores
        .namespaces
        .get(&ObjectRef::new(team_namespace))
        .map(|n| n.metadata.labels.clone().unwrap_or_default());
    decide(
        &key.namespace,
        &key.name,
        &server.spec.allowed_teams,
        team_namespace,
        labels.as_ref(),
    )
}

/// Why a child of the holding host has no server to use, from the same consent its answer
/// carries: the server is missing or refuses the namespace (the refusal says which rule), or
/// it accepts it and the writer is moving the object under the server's actor (a moment, not
/// a refusal: saying "does not accept" there would be false).
fn why_held(server: &ObjectKey, consent: &Consent) -> String {
    match consent {
        Consent::Refused(why) => why.clone(),
        Consent::Allowed => format!(
            "TerdutServer {server} accepts this namespace; the operator is moving this object under its actor"
        ),
    }
}
