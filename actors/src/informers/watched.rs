//! What each watched resource means to routing (PURE but for the own-writes record it reads):
//! one [`Watched`] per row of the watch table (`mod.rs`), the way linkerd2's policy-controller
//! gives each indexed resource one trait impl. The loop that feeds them is `informer.rs`.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::marker::PhantomData;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::core::PartialObjectMeta;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutServer, TerdutTeam};

use crate::cached::{Bounded, operator_shaped, secret_object_name, server_object_name};
use crate::context::OwnWrites;
use crate::key::ObjectKey;
use crate::kind::{Kind, Written};
use crate::routing::{Listed, ScopeChange, Seen};
use crate::server::names::LABEL_SERVER;
use crate::tenancy::attachments::Attachments;

/// A change as a [`Watched`] sees it.
#[derive(Debug)]
pub enum Change<K> {
    Applied(Arc<K>),
    Deleted(Arc<K>),
    /// The watch of this namespace (`None`: of every namespace) finished a list, with these
    /// objects in it.
    Synced(Option<String>, BTreeSet<ObjectKey>),
}

/// One watched resource: what its cache keeps and what its changes mean to routing.
pub trait Watched: Send + Sync + 'static {
    /// The resource as watched (`PartialObjectMeta<_>`: metadata only).
    type K: Resource<DynamicType = ()>
        + Bounded
        + Clone
        + Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static;

    /// The watch's name in logs and the supervision tree, when not the resource's kind.
    const NAME: Option<&'static str> = None;

    /// Whether the cache holds this object at all (a label is anyone's to set: only objects
    /// of the operator's shape are kept, `cached.rs`).
    fn keep(&self, _object: &Self::K) -> bool {
        true
    }

    /// What routing must hear of `change`.
    fn seen(&self, change: Change<Self::K>) -> Vec<Seen>;
}

/// One of the operator's own kinds: applied, deleted, listed.
fn own_kind<K: ResourceExt>(
    change: Change<K>,
    listed: Listed,
    seen: impl Fn(ObjectKey, Option<&K>) -> Seen,
) -> Vec<Seen> {
    vec![match change {
        Change::Applied(o) => seen(ObjectKey::of(o.as_ref()), Some(&o)),
        Change::Deleted(o) => seen(ObjectKey::of(o.as_ref()), None),
        Change::Synced(scope, present) => Seen::Listed {
            kind: listed,
            scope,
            present,
        },
    }]
}

/// Whether `object` (`None`: deleted) is at a version the operator wrote; a deleted object's
/// record is dropped.
fn own_version<K: ResourceExt>(
    own_writes: &OwnWrites,
    kind: Written,
    key: &ObjectKey,
    object: Option<&K>,
) -> bool {
    match object {
        Some(o) => (o.resource_version()).is_some_and(|rv| own_writes.is_own(kind, key, &rv)),
        None => {
            own_writes.forget(kind, key);
            false
        }
    }
}

/// TerdutServers.
pub struct Servers;

impl Watched for Servers {
    type K = TerdutServer;

    fn seen(&self, change: Change<TerdutServer>) -> Vec<Seen> {
        own_kind(change, Listed::Server, Seen::server)
    }
}

/// TerdutTeams; they also fill the attachments a policy's `maxTeams` counts (`tenancy/`).
pub struct Teams {
    pub own_writes: Arc<OwnWrites>,
    pub attachments: Arc<Attachments>,
}

impl Watched for Teams {
    type K = TerdutTeam;

    fn seen(&self, change: Change<TerdutTeam>) -> Vec<Seen> {
        match &change {
            Change::Applied(t) => self.attachments.seen(t),
            Change::Deleted(t) => self.attachments.gone(&ObjectKey::of(t.as_ref())),
            Change::Synced(scope, present) => self.attachments.listed(scope.as_deref(), present),
        }
        let kind = Written::Object(Kind::Team);
        own_kind(change, Listed::Team, |key, team| {
            let own = own_version(&self.own_writes, kind, &key, team);
            Seen::team(key, team, own)
        })
    }
}

/// TerdutAlertSources.
pub struct Sources {
    pub own_writes: Arc<OwnWrites>,
}

impl Watched for Sources {
    type K = TerdutAlertSource;

    fn seen(&self, change: Change<TerdutAlertSource>) -> Vec<Seen> {
        let kind = Written::Object(Kind::Source);
        own_kind(change, Listed::Source, |key, source| {
            let own = own_version(&self.own_writes, kind, &key, source);
            Seen::source(key, source, own)
        })
    }
}

/// A Deployment, Service or PDB a TerdutServer owns: its server, named by its label.
pub struct OwnedByServer<K>(PhantomData<fn() -> K>);

impl<K> Default for OwnedByServer<K> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

