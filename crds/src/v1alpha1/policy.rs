//! What a user may ask of the operator's handling of one object, the same on every kind that
//! has it: what deleting it does on the server (docs/design.md §5 "Deletion policy") and
//! whether the operator changes the server at all (§5 "Management").

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What deleting the object does on the server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum DeletionPolicy {
    /// Delete it there too (the default).
    #[default]
    Delete,
    /// Leave it there as it is: the finalizer is released with an Event saying so (an Argo CD
    /// prune or a namespace clean-up then keeps a live team and its history).
    Orphan,
}

impl DeletionPolicy {
    /// For `skip_serializing_if`: the default is not written back.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// Whether the operator writes to the server for this object.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Management {
    /// Observe, plan and apply (the default).
    #[default]
    Full,
    /// Observe and plan only: the plan is written to `status.plan`, nothing is changed on the
    /// server or in Kubernetes for this object beyond its status. Switching back to `Full`
    /// applies that plan.
    ObserveOnly,
}

impl Management {
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}
