//! The one Kubernetes write layer, generic over the kind: every status, finalizer, Event,
//! server-side apply, create and delete the operator sends goes through here, with one policy
//! each.
//!
//! - [`status`]: a status patch only when something a user can see changed, guarded against
//!   a cached copy older than the operator's own last write, and recorded as an own write (its
//!   watch event is then no reason for another pass).
//! - [`finalizer`]: add and release with a resourceVersion precondition; a conflict is read
//!   again once, then retried with backoff.
//! - [`events`]: an Event per externally visible action, and the not-Ready reason announced
//!   once per streak.
//! - [`apply`]: server-side apply with the one field manager.
//! - [`owned`]: an owned object's create that never overwrites, and its delete.
//! - [`shared`]: the part of a status every kind writes the same way (Paused, the plan, the
//!   last applied changes).

pub mod apply;
pub mod events;
pub mod finalizer;
pub mod owned;
pub mod shared;
pub mod status;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Resource;
use kube::core::NamespaceResourceScope;
use serde::Serialize;
use serde::de::DeserializeOwned;
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutServer, TerdutTeam};

use crate::kind::Kind;

/// A kind whose status carries `conditions`.
pub trait Conditioned:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + DeserializeOwned
    + std::fmt::Debug
{
    fn conditions(&self) -> Vec<Condition>;
}

impl Conditioned for TerdutServer {
    fn conditions(&self) -> Vec<Condition> {
        self.status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default()
    }
}

impl Conditioned for TerdutTeam {
    fn conditions(&self) -> Vec<Condition> {
        self.status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default()
    }
}

impl Conditioned for TerdutAlertSource {
    fn conditions(&self) -> Vec<Condition> {
        self.status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default()
    }
}

/// A custom resource of the operator, as the write layer needs it.
pub trait Managed:
    Conditioned + Resource<DynamicType = (), Scope = NamespaceResourceScope> + Serialize
{
    /// Its status subresource.
    type Status: Clone
        + PartialEq
        + Send
        + Sync
        + Serialize
        + DeserializeOwned
        + std::fmt::Debug
        + 'static;
    const KIND: Kind;

    fn status(&self) -> Option<&Self::Status>;
    fn into_status(self) -> Option<Self::Status>;
    /// `spec.management` (docs/design.md §5 "Management").
    fn management(&self) -> terdut_crds::v1alpha1::Management;
}

mod impls {
    use terdut_crds::v1alpha1::{
        TerdutAlertSource, TerdutAlertSourceStatus, TerdutServer, TerdutServerStatus, TerdutTeam,
        TerdutTeamStatus,
    };

    use super::Managed;
    use crate::kind::Kind;

    macro_rules! written {
        ($object:ty, $status:ty, $kind:expr) => {
            impl Managed for $object {
                type Status = $status;
                const KIND: Kind = $kind;
                fn status(&self) -> Option<&$status> {
                    self.status.as_ref()
                }
                /// Bounded like a cached status (`cached.rs`): the status a write returns
                /// is kept until the cache shows it, and must not cost more than the copy.
                fn into_status(self) -> Option<$status> {
                    let mut status = self.status;
                    crate::cached::bound_status(&mut status);
                    status
                }
                fn management(&self) -> terdut_crds::v1alpha1::Management {
                    self.spec.management
                }
            }
        };
    }

    written!(TerdutServer, TerdutServerStatus, Kind::Server);
    written!(TerdutTeam, TerdutTeamStatus, Kind::Team);
    written!(TerdutAlertSource, TerdutAlertSourceStatus, Kind::Source);
}
