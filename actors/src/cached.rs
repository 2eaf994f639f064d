//! What the informer caches keep (docs/design.md §5 "What a cache keeps", docs/security.md
//! "Memory a tenant cannot grow"). Anything a tenant writes lands in the leader's memory
//! through a watch, so every cached object is cut to what the operator reads, within a bound
//! that no tenant can raise:
//!
//! - **Only objects of the operator's shape.** The owned kinds are watched by label, and a
//!   label is anyone's to set: a few hundred labelled 700 KB Secrets once filled the chart's
//!   memory limit. [`operator_shaped`] keeps an owned object only when its controller owner
//!   reference is a TerdutServer or TerdutAlertSource and its name is the one the operator
//!   gives that owner's object (`<server>`, `<server>-operator-key`,
//!   `<source>-terdut-webhook`). The garbage collector removes an object whose owner does not
//!   exist with that uid, so at most one object per kind and owner stays cached, and its owner
//!   is an object someone had the right to create.
//! - **Of each, what the operator reads** ([`Bounded`]): no `managedFields`; annotations only
//!   in the operator's prefix, each value at most [`MAX_ANNOTATION_VALUE`] bytes and at most
//!   [`MAX_ANNOTATIONS`] of them; labels only in the operator's and `app.kubernetes.io/`
//!   prefixes (the ones it sets), at most [`MAX_LABELS`]; of the owner references the
//!   controller's only; a status over [`STATUS_BUDGET`] bytes (the operator's own never is)
//!   cut to short strings and short lists, or dropped. Secrets are cached as metadata only
//!   (`informers.rs`): the data is read live where it is needed.
//! - Namespaces keep their labels (consent selects on them) and nothing else; only a cluster
//!   admin can label a namespace.
//!
//! What stays unbounded is the spec (the CRD schema bounds its fields) and the finalizers,
//! which the finalizer patch must send back whole.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::core::PartialObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutServer, TerdutTeam};

use crate::server::names::key_secret_name;
use crate::source::names::secret_name as webhook_secret_name;

/// The prefix of every annotation and label the operator reads on its own kinds.
pub const OPERATOR_PREFIX: &str = "terdut.ryuvia.com/";
/// The prefix of the recommended labels the operator sets on what it owns.
pub const APP_PREFIX: &str = "app.kubernetes.io/";
/// The longest annotation value kept; a longer one is dropped (the operator's own values are
/// ids, hashes, `"true"` and a user's rotate value).
pub const MAX_ANNOTATION_VALUE: usize = 1024;
/// The most annotations kept per object, in key order.
pub const MAX_ANNOTATIONS: usize = 16;
/// The most labels kept per object, in key order.
pub const MAX_LABELS: usize = 32;
/// A status larger than this (as JSON) is cut ([`bound_status`]). The operator's own statuses
/// stay far below it: a handful of conditions with messages of about a kilobyte, and at most
/// 21 lines each of plan and last applied changes.
pub const STATUS_BUDGET: usize = 32 * 1024;
/// In a status over budget: the longest string kept (cut on a character boundary) ...
pub const CUT_STRING: usize = 256;
/// ... and the most items of a list.
pub const CUT_ITEMS: usize = 16;

/// Cuts one cached object to what the operator reads (see the module docs).
pub trait Bounded {
    fn bound(&mut self);
}

/// The owned kinds: what the operator reads of them is its own (its spec, the API server's
/// status); their metadata is bounded like every other object's.
macro_rules! metadata_only_bound {
    ($($kind:ty),*) => {$(
        impl Bounded for $kind {
            fn bound(&mut self) {
                bound_meta(&mut self.metadata);
            }
        }
    )*};
}

metadata_only_bound!(
    Deployment,
    Service,
    PodDisruptionBudget,
    PartialObjectMeta<Secret>
);

/// Namespaces are read for their labels only (consent, docs/design.md §4.6).
impl Bounded for PartialObjectMeta<Namespace> {
    fn bound(&mut self) {
        bound_namespace_meta(&mut self.metadata);
    }
}

impl Bounded for TerdutServer {
    fn bound(&mut self) {
        bound_meta(&mut self.metadata);
        bound_status(&mut self.status);
    }
}

impl Bounded for TerdutTeam {
    fn bound(&mut self) {
        bound_meta(&mut self.metadata);
        bound_status(&mut self.status);
    }
}

impl Bounded for TerdutAlertSource {
    fn bound(&mut self) {
        bound_meta(&mut self.metadata);
        bound_status(&mut self.status);
    }
}

/// The metadata every cached object keeps (see the module docs). `None`, not `clear()`: a
/// cleared Vec or map keeps its buffer in every cached object.
pub fn bound_meta(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
    meta.annotations = keep_prefixed(
        meta.annotations.take(),
        &[OPERATOR_PREFIX],
        MAX_ANNOTATIONS,
        MAX_ANNOTATION_VALUE,
    );
    // Label values are at most 63 characters (the API server checks).
    meta.labels = keep_prefixed(
        meta.labels.take(),
        &[OPERATOR_PREFIX, APP_PREFIX],
        MAX_LABELS,
        63,
    );
    meta.owner_references = meta
        .owner_references
        .take()
        .map(|refs| {
            refs.into_iter()
                .filter(|r| r.controller == Some(true))
                .take(1)
                .collect::<Vec<_>>()
        })
        .filter(|refs| !refs.is_empty());
}

