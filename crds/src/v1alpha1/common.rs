//! Small reference types shared by the kinds.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A key in a Secret of the referring object's own namespace (a pod can only mount Secrets of
/// its own namespace).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecretKeyRef {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Key inside the Secret's data.
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

/// A reference to an object by name in the referring object's own namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LocalObjectRef {
    /// Name of the object, in this namespace.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// The changes the operator made to the server for an object in its last pass that changed
/// something: short lines, never a secret.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppliedChanges {
    /// When that pass ended.
    pub time: Time,
    /// One line per change, at most 20 (and a line saying how many more).
    #[schemars(length(max = 21))]
    pub changes: Vec<String>,
}
