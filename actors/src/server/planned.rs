//! The status of a TerdutServer with `spec.management: ObserveOnly` (docs/design.md §5
//! "Management"): what its plan would make it, with Ready saying how many changes wait. Its own
//! file because it reads the plan and the published client, which `status.rs` (read by both)
//! must not.

use terdut_crds::v1alpha1::conditions::DesiredCondition;
use terdut_crds::v1alpha1::server::TeamCounts;

use super::status::{DesiredStatus, reasons};
use super::summary::Summary;

/// The status of an `ObserveOnly` pass: what the plan says the object would be (its Deployment
/// as observed, the key as the server answers), with Ready saying what would change.
pub fn planned(
    server: &terdut_crds::v1alpha1::TerdutServer,
    plan: &Result<super::plan::Plan, String>,
    changes: &[String],
    published: Option<&super::client::Published>,
) -> crate::pipeline::Verdict<DesiredStatus> {
    use crate::pipeline::{Next, Verdict};
    let generation = server.metadata.generation;
    let plan = match plan {
        Ok(p) => p,
        Err(e) => {
            let desired = DesiredStatus {
                ready: DesiredCondition::ready(false, reasons::INVALID_SPEC, e.clone())
                    .at_generation(generation),
                pod_security: None,
                key_accepted: None,
                observed_generation: generation,
                credentials_secret_ref: None,
                teams: TeamCounts::default(),
                summary: Summary::default(),
            };
            return Verdict::new(desired, Next::Resync);
        }
    };
    let mut desired = plan.status.clone();
    desired.key_accepted = published.map(|p| p.check.condition(generation));
    if !changes.is_empty() {
        desired.ready = DesiredCondition::ready(
            false,
            reasons::OBSERVE_ONLY,
            crate::write::shared::observe_only_message(changes.len(), "server's objects"),
        )
        .at_generation(generation);
    }
    Verdict::new(desired, Next::Resync)
}
