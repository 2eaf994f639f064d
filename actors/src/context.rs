//! What every actor shares: the Kubernetes client, the informer caches, the Event publisher,
//! metrics, the clock and the operator's configuration, plus the registry through which team
//! and alert-source actors find their server's actor.

use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Client;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::Store;
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutServer, TerdutTeam};

use crate::api::ApiMetrics;
use crate::clock::Clock;
use crate::key::ObjectKey;
use crate::kind::Written;
use crate::runtime::events::EventPublisher;
use crate::runtime::metrics::OperatorMetrics;
use crate::stores::NamespacedStores;
use crate::tenancy::attachments::Attachments;
use crate::url_template;

/// Operator settings (flags of the binary, see docs/configuration.md).
#[derive(Clone, Debug)]
pub struct OperatorConfig {
    /// Periodic resync of every object (docs/design.md §5: 5 minutes), jittered by ±10%.
    pub resync: Duration,
    /// How the operator reaches a TerdutServer's API. `{name}`, `{namespace}`,
    /// `{clusterDomain}` and `{port}` (spec.networking.servicePort) are replaced. In cluster:
    /// the absolute name of its Service ([`url_template::DEFAULT_TEMPLATE`]); out of cluster,
    /// e.g. `http://127.0.0.1:{port}`. Checked by [`Self::validate`]: a host the resolver's
    /// search path could complete is refused.
    pub server_url_template: String,
    /// The cluster's DNS domain (kubelet `clusterDomain`), for `{clusterDomain}`.
    pub cluster_domain: String,
    /// Timeout of any actor-to-actor call.
    pub call_timeout: Duration,
    /// Timeout of one terdut-server request.
    pub api_timeout: Duration,
    /// Retry of a TerdutTeam waiting for a change outside the cluster that no watch reports:
    /// a username the server does not know yet, a team name another team holds.
    pub blocked_retry: Duration,
    /// Test hooks (fault injection by annotation). Never on in production.
    pub test_hooks: bool,
    /// The namespaces whose objects the operator watches and reconciles; empty means every
    /// namespace (the cluster-wide default of docs/design.md §9). A list lets the operator run with
    /// per-namespace Roles (`rbac.namespaced` in the chart).
    pub watch_namespaces: Vec<String>,
    /// A label selector on the three CRDs: this instance reconciles only the objects it
    /// selects, so instances with disjoint selectors split the objects between them (each
    /// with a Lease of its own; docs/configuration.md "Sharding"). `None`: every object.
    pub selector: Option<String>,
    /// A label selector on Namespaces: only objects in the namespaces it selects are
    /// reconciled, re-evaluated as namespaces are labelled (watched cluster-wide). `None`:
    /// every namespace watched.
    pub watch_namespace_selector: Option<String>,
    /// Passes of TerdutTeams, and separately of TerdutAlertSources, that run at once
    /// (controller-runtime's MaxConcurrentReconciles). A running pass holds ~15 KB of future
    /// (heap profile, docs/performance.md); an actor waiting for its turn holds almost
    /// nothing, so this bounds what a cold start or a relist of many objects costs in memory.
    pub max_concurrent_passes: usize,
    /// How long a converged team or alert-source actor with nothing due stays up before its
    /// host stops it and keeps only its entry (passivation, ADR 0008); `None` never.
    pub passivate_after: Option<Duration>,
    /// How many team, and separately alert-source, actors one host starts at once for other
    /// reasons than a change of their own object: a relist, a dependency, a new entry
    /// (ADR 0011). Bounds the actors alive during a relist or an adoption of thousands.
    pub wake_budget: usize,
    /// How long the root supervisor, the holding host or the routing writer may leave a
    /// message unanswered before `/healthz` fails (a stall, docs/adr/0017-liveness.md).
    pub stall_after: Duration,
    /// The operator's own namespace (`--lease-namespace`, `POD_NAMESPACE`): where it keeps
    /// what no tenant may write, the records of which TerdutTeams it made a team for
    /// (`team::records`, ADR 0013).
    pub operator_namespace: String,
    /// This instance's name among the operators sharing that namespace (`--lease-name`): its
    /// claim of what it selects is `terdut-instance-<name>` there (`routing::claims`).
    pub instance_name: String,
}

impl OperatorConfig {
    /// What this instance selects (`--watch-namespaces`, `--watch-namespace-selector`,
    /// `--selector`), as its instance claim and the routing compare it.
    pub fn scope(&self) -> crate::routing::scope::Scope {
        crate::routing::scope::Scope {
            namespaces: self.watch_namespaces.clone(),
            namespace_selector: self.watch_namespace_selector.clone(),
            selector: self.selector.clone(),
        }
    }
}

