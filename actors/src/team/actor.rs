//! The TerdutTeam actor: one per TerdutTeam (DESIGN §4.2, §4.6, §5), the shared
//! [`ObjectActor`](crate::object_actor::ObjectActor) driving [`TeamReconciler`]. It reaches
//! its server only through the server's actor (consent and credentials, see `access.rs`), and
//! is never called by it.

use std::future::Future;
use std::time::Duration;

use terdut_crds::v1alpha1::TerdutTeam;

pub use super::reconcile::Next;
use super::reconcile::{TeamMemory, TeamReconciler};
use crate::context::Ctx;
use crate::key::ObjectKey;
use crate::object_actor::{ObjectActor, ObjectFactory, ObjectKind, ObjectMsg, ObjectSpec};
use crate::server::observe::team_server_key;
use crate::stores::NamespacedStores;

/// TerdutTeam, as the shared actor sees it.
#[derive(Debug)]
pub struct TeamKind;

impl ObjectKind for TeamKind {
    type Object = TerdutTeam;
    type Memory = TeamMemory;
    type Reconciler = TeamReconciler;

    const KIND: &'static str = "team";

    fn reconciler(ctx: Ctx) -> TeamReconciler {
        TeamReconciler::new(ctx)
    }

    fn store(ctx: &Ctx) -> &NamespacedStores<TerdutTeam> {
        &ctx.stores.teams
    }

    fn failures(memory: &TeamMemory) -> u32 {
        memory.failures
    }

    fn lane(_ctx: &Ctx, team: &TerdutTeam) -> ObjectKey {
        team_server_key(team)
    }

    fn reconcile<'a>(
        reconciler: &'a TeamReconciler,
        team: &'a TerdutTeam,
        memory: &'a mut TeamMemory,
    ) -> impl Future<Output = Duration> + Send + 'a {
        reconciler.reconcile(team, memory)
    }
}

/// Messages a team actor handles.
pub type TeamMsg = ObjectMsg;
/// What the supervisor hands a team actor.
pub type TeamSpec = ObjectSpec<TeamKind>;
/// Builds team actors for the keyed supervisor.
pub type TeamFactory = ObjectFactory<TeamKind>;
/// One TerdutTeam's actor.
pub type TeamActor = ObjectActor<TeamKind>;
