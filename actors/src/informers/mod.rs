//! The informer side (kube-runtime watchers + reflectors): every watched resource keeps a cache
//! of what the operator reads, within a bound no tenant can raise (`cached.rs`), and hands what
//! it sees, as a [`Seen`], to the sink: the writer of the routing index (`tree/writer.rs`;
//! `routing/index.rs` decides who reconciles, docs/design.md §5).
//!
//! [`build`] is the table of watches: each resource, what the API server selects of it, and its
//! [`Watched`] (`watched.rs`): what of it the cache keeps and what its changes mean to routing.
//! One loop runs every watch (`informer.rs`), so a new watched resource is one `Watched` impl
//! and one row here:
//! - TerdutServer, TerdutTeam, TerdutAlertSource: applied, deleted, listed;
//! - Deployment / Service / PDB / operator-key Secret: their server, by the
//!   `terdut.ryuvia.com/server` label; only those of the operator's shape are cached (a label
//!   is anyone's to set), Secrets as metadata only;
//! - a webhook Secret: its alert source, by its owner reference;
//! - Namespace labels (consent, §4.6), and the namespaces `--watch-namespace-selector` selects.
//!
//! Each watch is a supervised part (`supervisor/part.rs`, docs/adr/0017-liveness.md): an
//! incarnation that panics or ends is started again as a fresh watcher over the same cache,
//! which is a relist (`cache_writer.rs` applies it in place).

mod informer;
mod watched;

use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Client;
use tokio::sync::watch;

use self::informer::{Watches, config};
pub use self::watched::{Change, Watched};
use self::watched::{
    ManagedSecrets, Namespaces, OwnedByServer, SelectedNamespaces, Servers, Sources, Teams,
};
use crate::context::{OwnWrites, Stores};
use crate::routing::Seen;
use crate::server::names::{FIELD_MANAGER, LABEL_MANAGED_BY, MANAGED_SECRET_SELECTOR};
use crate::supervisor::part::Part;
use crate::tenancy::attachments::Attachments;

/// Where every watch hands what it saw: the routing index's writer (`operator.rs` wires it).
pub type Sink = Arc<dyn Fn(Seen) + Send + Sync>;

/// The label selectors of one operator instance (docs/configuration.md "Sharding").
#[derive(Clone, Debug, Default)]
pub struct Selectors {
    /// On TerdutServers, TerdutTeams and TerdutAlertSources.
    pub objects: Option<String>,
    /// On Namespaces: the namespaces whose objects this instance reconciles.
    pub namespaces: Option<String>,
}

/// One watch: a part to supervise (`supervisor::part::supervise`).
pub type Task = Box<dyn Part>;

/// The caches and the watches that fill them. Supervise every one; `synced` turns true once
/// all initial lists are in.
pub struct Informers {
    pub stores: Stores,
    pub tasks: Vec<Task>,
    pub synced: watch::Receiver<usize>,
    pub expected: usize,
}

impl Debug for Informers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Informers")
            .field("tasks", &self.tasks.len())
            .finish()
    }
}

/// Builds the informers; `sink` receives what every watch sees, `own_writes` tells which
/// versions are the operator's own writes. `namespaces` empty: one cluster-wide watch per
/// resource (the ClusterRole of docs/design.md §9). Otherwise one watch per resource and
/// namespace, which needs only namespaced Roles there (the per-namespace split of
/// docs/design.md §13); Namespaces themselves are cluster-scoped and stay one cluster-wide
/// watch either way.
pub fn build(
    client: &Client,
    namespaces: &[String],
    selectors: &Selectors,
    own_writes: &Arc<OwnWrites>,
    sink: Sink,
) -> Informers {
    let mut watches = Watches::new(client, namespaces, sink);
    // The operator's own kinds, only those of this instance's shard when it has one.
    let mine = || match &selectors.objects {
        Some(selector) => config().labels(selector),
        None => config(),
    };
    let owned = || config().labels(&format!("{LABEL_MANAGED_BY}={FIELD_MANAGER}"));
    // The teams also fill the attachments a policy's `maxTeams` counts (`tenancy/`).
    let attachments = Arc::new(Attachments::new(watches.scopes()));

    // The table of watches: each resource, what the API server selects of it, and what its
    // changes mean (`watched.rs`).
    let servers = watches.namespaced(mine(), Servers);
    let teams = watches.namespaced(
        mine(),
        Teams {
            own_writes: own_writes.clone(),
            attachments: attachments.clone(),
        },
    );
    let sources = watches.namespaced(
        mine(),
        Sources {
            own_writes: own_writes.clone(),
        },
    );
    if let Some(selector) = &selectors.namespaces {
        // The API server tells when a namespace starts or stops matching (a watch with a label
        // selector sends a deletion when an object stops matching): no restart needed.
        watches.cluster(config().labels(selector), SelectedNamespaces);
    }
    let deployments = watches.namespaced(owned(), OwnedByServer::<Deployment>::default());
    let services = watches.namespaced(owned(), OwnedByServer::<Service>::default());
    let pdbs = watches.namespaced(owned(), OwnedByServer::<PodDisruptionBudget>::default());
    // Metadata only (`PartialObjectMeta<Secret>`): the data of a labelled Secret never reaches
    // the operator through its watch (a key is read live where it is needed,
    // `server/observe.rs`, `source/observe.rs`).
    let secrets = watches.namespaced(
        config().labels(MANAGED_SECRET_SELECTOR),
        ManagedSecrets {
            own_writes: own_writes.clone(),
        },
    );
    // Metadata only, labels drive consent. Cluster-scoped, so one watch in both modes (the
    // namespaced chart grants read on Namespaces through a small ClusterRole).
    let namespaces = watches.cluster(config(), Namespaces);

    let (tasks, synced) = watches.into_tasks();
    Informers {
        stores: Stores {
            servers,
            teams,
            sources,
            deployments,
            services,
            pdbs,
            secrets,
            namespaces,
            attachments,
        },
        // Every task is one watch that counts its first complete list once.
        expected: tasks.len(),
        tasks,
        synced,
    }
}