impl Default for OperatorConfig {
    fn default() -> Self {
        Self {
            resync: Duration::from_secs(300),
            server_url_template: url_template::DEFAULT_TEMPLATE.into(),
            cluster_domain: url_template::DEFAULT_CLUSTER_DOMAIN.into(),
            call_timeout: Duration::from_secs(10),
            api_timeout: Duration::from_secs(15),
            blocked_retry: Duration::from_secs(30),
            test_hooks: false,
            watch_namespaces: Vec::new(),
            selector: None,
            watch_namespace_selector: None,
            max_concurrent_passes: 256,
            passivate_after: Some(Duration::from_secs(2)),
            wake_budget: 1024,
            stall_after: Duration::from_secs(30),
            operator_namespace: "terdut-system".into(),
            instance_name: "terdut-operator".into(),
        }
    }
}

impl OperatorConfig {
    /// The API base URL of one server.
    pub fn server_url(&self, name: &str, namespace: &str, port: i32) -> String {
        url_template::render(
            &self.server_url_template,
            &self.cluster_domain,
            name,
            namespace,
            port,
        )
    }

    /// Refuses settings the operator must not start with (see [`url_template::validate`]).
    pub fn validate(&self) -> Result<(), InvalidConfig> {
        if self.watch_namespace_selector.is_some() && !self.watch_namespaces.is_empty() {
            return Err(InvalidConfig(
                "--watch-namespace-selector and --watch-namespaces exclude each other: the \
                 selector needs cluster-wide watches, the list per-namespace ones"
                    .into(),
            ));
        }
        for (flag, selector) in [
            ("--selector", &self.selector),
            ("--watch-namespace-selector", &self.watch_namespace_selector),
        ] {
            if selector.as_deref().is_some_and(|s| s.trim().is_empty()) {
                return Err(InvalidConfig(format!(
                    "{flag} is empty: leave it out to select everything"
                )));
            }
        }
        if self.stall_after < Duration::from_secs(1) {
            return Err(InvalidConfig(format!(
                "--liveness-stall-after {:?} is shorter than 1s: a busy part would read as stalled",
                self.stall_after
            )));
        }
        url_template::validate(&self.server_url_template, &self.cluster_domain)
            .map_err(|e| InvalidConfig(e.0))
    }
}

/// Why the operator refuses its settings; the text says what to write instead.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidConfig(pub String);

/// The informer caches (reflector stores), all with managedFields stripped. Namespaced kinds
/// have a store per watched namespace (see [`NamespacedStores`]).
#[derive(Clone)]
pub struct Stores {
    pub servers: NamespacedStores<TerdutServer>,
    pub teams: NamespacedStores<TerdutTeam>,
    pub sources: NamespacedStores<TerdutAlertSource>,
    pub deployments: NamespacedStores<Deployment>,
    pub services: NamespacedStores<Service>,
    pub pdbs: NamespacedStores<PodDisruptionBudget>,
    /// The metadata of the Secrets the operator makes (labelled
    /// `terdut.ryuvia.com/managed=true`, and of its shape: `cached.rs`). No data: a Secret's
    /// values are read live where they are needed.
    pub secrets: NamespacedStores<PartialObjectMeta<Secret>>,
    /// Namespace metadata only: labels for `allowedTeams: {from: Selector}` (docs/design.md §4.6).
    /// Always cluster-wide: Namespaces are cluster-scoped, so even the namespaced chart grants
    /// get/list/watch on them (labels only, no secrets).
    pub namespaces: Store<PartialObjectMeta<Namespace>>,
    /// The cross-namespace TerdutTeams of each server by namespace, oldest first: what a
    /// policy's `maxTeams` counts (`tenancy/attachments.rs`).
    pub attachments: Arc<Attachments>,
}

impl std::fmt::Debug for Stores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stores").finish_non_exhaustive()
    }
}

/// Shared context; cheap to clone.
#[derive(Clone, Debug)]
pub struct Ctx(Arc<Inner>);

pub struct Inner {
    pub kube: Client,
    pub stores: Stores,
    pub events: EventPublisher,
    pub metrics: OperatorMetrics,
    pub api_metrics: ApiMetrics,
    pub clock: Arc<dyn Clock>,
    pub config: OperatorConfig,
    /// The resourceVersions the operator's own writes produced (see [`OwnWrites`]).
    pub own_writes: Arc<OwnWrites>,
    /// Which TerdutTeams the operator sent a create call for (ADR 0013).
    pub records: Arc<crate::team::records::TeamRecords>,
    /// What the other operator instances sharing its namespace select (overlapping shards).
    pub claims: Arc<crate::routing::claims::Claims>,
}

