//! The API client a TerdutServer's children use (docs/design.md §6): built from the key
//! Secret this server controls (never from a Secret of that name someone else made, §1),
//! rebuilt only when the key or URL changes, and proven with `whoami` after every pass, so one
//! condition on the server (`KeyAccepted`) explains why its teams wait.
//!
//! At every pass, before the key leaves the process (that `whoami`) and before the client the
//! children call with is published, the Service and the Deployment are read live and judged by
//! [`endpoint::judge`]: while either is not this TerdutServer's own, no key is sent and no
//! client is published (docs/security.md "The server's key goes only to the server"). A change
//! of the operator's Service or Deployment between passes is a watch event that starts the next
//! pass; until it ends, children still hold the client of the last one.

use std::sync::Arc;

use terdut_crds::v1alpha1::TerdutServer;
use terdut_crds::v1alpha1::conditions::DesiredCondition;
use tracing::warn;

use super::endpoint::{self, Endpoint};
use super::key::{KeySecretState, classify_key_secret};
use super::names::{Parent, deployment_name, service_name};
use super::observe::{Observation, live_metadata, live_object};
use crate::api::{ApiError, ClientConfig, OperatorKey, TerdutClient, WhoAmI};
use crate::context::Ctx;
use crate::key::ObjectKey;
use crate::tree::Credentials;

/// The account the server seeds from `TERDUT_OPERATOR_KEY` (docs/terdut-api.md).
pub const OPERATOR_ACCOUNT: &str = "terdut-operator";

/// The client of one server and what it was built for.
#[derive(Clone, Debug, Default)]
pub struct ServerClient {
    /// The key hash and URL of `client`.
    fingerprint: String,
    client: Option<Arc<TerdutClient>>,
}

/// What the children may use after a pass, and what the server said of the key.
#[derive(Clone, Debug)]
pub struct Published {
    pub credentials: Credentials,
    /// Tells two publications apart without comparing clients: the key fingerprint, or the
    /// reason the children wait.
    pub fingerprint: String,
    pub check: KeyCheck,
}

impl ServerClient {
    /// Builds (or keeps) the client for the key observed this pass, asks the server about it,
    /// and says what to publish.
    pub async fn refresh(
        &mut self,
        ctx: &Ctx,
        server: &TerdutServer,
        observation: &Observation,
    ) -> Published {
        let key = ObjectKey::of(server);
        let Ok(parent) = Parent::of(server) else {
            *self = Self::default();
            return wait(
                format!("TerdutServer {key} has no operator key yet"),
                KeyCheck::NoKey,
            );
        };
        let token = match classify_key_secret(
            &parent,
            observation.key_secret.as_deref(),
            observation.unlisted.key_secret.as_ref(),
        ) {
            KeySecretState::Present(token) => Some(token),
            _ => None,
        };
        let Some(token) = token else {
            *self = Self::default();
            return wait(
                format!("TerdutServer {key} has no operator key yet"),
                KeyCheck::NoKey,
            );
        };
        let url = ctx.config.server_url(
            &key.name,
            &key.namespace,
            server.spec.networking.service_port,
        );
        let fingerprint = format!("{}@{url}", token.hash());
        if self.client.is_none() || self.fingerprint != fingerprint {
            let config = ClientConfig::new(url, OperatorKey::new(token.expose()))
                .request_timeout(ctx.config.api_timeout)
                .metrics(ctx.api_metrics.clone());
            match TerdutClient::new(config) {
                Ok(c) => {
                    self.client = Some(Arc::new(c));
                    self.fingerprint = fingerprint.clone();
                }
                Err(e) => {
                    warn!(server = %key, error = %e, "could not build the terdut-server client");
                    *self = Self::default();
                    let why = format!("TerdutServer {key}: the API client could not be built: {e}");
                    return wait(why.clone(), KeyCheck::Unreachable(why));
                }
            }
        }
        let Some(client) = self.client.clone() else {
            return wait(
                format!("TerdutServer {key} has no operator key yet"),
                KeyCheck::NoKey,
            );
        };
        // Read live, now: the caches show only labelled objects, and a foreign Service that
        // replaced ours a moment ago is in none of them.
        if let Endpoint::Withheld(why) = live_endpoint(ctx, &parent).await {
            warn!(server = %key, %why, "the operator key is not sent");
            *self = Self::default();
            return wait(
                format!(
                    "TerdutServer {key} is not sent the operator key: {why}; see its \
                     KeyAccepted condition"
                ),
                KeyCheck::Withheld(why),
            );
        }
        let check = KeyCheck::of(client.whoami().await);
        match &check {
            // Every call of every child would be refused: tell them why, once, here.
            KeyCheck::Rejected(why) => wait(
                format!(
                    "TerdutServer {key} does not accept the operator key ({why}); see its \
                     KeyAccepted condition"
                ),
                check,
            ),
            // Accepted, or not answering: the children use the client (and find out for
            // themselves while it does not answer).
            _ => Published {
                credentials: Credentials::Ready(client),
                fingerprint,
                check,
            },
        }
    }
}