/// The server a labelled object names (anyone can set the label: `keep` has already checked
/// the object is of the operator's shape).
fn labelled_server<K: ResourceExt>(object: &K) -> Option<Seen> {
    let server = object.labels().get(LABEL_SERVER)?;
    let namespace = object.namespace().unwrap_or_default();
    Some(Seen::ServerOwned(ObjectKey::new(namespace, server.clone())))
}

impl<K> Watched for OwnedByServer<K>
where
    K: Resource<DynamicType = ()>
        + Bounded
        + Clone
        + Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    type K = K;

    /// Named after the TerdutServer that controls it.
    fn keep(&self, object: &K) -> bool {
        operator_shaped(object.meta(), server_object_name)
    }

    fn seen(&self, change: Change<K>) -> Vec<Seen> {
        match change {
            Change::Applied(o) | Change::Deleted(o) => {
                labelled_server(o.as_ref()).into_iter().collect()
            }
            Change::Synced(..) => vec![],
        }
    }
}

/// A Secret the operator manages, as metadata: a server's key (its server), or an alert
/// source's webhook Secret (its source, docs/design.md §5: a lost Secret fails closed).
pub struct ManagedSecrets {
    pub own_writes: Arc<OwnWrites>,
}

impl Watched for ManagedSecrets {
    type K = PartialObjectMeta<Secret>;

    /// A server's key Secret or an alert source's webhook Secret, controlled by it.
    fn keep(&self, object: &Self::K) -> bool {
        operator_shaped(object.meta(), secret_object_name)
    }

    fn seen(&self, change: Change<Self::K>) -> Vec<Seen> {
        let (o, deleted) = match change {
            Change::Applied(o) => (o, false),
            Change::Deleted(o) => (o, true),
            Change::Synced(..) => return vec![],
        };
        let mut out: Vec<Seen> = labelled_server(o.as_ref()).into_iter().collect();
        let owner = (o.owner_references().iter()).find(|r| r.kind == "TerdutAlertSource");
        if let Some(owner) = owner {
            let secret = ObjectKey::of(o.as_ref());
            let kind = Written::WebhookSecret;
            let own_version = own_version(
                &self.own_writes,
                kind,
                &secret,
                (!deleted).then_some(o.as_ref()),
            );
            out.push(Seen::WebhookSecret {
                source: ObjectKey::new(o.namespace().unwrap_or_default(), owner.name.clone()),
                secret,
                resource_version: o.resource_version(),
                deleted,
                own_version,
            });
        }
        out
    }
}

/// Every Namespace's labels (consent, docs/design.md §4.6).
pub struct Namespaces;

impl Watched for Namespaces {
    type K = PartialObjectMeta<Namespace>;

    fn seen(&self, change: Change<Self::K>) -> Vec<Seen> {
        vec![match change {
            Change::Applied(ns) => Seen::Namespace {
                name: ns.name_any(),
                labels: Some(ns.labels().clone()),
            },
            Change::Deleted(ns) => Seen::Namespace {
                name: ns.name_any(),
                labels: None,
            },
            Change::Synced(_, present) => Seen::Listed {
                kind: Listed::Namespace,
                scope: None,
                present,
            },
        }]
    }
}

/// The namespaces `--watch-namespace-selector` selects (docs/configuration.md "Sharding").
pub struct SelectedNamespaces;

impl Watched for SelectedNamespaces {
    type K = PartialObjectMeta<Namespace>;
    const NAME: Option<&'static str> = Some("Namespace (selected)");

    fn seen(&self, change: Change<Self::K>) -> Vec<Seen> {
        vec![Seen::Scope(match change {
            Change::Applied(ns) => ScopeChange::In(ns.name_any()),
            Change::Deleted(ns) => ScopeChange::Out(ns.name_any()),
            Change::Synced(_, present) => {
                ScopeChange::Listed(present.iter().map(|k| k.name.clone()).collect())
            }
        })]
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    use super::*;

    fn meta(name: &str, version: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some("tenant".into()),
            resource_version: Some(version.into()),
            ..Default::default()
        }
    }

    fn team(version: &str) -> Arc<TerdutTeam> {
        let mut team = TerdutTeam::new(
            "ops",
            serde_json::from_value(serde_json::json!({
                "serverRef": {"name": "terdut"}, "displayName": "Ops"
            }))
            .unwrap(),
        );
        team.metadata = meta("ops", version);
        Arc::new(team)
    }

    fn controlled_by(kind: &str, owner: &str) -> Vec<OwnerReference> {
        vec![OwnerReference {
            api_version: "terdut.ryuvia.com/v1alpha1".into(),
            kind: kind.into(),
            name: owner.into(),
            uid: "u".into(),
            controller: Some(true),
            ..Default::default()
        }]
    }

