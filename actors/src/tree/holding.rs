//! The holding host: the team and alert-source actors no TerdutServer can take yet, because
//! their server does not exist or does not accept their namespace (docs/design.md §4.6, ADR
//! 0008). Their passes ask [`Parent::Holding`], which answers why, so each object says so in
//! its condition; the writer moves them under their server when it appears or consents.
//!
//! It does no IO and has no failing path: a child's failure is its table's business, and the
//! host itself never returns an error. Should it panic all the same (a bug), the operator
//! spawns it again and it adopts its children from the routing index (`supervisor/
//! actor_part.rs`, docs/adr/0017-liveness.md).

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};

use super::children::{ChildSetup, Children};
use super::messages::ChildrenMsg;
use super::parent::Parent;
use super::writer::{HostRef, Writer};
use crate::routing::Host;
use crate::runtime::faults::FaultPoint;
use crate::supervisor::actor_part::Current;

#[derive(Debug)]
pub struct HoldingActor {
    pub setup: ChildSetup,
    pub writer: Writer,
    /// Where the writer finds the running incarnation.
    pub current: Current<Option<ActorRef<ChildrenMsg>>>,
    /// Test hooks only: where an armed fault meets the host.
    pub fault: FaultPoint,
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
        // Published before it asks for its children: whatever the writer sends after their
        // adoption reaches this incarnation.
        self.current.set(Some(myself.clone()));
        self.writer
            .adopt(Host::Holding, HostRef::Holding(myself.clone()));
        Ok(HoldingState {
            children: Children::new(&self.setup, myself, Parent::Holding),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<ChildrenMsg>,
        msg: ChildrenMsg,
        state: &mut HoldingState,
    ) -> Result<(), ActorProcessingErr> {
        if self.fault.reached().await {
            // Without a reason: as an actor that stopped on its own (the test hook's `end`).
            myself.stop(None);
        }
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
