//! What a watch saw, as the routing index takes it (PURE): one message type from every watched
//! resource to the writer (`tree/writer.rs`), and the one place that turns it into the index's
//! commands ([`Seen::apply`], docs/design.md §5).
//!
//! The watches build a `Seen` with the constructors here (`informers/watched.rs`); the writer
//! builds the same ones from its caches when it replays them (a restart, a namespace entering
//! the selection), so a replayed object and a watched one cannot differ.

use std::collections::{BTreeMap, BTreeSet};

use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutServer, TerdutTeam};

use super::facts::{server_facts, source_facts, team_facts};
use super::index::{Command, Index, Listed, ServerFacts, SourceFacts, TeamFacts};
use crate::key::ObjectKey;

/// What an informer saw, as the index takes it.
#[derive(Debug)]
pub enum Seen {
    Server {
        key: ObjectKey,
        facts: Option<ServerFacts>,
    },
    /// A Deployment, Service, PDB or key Secret of this server changed.
    ServerOwned(ObjectKey),
    Team {
        key: ObjectKey,
        facts: Option<TeamFacts>,
        /// This version is one the operator wrote itself (`context.rs` `OwnWrites`).
        own_version: bool,
    },
    Source {
        key: ObjectKey,
        facts: Option<SourceFacts>,
        own_version: bool,
    },
    /// The webhook Secret `secret` of alert source `source` was written at
    /// `resource_version`, or deleted.
    WebhookSecret {
        secret: ObjectKey,
        source: ObjectKey,
        resource_version: Option<String>,
        deleted: bool,
        own_version: bool,
    },
    /// A Namespace's labels (`None`: the namespace is gone).
    Namespace {
        name: String,
        labels: Option<BTreeMap<String, String>>,
    },
    /// A list of `kind` in `scope` (`None`: every namespace) finished with `present` in it.
    /// Only that scope: another namespace's watch may be mid-list.
    Listed {
        kind: Listed,
        scope: Option<String>,
        present: BTreeSet<ObjectKey>,
    },
    /// The namespaces `--watch-namespace-selector` selects changed. The writer applies it to
    /// its scope, which replays the objects of the namespaces that entered or left.
    Scope(ScopeChange),
}

/// What the watch of the selected namespaces saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScopeChange {
    In(String),
    Out(String),
    Listed(BTreeSet<String>),
}

impl Seen {
    /// TerdutServer `key` applied (`Some`) or deleted.
    pub fn server(key: ObjectKey, server: Option<&TerdutServer>) -> Self {
        Seen::Server {
            key,
            facts: server.map(server_facts),
        }
    }

    /// TerdutTeam `key` applied (`Some`) or deleted; `own_version`: at a version the operator
    /// wrote.
    pub fn team(key: ObjectKey, team: Option<&TerdutTeam>, own_version: bool) -> Self {
        Seen::Team {
            key,
            facts: team.map(team_facts),
            own_version,
        }
    }

    /// TerdutAlertSource `key` applied (`Some`) or deleted.
    pub fn source(key: ObjectKey, source: Option<&TerdutAlertSource>, own_version: bool) -> Self {
        Seen::Source {
            key,
            facts: source.map(source_facts),
            own_version,
        }
    }

    /// The index's answer to this observation. A [`Seen::Scope`] has none: the writer's scope
    /// takes it and tells the index what it replays.
    pub fn apply(self, index: &mut Index) -> Vec<Command> {
        match self {
            Seen::Server { key, facts } => index.server(key, facts),
            Seen::ServerOwned(key) => index.server_owned(&key),
            Seen::Team {
                key,
                facts,
                own_version,
            } => index.team(key, facts, own_version),
            Seen::Source {
                key,
                facts,
                own_version,
            } => index.source(key, facts, own_version),
            Seen::WebhookSecret {
                secret,
                source,
                resource_version,
                deleted,
                own_version,
            } => index.webhook_secret(secret, &source, resource_version, deleted, own_version),
            Seen::Namespace { name, labels } => index.namespace(&name, labels),
            Seen::Listed {
                kind,
                scope,
                present,
            } => index.listed(kind, scope.as_deref(), &present),
            Seen::Scope(_) => vec![],
        }
    }
}
