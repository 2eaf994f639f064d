//! The team and alert-source actors one host supervises (a TerdutServer's actor, or the
//! holding host): two children tables, the keyed supervisor's own state (restart backoff,
//! crash-loop parking, passivation), linked to the host actor (ADR 0008).

use std::sync::Arc;

use ractor::{ActorRef, SupervisionEvent};

use super::messages::ChildrenMsg;
use super::parent::Parent;
use crate::context::Ctx;
use crate::object_actor::{SourceFactory, TeamFactory};
use crate::pass_limit::PassLimit;
use crate::routing::ChildKind;
use crate::supervisor::{
    SupervisorConfig, SupervisorMsg, SupervisorSnapshot, SupervisorState, Wrapped,
};

/// What every host's tables share: the context, each kind's pass limit (one per kind for
/// the whole operator, shared fairly between servers), and the tables' settings.
#[derive(Clone, Debug)]
pub struct ChildSetup {
    pub ctx: Ctx,
    pub team_passes: PassLimit,
    pub source_passes: PassLimit,
    pub config: SupervisorConfig,
}

/// The tables of one host whose messages are `M`.
pub struct Children<M: ractor::Message + From<ChildrenMsg>> {
    teams: SupervisorState<TeamFactory>,
    sources: SupervisorState<SourceFactory>,
    team_host: Wrapped<M, TeamFactory>,
    source_host: Wrapped<M, SourceFactory>,
}

impl<M: ractor::Message + From<ChildrenMsg>> std::fmt::Debug for Children<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Children")
            .field("running", &self.running())
            .finish_non_exhaustive()
    }
}

impl<M: ractor::Message + From<ChildrenMsg>> Children<M> {
    /// Tables whose children are linked to `host` and ask `parent`.
    pub fn new(setup: &ChildSetup, host: ActorRef<M>, parent: Parent) -> Self {
        let teams = TeamFactory::new(setup.ctx.clone(), setup.team_passes.clone(), parent.clone());
        let sources = SourceFactory::new(setup.ctx.clone(), setup.source_passes.clone(), parent);
        Self {
            teams: SupervisorState::new(Arc::new(teams), setup.config.clone()),
            sources: SupervisorState::new(Arc::new(sources), setup.config.clone()),
            team_host: Wrapped {
                actor: host.clone(),
                wrap: |m| M::from(ChildrenMsg::Teams(m)),
            },
            source_host: Wrapped {
                actor: host,
                wrap: |m| M::from(ChildrenMsg::Sources(m)),
            },
        }
    }

    pub fn handle(&mut self, msg: ChildrenMsg) {
        match msg {
            ChildrenMsg::Teams(m) => self.teams.handle(&self.team_host, m),
            ChildrenMsg::Sources(m) => self.sources.handle(&self.source_host, m),
            ChildrenMsg::NudgeAll => {
                self.teams.handle(&self.team_host, SupervisorMsg::NudgeAll);
                self.sources
                    .handle(&self.source_host, SupervisorMsg::NudgeAll);
            }
        }
    }

    /// A supervision event of the host; `true` when it was about one of its children.
    pub fn supervision(&mut self, event: &SupervisionEvent) -> bool {
        self.teams.supervision(&self.team_host, event)
            || self.sources.supervision(&self.source_host, event)
    }

    pub fn snapshot(&self, kind: ChildKind) -> SupervisorSnapshot {
        match kind {
            ChildKind::Team => self.teams.snapshot(),
            ChildKind::Source => self.sources.snapshot(),
        }
    }

    /// Children running now, of both kinds.
    pub fn running(&self) -> usize {
        self.teams.running() + self.sources.running()
    }

    /// The host stops: every child leaves the gauges (ractor stops the actors).
    pub fn shut_down(&mut self) {
        self.teams.shut_down();
        self.sources.shut_down();
    }
}
