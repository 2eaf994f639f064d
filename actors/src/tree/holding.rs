//! The holding host: the team and alert-source actors no TerdutServer can take yet, because
//! their server does not exist or does not accept their namespace (docs/design.md §4.6, ADR
//! 0008). Their passes ask [`Parent::Holding`], which answers why, so each object says so in
//! its condition; the writer moves them under their server when it appears or consents.
//!
//! It does no IO and has no failing path: a child's failure is its table's business, and the
//! host itself never returns an error.

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};

use super::children::{ChildSetup, Children};
use super::messages::ChildrenMsg;
use super::parent::Parent;
use super::writer::{HostRef, Writer};
use crate::routing::Host;

#[derive(Debug)]
pub struct HoldingActor {
    pub setup: ChildSetup,
    pub writer: Writer,
}

pub struct HoldingState {
    children: Children<ChildrenMsg>,
}

impl std::fmt::Debug for HoldingState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HoldingState")
            .field("running", &self.children.running())
            .finish()
    }
}

impl Actor for HoldingActor {
    type Msg = ChildrenMsg;
    type State = HoldingState;
    type Arguments = ();

    async fn pre_start(
        &self,
        myself: ActorRef<ChildrenMsg>,
        _: (),
    ) -> Result<HoldingState, ActorProcessingErr> {
        self.writer
            .adopt(Host::Holding, HostRef::Holding(myself.clone()));
        Ok(HoldingState {
            children: Children::new(&self.setup, myself, Parent::Holding),
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<ChildrenMsg>,
        msg: ChildrenMsg,
        state: &mut HoldingState,
    ) -> Result<(), ActorProcessingErr> {
        state.children.handle(msg);
        Ok(())
    }

    /// Overridden because the default stops the host when any child exits.
    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<ChildrenMsg>,
        event: SupervisionEvent,
        state: &mut HoldingState,
    ) -> Result<(), ActorProcessingErr> {
        state.children.supervision(&event);
        Ok(())
    }

    async fn post_stop(
        &self,
        myself: ActorRef<ChildrenMsg>,
        state: &mut HoldingState,
    ) -> Result<(), ActorProcessingErr> {
        state.children.shut_down();
        myself
            .stop_children_and_wait(
                Some("operator stopping".to_owned()),
                Some(self.setup.config.shutdown_timeout),
            )
            .await;
        Ok(())
    }
}
