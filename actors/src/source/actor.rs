//! The TerdutAlertSource actor: one per TerdutAlertSource (DESIGN §4.5, §5), the shared
//! [`ObjectActor`](crate::object_actor::ObjectActor) driving [`SourceReconciler`]. It
//! resolves the source and its server's credentials, keeps one integration on the server
//! whose webhook URL and key live only in the owned Secret, and deletes the integration before
//! the object goes.

use std::future::Future;
use std::time::Duration;

use terdut_crds::v1alpha1::TerdutAlertSource;

use super::reconcile::{SourceMemory, SourceReconciler};
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use crate::context::Ctx;
use crate::key::ObjectKey;
use crate::object_actor::{ObjectActor, ObjectFactory, ObjectKind, ObjectMsg, ObjectSpec};
use crate::server::observe::team_server_key;
use crate::stores::NamespacedStores;

/// TerdutAlertSource, as the shared actor sees it.
#[derive(Debug)]
pub struct SourceKind;

impl ObjectKind for SourceKind {
    type Object = TerdutAlertSource;
    type Memory = SourceMemory;
    type Reconciler = SourceReconciler;

    const KIND: &'static str = "source";

    fn reconciler(ctx: Ctx) -> SourceReconciler {
        SourceReconciler::new(ctx)
    }

    fn store(ctx: &Ctx) -> &NamespacedStores<TerdutAlertSource> {
        &ctx.stores.sources
    }

    fn failures(memory: &SourceMemory) -> u32 {
        memory.failures
    }

    /// The server of its team; a source whose team is not in the cache yet has nothing to
    /// call and shares the lane of all such sources.
    fn lane(ctx: &Ctx, source: &TerdutAlertSource) -> ObjectKey {
        let ns = source.namespace().unwrap_or_default();
        ctx.stores
            .teams
            .get(&ObjectRef::new(&source.spec.team_ref.name).within(&ns))
            .map(|team| team_server_key(&team))
            .unwrap_or_else(|| ObjectKey::new("", ""))
    }

    fn reconcile<'a>(
        reconciler: &'a SourceReconciler,
        source: &'a TerdutAlertSource,
        memory: &'a mut SourceMemory,
    ) -> impl Future<Output = Duration> + Send + 'a {
        reconciler.reconcile(source, memory)
    }
}

/// Messages a source actor handles.
pub type SourceMsg = ObjectMsg;
/// What the supervisor hands a source actor.
pub type SourceSpec = ObjectSpec<SourceKind>;
/// Builds source actors for the keyed supervisor.
pub type SourceFactory = ObjectFactory<SourceKind>;
/// One TerdutAlertSource's actor.
pub type SourceActor = ObjectActor<SourceKind>;