/// [`endpoint::judge`] of the Service and the Deployment as they are now; a failed read
/// withholds the key too (it is retried at the next pass).
async fn live_endpoint(ctx: &Ctx, parent: &Parent) -> Endpoint {
    let ns = &parent.namespace;
    let service =
        live_object::<k8s_openapi::api::core::v1::Service>(ctx, ns, &service_name(&parent.name))
            .await;
    let deployment = live_metadata::<k8s_openapi::api::apps::v1::Deployment>(
        ctx,
        ns,
        &deployment_name(&parent.name),
    )
    .await;
    match (service, deployment) {
        (Ok(s), Ok(d)) => endpoint::judge(parent, s.as_ref(), d.as_ref()),
        (Err(e), _) | (_, Err(e)) => Endpoint::Withheld(format!(
            "its Service and Deployment could not be read to check who controls them ({e})"
        )),
    }
}

fn wait(why: String, check: KeyCheck) -> Published {
    Published {
        credentials: Credentials::NotReady(why.clone()),
        fingerprint: why,
        check,
    }
}

/// What the server said of the operator key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyCheck {
    Accepted,
    /// 401, or another account: the message says which.
    Rejected(String),
    /// No answer; why.
    Unreachable(String),
    /// No key (or no client) to ask with.
    NoKey,
    /// Not asked: the Service or Deployment at the server's address is not this
    /// TerdutServer's own (`endpoint::judge`); why.
    Withheld(String),
}

impl KeyCheck {
    /// Reads a `whoami` answer (docs/terdut-api.md "Operator account").
    pub fn of(answer: Result<WhoAmI, ApiError>) -> Self {
        match answer {
            Ok(w) if w.account == OPERATOR_ACCOUNT => Self::Accepted,
            Ok(w) => Self::Rejected(format!(
                "the key belongs to account {:?}, not {OPERATOR_ACCOUNT}",
                w.account
            )),
            Err(ApiError::Unauthorized) => Self::Rejected("401 on whoami".into()),
            Err(e) => Self::Unreachable(e.to_string()),
        }
    }

    pub fn accepted(&self) -> bool {
        matches!(self, Self::Accepted)
    }

    /// The `KeyAccepted` condition.
    pub fn condition(&self, generation: Option<i64>) -> DesiredCondition {
        use super::status::key_accepted::{
            ACCEPTED, KEY_REJECTED, KEY_WITHHELD, NO_KEY, TYPE, UNREACHABLE,
        };
        let (status, reason, message) = match self {
            Self::Accepted => (
                true,
                ACCEPTED,
                "the server accepts the operator key (whoami answers as terdut-operator)"
                    .to_owned(),
            ),
            Self::Rejected(why) => (
                false,
                KEY_REJECTED,
                format!(
                    "the server refuses the operator key: {why}. Its pods were started with \
                     another key (they roll on their own after a key change; otherwise check \
                     that the image reads TERDUT_OPERATOR_KEY); its teams and alert sources \
                     wait until it accepts the key"
                ),
            ),
            Self::Unreachable(why) => (
                false,
                UNREACHABLE,
                format!("the server did not answer whoami: {why}"),
            ),
            Self::NoKey => (
                false,
                NO_KEY,
                "no operator key to check yet (see Ready)".to_owned(),
            ),
            Self::Withheld(why) => (
                false,
                KEY_WITHHELD,
                format!(
                    "the operator key is not sent to the server: {why}. No whoami is made and \
                     its teams and alert sources wait until the Service and the Deployment at \
                     its address are this TerdutServer's own"
                ),
            ),
        };
        DesiredCondition {
            type_: TYPE.into(),
            status,
            reason: reason.into(),
            message,
            observed_generation: generation,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::TransientCause;

    #[test]
    fn whoami_answers_become_the_key_condition() {
        let who = |account: &str| {
            Ok(WhoAmI {
                account: account.into(),
                scope: "instance".into(),
            })
        };
        assert_eq!(KeyCheck::of(who("terdut-operator")), KeyCheck::Accepted);
        let c = KeyCheck::of(who("alice")).condition(Some(2));
        assert_eq!((c.status, c.reason.as_str()), (false, "KeyRejected"));
        assert!(c.message.contains("alice"), "{}", c.message);
        let c = KeyCheck::of(Err(ApiError::Unauthorized)).condition(None);
        assert_eq!(c.reason, "KeyRejected");
        let down = Err(ApiError::Transient {
            cause: TransientCause::Connect,
            detail: "refused".into(),
        });
        let c = KeyCheck::of(down).condition(None);
        assert_eq!((c.status, c.reason.as_str()), (false, "Unreachable"));
        assert_eq!(c.type_, "KeyAccepted");
        assert!(KeyCheck::Accepted.condition(Some(1)).status);
    }
}
