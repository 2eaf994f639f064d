//! The writer's first incarnation delivers the placement its backlog settles on, not each
//! message's (docs/design.md §5, ADR 0018): a new leader whose source informer listed before
//! its team informer must not run those sources' passes under the holding host, where they
//! would write `Ready=False` for objects that are fine.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::Event;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutServer, TerdutTeam};

use super::*;
use crate::stores::NamespacedStores;
use crate::tenancy::attachments::Attachments;

/// A host that records what it is sent.
struct Recorder(Arc<Mutex<Vec<String>>>);

impl Actor for Recorder {
    type Msg = ChildrenMsg;
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<ChildrenMsg>, (): ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle(
        &self,
        _: ActorRef<ChildrenMsg>,
        msg: ChildrenMsg,
        (): &mut (),
    ) -> Result<(), ActorProcessingErr> {
        self.0.lock().unwrap().push(format!("{msg:?}"));
        Ok(())
    }
}

/// The root as the writer sees it: the servers it was asked to ensure.
struct Root(Arc<Mutex<Vec<String>>>);

impl ServerRoot for Root {
    fn ensure(&self, key: ObjectKey, _: Arc<TerdutServer>, _: tokio::time::Instant) {
        self.0.lock().unwrap().push(format!("ensure {key}"));
    }
    fn remove(&self, key: ObjectKey) {
        self.0.lock().unwrap().push(format!("remove {key}"));
    }
    fn retain(&self, _: BTreeSet<ObjectKey>) {}
}

/// A cache holding `objects`, as a listed reflector's.
fn filled<K>(objects: Vec<K>) -> Store<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    let (store, mut writer) = reflector::store();
    writer.apply_watcher_event(&Event::Init);
    for o in objects {
        writer.apply_watcher_event(&Event::InitApply(o));
    }
    writer.apply_watcher_event(&Event::InitDone);
    store
}

fn object<K: serde::de::DeserializeOwned>(v: serde_json::Value) -> K {
    serde_json::from_value(v).unwrap()
}

fn meta(name: &str) -> serde_json::Value {
    serde_json::json!({"name": name, "namespace": "oncall", "uid": format!("uid-{name}"),
        "resourceVersion": "1", "generation": 1})
}

struct Fleet {
    server: TerdutServer,
    team: TerdutTeam,
    source: TerdutAlertSource,
}

fn fleet() -> Fleet {
    Fleet {
        server: object(serde_json::json!({
            "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutServer",
            "metadata": meta("terdut"),
            "spec": {"image": {"repository": "terdut-server", "tag": "v1"},
                     "database": {"dsn": "postgres://db/terdut"},
                     "networking": {"hostname": "terdut.example.com", "servicePort": 8080}},
        })),
        team: object(serde_json::json!({
            "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutTeam",
            "metadata": meta("payments"),
            "spec": {"serverRef": {"name": "terdut"}, "displayName": "Payments"},
        })),
        source: object(serde_json::json!({
            "apiVersion": "terdut.ryuvia.com/v1alpha1", "kind": "TerdutAlertSource",
            "metadata": meta("alertmanager"),
            "spec": {"teamRef": {"name": "payments"}, "kind": "alertmanager", "name": "Alertmanager"},
        })),
    }
}

fn empty<K: kube::Resource<DynamicType = ()> + Clone + 'static>() -> NamespacedStores<K> {
    NamespacedStores::all(filled(vec![]))
}

fn stores(f: &Fleet) -> Stores {
    Stores {
        servers: NamespacedStores::all(filled(vec![f.server.clone()])),
        teams: NamespacedStores::all(filled(vec![f.team.clone()])),
        sources: NamespacedStores::all(filled(vec![f.source.clone()])),
        deployments: empty(),
        services: empty(),
        pdbs: empty(),
        secrets: empty(),
        namespaces: filled(vec![]),
        attachments: Arc::new(Attachments::new(1)),
    }
}

/// What each host was sent after the writer took `backlog` (the informers' first lists, in
/// that order) and the holding host's adoption, as at the start of a leader.
async fn start_on(backlog: impl FnOnce(&Writer, &Fleet)) -> (Vec<String>, Vec<String>) {
    let f = fleet();
    let (writer, inbox) = Writer::channel();
    let held = Arc::new(Mutex::new(vec![]));
    let (holding, handle) = Actor::spawn(None, Recorder(held.clone()), ())
        .await
        .unwrap();
    // The holding host starts before routing and asks for its children first.
    writer.adopt(Host::Holding, HostRef::Holding(holding.clone()));
    backlog(&writer, &f);
    let roots = Arc::new(Mutex::new(vec![]));
    let mut part = WriterPart::new(
        inbox,
        Outlets {
            root: Box::new(Root(roots.clone())),
            holding: Current::new(Some(holding.clone())),
            registry: Registry::default(),
            stores: stores(&f),
            children: true,
            scoped: false,
        },
    );
    drop(writer);
    part.run().await.unwrap();
    // Everything the writer cast is in the recorder's mailbox before this stop.
    holding.drain().unwrap();
    handle.await.unwrap();
    let held = held.lock().unwrap().clone();
    let roots = roots.lock().unwrap().clone();
    (held, roots)
}

fn seen_source(w: &Writer, f: &Fleet) {
    w.seen(Seen::source(
        ObjectKey::of(&f.source),
        Some(&f.source),
        false,
    ));
}

fn seen_team(w: &Writer, f: &Fleet) {
    w.seen(Seen::team(ObjectKey::of(&f.team), Some(&f.team), false));
}

fn seen_server(w: &Writer, f: &Fleet) {
    w.seen(Seen::server(ObjectKey::of(&f.server), Some(&f.server)));
}

#[tokio::test]
async fn a_source_listed_before_its_team_never_passes_under_the_holding_host() {
    let (held, roots) = start_on(|w, f| {
        seen_source(w, f);
        seen_team(w, f);
        seen_server(w, f);
    })
    .await;
    assert!(held.is_empty(), "the holding host was sent {held:?}");
    assert_eq!(roots, ["ensure oncall/terdut"]);
}

#[tokio::test]
async fn a_team_whose_server_does_not_exist_is_held_once() {
    let (held, roots) = start_on(|w, f| {
        seen_source(w, f);
        seen_team(w, f);
    })
    .await;
    assert_eq!(
        held,
        [
            "Teams(Ensure(oncall/payments))",
            "Sources(Ensure(oncall/alertmanager))"
        ]
    );
    assert!(roots.is_empty(), "{roots:?}");
}
