//! A TerdutServer being deleted needs nothing of the operator (docs/design.md §5, §7): what it
//! owns goes by garbage collection, and the operator never touches its database. It holds no
//! finalizer, and a pass of one writes nothing, since foreground deletion keeps it while GC
//! removes what it owns, and a write then would recreate what GC just deleted.

use terdut_crds::v1alpha1::TerdutServer;

use super::ServerMemory;
use super::status::DesiredStatus;
use crate::pipeline::deletion::NoFinalizer;

/// The TerdutServer's deletion: none.
pub type ServerDeletion = NoFinalizer<TerdutServer, ServerMemory, DesiredStatus>;
