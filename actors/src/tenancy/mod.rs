//! The shared server's owner sets the rules (docs/design.md §4.6 "Policies",
//! docs/adr/0016-server-owner-policy.md): `spec.allowedTeams.policies` of a TerdutServer says
//! what the TerdutTeams of each admitted namespace may ask for, and how many of them there may
//! be. A team's pass asks before any call to the server, right after consent; a refused team
//! makes no call at all, reads included, and says why (`PolicyDenied`, `TeamLimitReached`).
//!
//! - [`pattern`]: the globs of a policy (PURE);
//! - [`decide`]: which policy applies and what it admits (PURE);
//! - [`attachments`]: the teams of each namespace per server, oldest first, from the team
//!   watch (what `maxTeams` counts);
//! - [`admit_team`] / [`deletion_policy`]: the decision fed from the caches.

pub mod attachments;
pub mod decide;
pub mod pattern;

use kube::runtime::reflector::ObjectRef;
use terdut_crds::v1alpha1::{DeletionPolicy, TerdutTeam};

use crate::context::Ctx;
use crate::key::ObjectKey;
use decide::{Admission, Applies, Candidate, admit, policy_for};

/// What the policy of `server` says of `team`, from the caches: the server's spec, the team
/// namespace's labels and the attachments. A server not in the cache admits (the pass stops
/// on its absence before this is asked).
pub fn admit_team(ctx: &Ctx, team: &TerdutTeam, server: &ObjectKey) -> Admission {
    let Some(cached) = ctx
        .stores
        .servers
        .get(&ObjectRef::new(&server.name).within(&server.namespace))
    else {
        return Admission::Admitted;
    };
    let key = ObjectKey::of(team);
    let allowed = &cached.spec.allowed_teams;
    if allowed.policies.is_empty() {
        return Admission::Admitted;
    }
    let labels = namespace_labels(ctx, &key.namespace);
    let applies = policy_for(allowed, &server.namespace, &key.namespace, labels.as_ref());
    let rank = match applies {
        Applies::Policy(p) if p.max_teams.is_some() => ctx.stores.attachments.rank(server, &key),
        _ => None,
    };
    admit(
        server,
        applies,
        Candidate {
            spec: &team.spec,
            rank,
        },
    )
}

/// What deleting `team` does on `server` under its policy: the spec's `deletionPolicy`, or
/// `Delete` and the name of the policy that forbids leaving it behind.
pub fn deletion_policy(
    ctx: &Ctx,
    team: &TerdutTeam,
    server: &ObjectKey,
) -> (DeletionPolicy, Option<String>) {
    let requested = team.spec.deletion_policy;
    let Some(cached) = ctx
        .stores
        .servers
        .get(&ObjectRef::new(&server.name).within(&server.namespace))
    else {
        return (requested, None);
    };
    let key = ObjectKey::of(team);
    let allowed = &cached.spec.allowed_teams;
    let labels = namespace_labels(ctx, &key.namespace);
    let applies = policy_for(allowed, &server.namespace, &key.namespace, labels.as_ref());
    decide::deletion(allowed, applies, requested)
}

fn namespace_labels(
    ctx: &Ctx,
    namespace: &str,
) -> Option<std::collections::BTreeMap<String, String>> {
    ctx.stores
        .namespaces
        .get(&ObjectRef::new(namespace))
        .map(|n| n.metadata.labels.clone().unwrap_or_default())
}