/// A Namespace's metadata: its labels (consent, docs/design.md §4.6) and its identity.
pub fn bound_namespace_meta(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
    meta.annotations = None;
    meta.owner_references = None;
}

fn keep_prefixed(
    map: Option<BTreeMap<String, String>>,
    prefixes: &[&str],
    most: usize,
    longest_value: usize,
) -> Option<BTreeMap<String, String>> {
    let kept: BTreeMap<String, String> = map?
        .into_iter()
        .filter(|(k, v)| prefixes.iter().any(|p| k.starts_with(p)) && v.len() <= longest_value)
        .take(most)
        .collect();
    (!kept.is_empty()).then_some(kept)
}

/// Cuts a status larger than [`STATUS_BUDGET`]: every string to [`CUT_STRING`] bytes and every
/// list to [`CUT_ITEMS`] items; one that is still too large (or no longer reads as a status)
/// is dropped, as if no pass had written one. A status within the budget is left as it is, so
/// the operator's own never changes here (which would make every pass write it again).
pub fn bound_status<S: Serialize + DeserializeOwned>(status: &mut Option<S>) {
    let Some(s) = status.as_ref() else {
        return;
    };
    if json_len(s) <= STATUS_BUDGET {
        return;
    }
    let cut = serde_json::to_value(s).ok().and_then(|mut v| {
        cut_value(&mut v);
        (json_len(&v) <= STATUS_BUDGET)
            .then(|| serde_json::from_value::<S>(v).ok())
            .flatten()
    });
    *status = cut;
}

