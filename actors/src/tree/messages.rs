//! The messages of the tree's hosts: a TerdutServer's actor ([`ServerMsg`]) and the tables of
//! team and alert-source actors every host carries ([`ChildrenMsg`]). In a file of their own
//! so the writer, the parent handle and the actors depend on them, not on each other.

use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use futures::future::BoxFuture;
use ractor::{ActorRef, RpcReplyPort};

use super::parent::{Access, AskServer, CALL_TIMEOUT, FindServer};
use crate::key::ObjectKey;
use crate::object_actor::{SourceFactory, TeamFactory};
use crate::pipeline::Memory;
use crate::server::Server;
use crate::supervisor::SupervisorMsg;

/// To the team and alert-source tables of a host.
pub enum ChildrenMsg {
    Teams(SupervisorMsg<TeamFactory>),
    Sources(SupervisorMsg<SourceFactory>),
    /// Nudge every child now (its server's credentials changed, or its data was lost).
    NudgeAll,
}

impl std::fmt::Debug for ChildrenMsg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Teams(m) => write!(f, "Teams({m:?})"),
            Self::Sources(m) => write!(f, "Sources({m:?})"),
            Self::NudgeAll => f.write_str("NudgeAll"),
        }
    }
}

/// Messages a server actor handles.
pub enum ServerMsg {
    /// Reconcile now (the supervisor's coalesced nudge).
    Reconcile,
    /// The periodic resync or a retry timer fired.
    Resync,
    /// The worker's pass is done: the pipeline's memory back, and when the next is due.
    PassDone {
        memory: Box<Memory<Server>>,
        next: Duration,
    },
    /// The worker's pass panicked: the actor fails, and its supervisor restarts it.
    PassPanicked(String),
    /// The first pass of this incarnation is taking long: the questions held for it are
    /// answered with what the actor has now (`tree/server.rs`, `HOLD_LIMIT`).
    AnswerHeld,
    /// A child asks for the API client of this server and whether objects of its namespace
    /// may attach (docs/design.md §4.6).
    Access {
        namespace: String,
        reply: RpcReplyPort<Access>,
    },
    /// A child found a team or integration it had recorded gone from the server: its data
    /// was lost (a restored backup, a reset database), so every child looks now (§5).
    DataLost,
    /// To the tables of this server's team and alert-source actors.
    Children(ChildrenMsg),
}

impl From<ChildrenMsg> for ServerMsg {
    fn from(msg: ChildrenMsg) -> Self {
        Self::Children(msg)
    }
}

impl std::fmt::Debug for ServerMsg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Reconcile => f.write_str("Reconcile"),
            Self::Resync => f.write_str("Resync"),
            Self::PassDone { next, .. } => write!(f, "PassDone({next:?})"),
            Self::PassPanicked(_) => f.write_str("PassPanicked"),
            Self::AnswerHeld => f.write_str("AnswerHeld"),
            Self::Access { namespace, .. } => write!(f, "Access({namespace})"),
            Self::DataLost => f.write_str("DataLost"),
            Self::Children(m) => write!(f, "Children({m:?})"),
        }
    }
}

/// The running server actors by TerdutServer, so the writer, and anything outside the tree
/// (the benchmark's Controller baselines), can reach one.
pub type Registry = Arc<DashMap<ObjectKey, ActorRef<ServerMsg>>>;

impl AskServer for ActorRef<ServerMsg> {
    fn access(&self, namespace: String) -> BoxFuture<'_, Option<Access>> {
        Box::pin(async move {
            let asked = self
                .call(
                    |reply| ServerMsg::Access { namespace, reply },
                    Some(CALL_TIMEOUT),
                )
                .await;
            match asked {
                Ok(ractor::rpc::CallResult::Success(a)) => Some(a),
                _ => None,
            }
        })
    }

    fn data_lost(&self) {
        let _ = self.cast(ServerMsg::DataLost);
    }
}

impl FindServer for DashMap<ObjectKey, ActorRef<ServerMsg>> {
    fn find(&self, server: &ObjectKey) -> Option<Arc<dyn AskServer>> {
        self.get(server)
            .map(|actor| Arc::new(actor.clone()) as Arc<dyn AskServer>)
    }
}