/// The resourceVersions the latest own writes of each object produced (status, finalizer; a
/// source's webhook Secret, kind `"secret"`, keyed by the Secret), by kind. The watch event of
/// such a write is no reason for another pass of the object: the pass that wrote it already
/// ran on everything else (docs/performance.md, "reconciles per object"). Equality of
/// resourceVersions is safe to test: the API server gives every write of an object a version no
/// other write of it has, so an event at exactly a recorded version carries exactly what that write
/// produced.
///
/// The last [`OWN_WRITES_KEPT`] versions are kept, not only the latest: one pass writes a
/// finalizer and then its status, and the finalizer's event may arrive after the status write
/// was recorded (seen in the benchmark: 0.76 extra passes per team at 1,000 teams).
#[derive(Debug, Default)]
pub struct OwnWrites(DashMap<(Written, ObjectKey), Recent>);

/// How many of an object's latest own writes [`OwnWrites`] recognises.
pub const OWN_WRITES_KEPT: usize = 4;

/// The last [`OWN_WRITES_KEPT`] versions of one object, as 64-bit hashes in a ring: no
/// allocation per object beyond its map entry (at 10,000 teams the strings and their deque
/// were ~230 bytes each, docs/performance.md run 16). A false match needs two versions of
/// one object, which the API server makes, to collide in 64 bits.
#[derive(Debug, Default)]
struct Recent {
    versions: [u64; OWN_WRITES_KEPT],
    len: usize,
    next: usize,
}

impl Recent {
    fn push(&mut self, rv: &str) {
        self.versions[self.next] = version_hash(rv);
        self.next = (self.next + 1) % OWN_WRITES_KEPT;
        self.len = (self.len + 1).min(OWN_WRITES_KEPT);
    }

    fn contains(&self, rv: &str) -> bool {
        let h = version_hash(rv);
        self.versions[..self.len].contains(&h)
    }
}

/// A resourceVersion's hash; SipHash with fixed keys, so equal across calls.
fn version_hash(rv: &str) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut h = std::hash::DefaultHasher::new();
    rv.hash(&mut h);
    h.finish()
}

impl OwnWrites {
    /// Records that the operator's write of `kind` `key` produced `resource_version` (`None`:
    /// unknown, so none of its earlier writes is trusted either).
    pub fn record(&self, kind: Written, key: &ObjectKey, resource_version: Option<String>) {
        match resource_version {
            Some(rv) => self.0.entry((kind, key.clone())).or_default().push(&rv),
            None => {
                self.0.remove(&(kind, key.clone()));
            }
        }
    }

    /// Whether `resource_version` of `kind` `key` is the result of one of the operator's own
    /// latest writes.
    pub fn is_own(&self, kind: Written, key: &ObjectKey, resource_version: &str) -> bool {
        self.0
            .get(&(kind, key.clone()))
            .is_some_and(|recent| recent.contains(resource_version))
    }

    /// The object is gone.
    pub fn forget(&self, kind: Written, key: &ObjectKey) {
        self.0.remove(&(kind, key.clone()));
    }
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Ctx {
    pub fn new(inner: Inner) -> Self {
        Self(Arc::new(inner))
    }
}

impl std::ops::Deref for Ctx {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_writes_recognise_the_latest_few_versions_only() {
        use crate::kind::Kind;
        let (team, source) = (Written::Object(Kind::Team), Written::Object(Kind::Source));
        let w = OwnWrites::default();
        let k = ObjectKey::new("ns", "a");
        assert!(!w.is_own(team, &k, "1"));
        for rv in 1..=5 {
            w.record(team, &k, Some(rv.to_string()));
        }
        assert!(!w.is_own(team, &k, "1"), "only the last {OWN_WRITES_KEPT}");
        assert!(w.is_own(team, &k, "2") && w.is_own(team, &k, "5"));
        assert!(!w.is_own(source, &k, "5"), "by kind");
        assert!(
            !w.is_own(team, &ObjectKey::new("ns", "b"), "5"),
            "by object"
        );
        w.record(team, &k, None);
        assert!(
            !w.is_own(team, &k, "5"),
            "an unknown version trusts nothing"
        );
        w.record(team, &k, Some("6".into()));
        w.forget(team, &k);
        assert!(!w.is_own(team, &k, "6"));
    }
}