/// The length of `value` as JSON, without keeping the text.
fn json_len<T: Serialize + ?Sized>(value: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

fn cut_value(v: &mut Value) {
    match v {
        Value::String(s) => truncate(s, CUT_STRING),
        Value::Array(items) => {
            items.truncate(CUT_ITEMS);
            items.iter_mut().for_each(cut_value);
        }
        Value::Object(fields) => fields.values_mut().for_each(cut_value),
        _ => {}
    }
}

/// Cuts `s` to at most `most` bytes on a character boundary.
pub fn truncate(s: &mut String, most: usize) {
    if s.len() > most {
        let mut end = most;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}

/// Whether the owned object with `meta` is one the operator makes: its controller owner
/// reference is a TerdutServer (or TerdutAlertSource) and its name is the one the operator
/// gives that owner's object of this kind (`name_for`: the owner's kind and name to the
/// expected name, `None` for an owner kind that makes no such object).
pub fn operator_shaped(meta: &ObjectMeta, name_for: fn(&str, &str) -> Option<String>) -> bool {
    let Some(owner) = controller(meta) else {
        return false;
    };
    if !owner.api_version.starts_with("terdut.ryuvia.com/") {
        return false;
    }
    name_for(&owner.kind, &owner.name).is_some_and(|want| meta.name.as_deref() == Some(&want))
}

fn controller(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

/// A Deployment, Service or PodDisruptionBudget is named after its TerdutServer.
pub fn server_object_name(owner_kind: &str, owner: &str) -> Option<String> {
    (owner_kind == "TerdutServer").then(|| owner.to_owned())
}

/// A server's operator key Secret, or an alert source's webhook Secret.
pub fn secret_object_name(owner_kind: &str, owner: &str) -> Option<String> {
    match owner_kind {
        "TerdutServer" => Some(key_secret_name(owner)),
        "TerdutAlertSource" => Some(webhook_secret_name(owner)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ManagedFieldsEntry, Time};
    use terdut_crds::v1alpha1::TerdutTeamStatus;

    use super::*;

    fn owner(kind: &str, name: &str, controller: bool) -> OwnerReference {
        OwnerReference {
            api_version: "terdut.ryuvia.com/v1alpha1".into(),
            kind: kind.into(),
            name: name.into(),
            uid: "u".into(),
            controller: Some(controller),
            block_owner_deletion: None,
        }
    }

    fn meta(name: &str, owners: Vec<OwnerReference>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            owner_references: Some(owners),
            ..Default::default()
        }
    }

    #[test]
    fn only_the_operators_own_secrets_are_of_its_shape() {
        let ours = [
            meta(
                "terdut-operator-key",
                vec![owner("TerdutServer", "terdut", true)],
            ),
            meta(
                "am-terdut-webhook",
                vec![owner("TerdutAlertSource", "am", true)],
            ),
        ];
        for m in &ours {
            assert!(operator_shaped(m, secret_object_name), "{:?}", m.name);
        }
        let theirs = [
            // The label alone: anyone's to set.
            meta("big-1", vec![]),
            // Owned by a real source, but not its webhook Secret's name.
            meta("big-2", vec![owner("TerdutAlertSource", "am", true)]),
            // Not the controller.
            meta(
                "am-terdut-webhook",
                vec![owner("TerdutAlertSource", "am", false)],
            ),
            // Another API group's kind of the same name.
            meta("am-terdut-webhook", {
                let mut o = owner("TerdutAlertSource", "am", true);
                o.api_version = "example.com/v1".into();
                vec![o]
            }),
            // A team makes no Secret.
            meta("t-terdut-webhook", vec![owner("TerdutTeam", "t", true)]),
        ];
        for m in &theirs {
            assert!(!operator_shaped(m, secret_object_name), "{:?}", m);
        }
        assert!(operator_shaped(
            &meta("terdut", vec![owner("TerdutServer", "terdut", true)]),
            server_object_name
        ));
        assert!(!operator_shaped(
            &meta("other", vec![owner("TerdutServer", "terdut", true)]),
            server_object_name
        ));
    }

    #[test]
    fn metadata_keeps_the_operators_annotations_and_labels_within_bounds() {
        let mut annotations = BTreeMap::from([
            (
                "kubectl.kubernetes.io/last-applied-configuration".to_owned(),
                "{}".to_owned(),
            ),
            ("example.com/huge".to_owned(), "x".repeat(200_000)),
            ("terdut.ryuvia.com/paused".to_owned(), "true".to_owned()),
            (
                "terdut.ryuvia.com/too-long".to_owned(),
                "x".repeat(MAX_ANNOTATION_VALUE + 1),
            ),
        ]);
        for i in 0..100 {
            annotations.insert(format!("terdut.ryuvia.com/z{i:03}"), "1".into());
        }
        let mut labels = BTreeMap::from([
            (
                "app.kubernetes.io/name".to_owned(),
                "terdut-server".to_owned(),
            ),
            ("team".to_owned(), "a".to_owned()),
        ]);
        for i in 0..100 {
            labels.insert(format!("terdut.ryuvia.com/l{i:03}"), "1".into());
        }
        let mut m = ObjectMeta {
            managed_fields: Some(vec![ManagedFieldsEntry::default()]),
            annotations: Some(annotations),
            labels: Some(labels),
            owner_references: Some(vec![
                owner("Other", "x", false),
                owner("TerdutServer", "terdut", true),
            ]),
            finalizers: Some(vec!["a".into(), "b".into()]),
            ..Default::default()
        };
        bound_meta(&mut m);
        assert_eq!(m.managed_fields, None);
        let a = m.annotations.unwrap();
        assert_eq!(a.len(), MAX_ANNOTATIONS);
        assert_eq!(a["terdut.ryuvia.com/paused"], "true");
        assert!(!a.contains_key("terdut.ryuvia.com/too-long"));
        assert!(a.keys().all(|k| k.starts_with(OPERATOR_PREFIX)));
        let l = m.labels.unwrap();
        assert_eq!(l.len(), MAX_LABELS);
        assert_eq!(l["app.kubernetes.io/name"], "terdut-server");
        assert!(!l.contains_key("team"));
        assert_eq!(
            m.owner_references.unwrap(),
            vec![owner("TerdutServer", "terdut", true)]
        );
        assert_eq!(
            m.finalizers.unwrap().len(),
            2,
            "finalizers are sent back whole"
        );

        let mut bare = ObjectMeta {
            annotations: Some(BTreeMap::from([("a".into(), "b".into())])),
            owner_references: Some(vec![owner("Other", "x", false)]),
            ..Default::default()
        };
        bound_meta(&mut bare);
        assert_eq!((bare.annotations, bare.owner_references), (None, None));
    }

    fn condition(type_: &str, message: String) -> Condition {
        Condition {
            type_: type_.into(),
            status: "True".into(),
            reason: "Ready".into(),
            message,
            observed_generation: Some(1),
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        }
    }

    #[test]
    fn a_status_within_budget_is_kept_exactly_and_a_forged_one_is_cut() {
        let own = TerdutTeamStatus {
            conditions: vec![condition("Ready", "m".repeat(2_000))],
            team_id: Some(4),
            plan: Some(
                (0..21)
                    .map(|i| format!("line {i} {}", "x".repeat(200)))
                    .collect(),
            ),
            ..Default::default()
        };
        let mut kept = Some(own.clone());
        bound_status(&mut kept);
        assert_eq!(
            kept,
            Some(own),
            "the operator's own status is never changed"
        );

        let forged = TerdutTeamStatus {
            conditions: (0..200)
                .map(|i| condition(&format!("T{i}"), "m".repeat(30_000)))
                .collect(),
            team_id: Some(4),
            ..Default::default()
        };
        let mut cut = Some(forged);
        bound_status(&mut cut);
        let cut = cut.expect("cut, still a status");
        assert!(json_len(&cut) <= STATUS_BUDGET);
        assert_eq!(cut.conditions.len(), CUT_ITEMS);
        assert_eq!(cut.conditions[0].message.len(), CUT_STRING);
        assert_eq!(cut.team_id, Some(4));

        let mut none: Option<TerdutTeamStatus> = None;
        bound_status(&mut none);
        assert_eq!(none, None);
    }

    #[test]
    fn truncation_keeps_characters_whole() {
        let mut s = "é".repeat(10);
        truncate(&mut s, 5);
        assert_eq!(s, "éé");
    }
}
