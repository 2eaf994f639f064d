//! A TerdutServer being deleted needs nothing of the operator (docs/design.md §5, §7): what it
//! owns goes by garbage collection, and the operator never touches its database. A pass of one
//! writes nothing, since foreground deletion keeps it while GC removes what it owns, and a
//! write then would recreate what GC just deleted.

use terdut_crds::v1alpha1::TerdutServer;
use tracing::debug;

use crate::key::ObjectKey;
use crate::pipeline::Finalized;

pub fn finalize<D>(server: &TerdutServer) -> Finalized<D> {
    debug!(server = %ObjectKey::of(server), "being deleted; nothing to do");
    Finalized::Released
}