    fn secret(name: &str, owners: Vec<OwnerReference>) -> PartialObjectMeta<Secret> {
        PartialObjectMeta {
            metadata: ObjectMeta {
                owner_references: Some(owners),
                ..meta(name, "7")
            },
            ..Default::default()
        }
    }

    fn teams(own: &Arc<OwnWrites>) -> Teams {
        Teams {
            own_writes: own.clone(),
            attachments: Arc::new(Attachments::new(0)),
        }
    }

    #[test]
    fn a_team_at_a_version_the_operator_wrote_is_its_own_until_the_team_is_deleted() {
        let own = Arc::new(OwnWrites::default());
        let key = ObjectKey::new("tenant", "ops");
        let kind = Written::Object(Kind::Team);
        own.record(kind, &key, Some("5".into()));
        let watched = teams(&own);
        let own_of = |seen: Vec<Seen>| match seen.as_slice() {
            [Seen::Team { own_version, .. }] => *own_version,
            other => panic!("not one team: {other:?}"),
        };
        assert!(own_of(watched.seen(Change::Applied(team("5")))));
        assert!(!own_of(watched.seen(Change::Applied(team("6")))));
        assert!(!own_of(watched.seen(Change::Deleted(team("5")))));
        // The deletion dropped the record: the same version, if it came back, is not own.
        assert!(!own.is_own(kind, &key, "5"));
    }

    #[test]
    fn a_teams_list_reaches_routing_with_its_scope() {
        let watched = teams(&Arc::new(OwnWrites::default()));
        let present: BTreeSet<_> = [ObjectKey::new("tenant", "ops")].into();
        let seen = watched.seen(Change::Synced(Some("tenant".into()), present.clone()));
        assert!(matches!(
            seen.as_slice(),
            [Seen::Listed { kind: Listed::Team, scope: Some(s), present: p }]
                if s == "tenant" && *p == present
        ));
    }

    #[test]
    fn a_webhook_secret_reaches_its_alert_source_and_one_written_by_the_operator_says_so() {
        let own = Arc::new(OwnWrites::default());
        let key = ObjectKey::new("tenant", crate::source::names::secret_name("alerts"));
        own.record(Written::WebhookSecret, &key, Some("7".into()));
        let watched = ManagedSecrets {
            own_writes: own.clone(),
        };
        let s = Arc::new(secret(
            &crate::source::names::secret_name("alerts"),
            controlled_by("TerdutAlertSource", "alerts"),
        ));
        assert!(watched.keep(&s));
        let seen = watched.seen(Change::Applied(s.clone()));
        assert!(matches!(
            seen.as_slice(),
            [Seen::WebhookSecret { source, deleted: false, own_version: true, .. }]
                if *source == ObjectKey::new("tenant", "alerts")
        ));
        let seen = watched.seen(Change::Deleted(s));
        assert!(matches!(
            seen.as_slice(),
            [Seen::WebhookSecret {
                deleted: true,
                own_version: false,
                ..
            }]
        ));
        assert!(!own.is_own(Written::WebhookSecret, &key, "7"));
    }

    #[test]
    fn a_labelled_object_not_of_the_operators_shape_is_not_kept() {
        let watched = ManagedSecrets {
            own_writes: Arc::default(),
        };
        // Named like no Secret the operator makes for its owner.
        let foreign = secret("anything", controlled_by("TerdutServer", "terdut"));
        assert!(!watched.keep(&foreign));
        let mut deployment = k8s_openapi::api::apps::v1::Deployment {
            metadata: meta("other", "1"),
            ..Default::default()
        };
        deployment.metadata.owner_references = Some(controlled_by("TerdutServer", "terdut"));
        assert!(!OwnedByServer::default().keep(&deployment));
        deployment.metadata.name = Some("terdut".into());
        assert!(OwnedByServer::default().keep(&deployment));
    }

    #[test]
    fn an_object_labelled_with_its_server_wakes_that_server() {
        let mut deployment = k8s_openapi::api::apps::v1::Deployment {
            metadata: meta("terdut", "1"),
            ..Default::default()
        };
        deployment.metadata.labels = Some([(LABEL_SERVER.to_owned(), "terdut".to_owned())].into());
        let seen = OwnedByServer::default().seen(Change::Deleted(Arc::new(deployment)));
        assert!(matches!(
            seen.as_slice(),
            [Seen::ServerOwned(k)] if *k == ObjectKey::new("tenant", "terdut")
        ));
    }

    #[test]
    fn the_selected_namespaces_list_names_the_selection() {
        let present: BTreeSet<_> = [ObjectKey::new("", "a"), ObjectKey::new("", "b")].into();
        let seen = SelectedNamespaces.seen(Change::Synced(None, present));
        let want: BTreeSet<String> = ["a".to_owned(), "b".to_owned()].into();
        assert!(matches!(
            seen.as_slice(),
            [Seen::Scope(ScopeChange::Listed(names))] if *names == want
        ));
    }
}
