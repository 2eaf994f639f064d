//! Overlapping shards (docs/configuration.md "Sharding"): two operator instances whose
//! selections share an object would both reconcile it. Each instance publishes what it selects
//! in a claim, a ConfigMap `terdut-instance-<name>` in its own namespace (where no tenant
//! writes), renewed every [`HEARTBEAT`] as Argo CD's application-controller shards renew theirs;
//! a claim not renewed for [`STALE_AFTER`] is an instance that stopped.
//!
//! Detection never trusts what a tenant writes: the claims hold the instances' own flags, and
//! an object's labels are only what the selectors are applied to (a tenant can put their object
//! in both selections, which is then exactly what happens). For each object, the instances
//! whose claims select it are compared and the one whose name sorts first keeps it (a rule that
//! every instance applies alike and that no restart changes); any other yields, reconciles nothing of it and says so in a Warning Event on
//! the object (`SelectedByTwoInstances`) and in its log. Selections that could overlap at all
//! are logged once when a claim appears ([`Selector::disjoint`]).

use std::collections::BTreeMap;
use std::sync::RwLock;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

use super::scope::Scope;
use super::selector::Selector;
use crate::names::FIELD_MANAGER;

/// The label of every claim.
pub const LABEL: &str = "terdut.ryuvia.com/instance-claim";
const PREFIX: &str = "terdut-instance-";
/// How often an instance renews its claim.
pub const HEARTBEAT: Duration = Duration::from_secs(30);
/// A claim not renewed for this long (by the reader's clock) is an instance that stopped.
pub const STALE_AFTER: Duration = Duration::from_secs(90);

/// One instance's claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    pub instance: String,
    pub scope: Scope,
    /// When the claim was first made (its ConfigMap's creation, set by the API server).
    pub since: Option<Timestamp>,
    /// Its last renewal, as written by its instance.
    pub renewed: Option<Timestamp>,
}

impl Claim {
    /// Whether this claim's instance selects an object of `namespace` with `labels`.
    pub fn selects(
        &self,
        namespace: &str,
        namespace_labels: Option<&BTreeMap<String, String>>,
        labels: &BTreeMap<String, String>,
    ) -> bool {
        self.scope
            .excluded(namespace, namespace_labels, labels)
            .is_none()
    }

    /// Whether no object can be selected by both (sound, not complete).
    pub fn disjoint(&self, other: &Claim) -> bool {
        let namespaces_apart = !self.scope.namespaces.is_empty()
            && !other.scope.namespaces.is_empty()
            && !self
                .scope
                .namespaces
                .iter()
                .any(|n| other.scope.namespaces.contains(n));
        let parse = |s: &Option<String>| s.as_deref().map(Selector::parse);
        let selectors_apart = match (parse(&self.scope.selector), parse(&other.scope.selector)) {
            (Some(Ok(a)), Some(Ok(b))) => a.disjoint(&b),
            _ => false,
        };
        namespaces_apart || selectors_apart
    }

    /// The order in which claims keep an object both select: by name.
    fn precedence(&self) -> &str {
        self.instance.as_str()
    }
}

/// PURE: the claim's ConfigMap data.
pub fn data(instance: &str, scope: &Scope, renewed: Timestamp) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("instance".to_owned(), instance.to_owned()),
        (
            "selector".to_owned(),
            scope.selector.clone().unwrap_or_default(),
        ),
        ("watchNamespaces".to_owned(), scope.namespaces.join(",")),
        (
            "watchNamespaceSelector".to_owned(),
            scope.namespace_selector.clone().unwrap_or_default(),
        ),
        ("renewed".to_owned(), renewed.to_string()),
    ])
}

/// PURE: a claim read back (`None`: not one).
pub fn read(cm: &ConfigMap) -> Option<Claim> {
    let d = cm.data.as_ref()?;
    let text = |k: &str| d.get(k).filter(|v| !v.is_empty()).cloned();
    Some(Claim {
        instance: text("instance")?,
        scope: Scope {
            selector: text("selector"),
            namespaces: text("watchNamespaces")
                .map(|n| n.split(',').map(str::to_owned).collect())
                .unwrap_or_default(),
            namespace_selector: text("watchNamespaceSelector"),
        },
        since: cm.metadata.creation_timestamp.as_ref().map(|t| t.0),
        renewed: text("renewed").and_then(|t| t.parse().ok()),
    })
}

/// PURE: whether a claim renewed at `renewed` is still live at `now`.
pub fn live(renewed: Option<Timestamp>, now: Timestamp) -> bool {
    renewed.is_some_and(|r| {
        now.duration_since(r)
            .try_into()
            .is_ok_and(|d: Duration| d < STALE_AFTER)
            // Renewed "in the future": a clock ahead of ours, still live.
            || r > now
    })
}

/// PURE: the claim that keeps an object `mine` would reconcile, when it is not `mine`.
pub fn keeper<'a>(
    mine: &'a Claim,
    others: &'a [Claim],
    namespace: &str,
    namespace_labels: Option<&BTreeMap<String, String>>,
    labels: &BTreeMap<String, String>,
) -> Option<&'a Claim> {
    let oldest = others
        .iter()
        .filter(|c| c.instance != mine.instance)
        .filter(|c| c.selects(namespace, namespace_labels, labels))
        .min_by(|a, b| a.precedence().cmp(b.precedence()))?;
    (oldest.precedence() < mine.precedence()).then_some(oldest)
}

/// What this instance knows of the claims (`Ctx::claims`).
#[derive(Debug)]
pub struct Claims {
    mine: RwLock<Claim>,
    others: RwLock<Vec<Claim>>,
}

impl Claims {
    pub fn new(instance: &str, scope: Scope) -> Self {
        Self {
            mine: RwLock::new(Claim {
                instance: instance.to_owned(),
                scope,
                since: None,
                renewed: None,
            }),
            others: RwLock::new(vec![]),
        }
    }

    /// The live claim of another instance that keeps this object, if one does.
    pub fn kept_by(
        &self,
        namespace: &str,
        namespace_labels: Option<&BTreeMap<String, String>>,
        labels: &BTreeMap<String, String>,
    ) -> Option<Claim> {
        let mine = self.mine.read().ok()?;
        let others = self.others.read().ok()?;
        keeper(&mine, &others, namespace, namespace_labels, labels).cloned()
    }

    fn name(&self) -> String {
        self.mine
            .read()
            .map(|m| format!("{PREFIX}{}", m.instance))
            .unwrap_or_default()
    }

    /// Renews this instance's claim and reads the others' once.
    pub async fn refresh(&self, kube: &kube::Client, namespace: &str) -> Result<(), kube::Error> {
        let api: Api<ConfigMap> = Api::namespaced(kube.clone(), namespace);
        let (instance, scope) = match self.mine.read() {
            Ok(m) => (m.instance.clone(), m.scope.clone()),
            Err(_) => return Ok(()),
        };
        let name = self.name();
        let body = data(&instance, &scope, Timestamp::now());
        let patch = json!({"data": body});
        let written = match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Err(kube::Error::Api(e)) if e.code == 404 => {
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        labels: Some(BTreeMap::from([
                            (LABEL.to_owned(), "true".to_owned()),
                            (
                                "app.kubernetes.io/managed-by".to_owned(),
                                FIELD_MANAGER.to_owned(),
                            ),
                        ])),
                        ..Default::default()
                    },
                    data: Some(body),
                    ..Default::default()
                };
                api.create(&PostParams::default(), &cm).await?
            }
            other => other?,
        };
        if let Ok(mut m) = self.mine.write() {
            m.since = written.metadata.creation_timestamp.as_ref().map(|t| t.0);
        }
        let list = api
            .list(&ListParams::default().labels(&format!("{LABEL}=true")))
            .await?;
        let now = Timestamp::now();
        let others: Vec<Claim> = list
            .items
            .iter()
            .filter(|cm| cm.metadata.name.as_deref() != Some(name.as_str()))
            .filter_map(read)
            .filter(|c| c.instance != instance && live(c.renewed, now))
            .collect();
        let mine = self.mine.read().map(|m| m.clone()).ok();
        if let (Some(mine), Ok(before)) = (mine, self.others.read()) {
            for c in &others {
                let new = !before.iter().any(|b| b.instance == c.instance);
                if new && !mine.disjoint(c) {
                    tracing::error!(
                        this = %mine.instance, other = %c.instance,
                        this_selector = ?mine.scope.selector, other_selector = ?c.scope.selector,
                        "another operator instance's selection can overlap this one's: an \
                         object both select is kept by the instance whose name sorts first and \
                         skipped by the other, with a SelectedByTwoInstances Event"
                    );
                }
            }
        }
        if let Ok(mut o) = self.others.write() {
            *o = others;
        }
        Ok(())
    }

    /// Takes this instance's claim back (a graceful stop), so nothing yields to it.
    pub async fn release(&self, kube: &kube::Client, namespace: &str) {
        let api: Api<ConfigMap> = Api::namespaced(kube.clone(), namespace);
        if let Err(e) = api.delete(&self.name(), &DeleteParams::default()).await {
            tracing::debug!(error = %e, "could not delete the instance claim");
        }
    }
}

/// Renews the claim and reads the others every [`HEARTBEAT`], for ever.
pub async fn run(claims: std::sync::Arc<Claims>, kube: kube::Client, namespace: String) {
    loop {
        tokio::time::sleep(HEARTBEAT).await;
        if let Err(e) = claims.refresh(&kube, &namespace).await {
            tracing::warn!(error = %e, "could not renew the instance claim or read the others");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(instance: &str, selector: Option<&str>, since: i64) -> Claim {
        Claim {
            instance: instance.into(),
            scope: Scope {
                selector: selector.map(str::to_owned),
                ..Scope::default()
            },
            since: Some(Timestamp::from_second(since).unwrap()),
            renewed: None,
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_claim_named_first_keeps_an_object_both_select() {
        let old = claim("a", Some("team=x"), 20);
        let young = claim("b", Some("shard=b"), 10);
        let both = labels(&[("team", "x"), ("shard", "b")]);
        assert_eq!(
            keeper(&young, std::slice::from_ref(&old), "ns", None, &both),
            Some(&old)
        );
        assert_eq!(
            keeper(&old, std::slice::from_ref(&young), "ns", None, &both),
            None
        );
        // Only one selects it: no contest.
        let only_b = labels(&[("shard", "b")]);
        assert_eq!(
            keeper(&young, std::slice::from_ref(&old), "ns", None, &only_b),
            None
        );
        // The same way on both sides, whatever the ages.
        let twin = claim("c", Some("team=x"), 1);
        assert_eq!(
            keeper(&twin, std::slice::from_ref(&old), "ns", None, &both),
            Some(&old)
        );
        assert_eq!(
            keeper(&old, std::slice::from_ref(&twin), "ns", None, &both),
            None
        );
    }

    #[test]
    fn disjoint_selections_are_told_from_ones_a_label_can_join() {
        let a = claim("a", Some("shard=a"), 1);
        let b = claim("b", Some("shard=b"), 2);
        assert!(a.disjoint(&b));
        let all = claim("all", None, 3);
        assert!(!a.disjoint(&all));
        let team = claim("t", Some("team=x"), 4);
        assert!(!a.disjoint(&team));
        let mut n1 = claim("n1", None, 5);
        n1.scope.namespaces = vec!["x".into()];
        let mut n2 = claim("n2", None, 6);
        n2.scope.namespaces = vec!["y".into()];
        assert!(n1.disjoint(&n2));
    }

    #[test]
    fn a_claim_reads_back_as_written_and_goes_stale() {
        let scope = Scope {
            selector: Some("shard=a".into()),
            namespaces: vec!["x".into(), "y".into()],
            namespace_selector: None,
        };
        let at = Timestamp::from_second(1_000).unwrap();
        let cm = ConfigMap {
            data: Some(data("a", &scope, at)),
            ..Default::default()
        };
        let c = read(&cm).unwrap();
        assert_eq!((c.instance.as_str(), &c.scope), ("a", &scope));
        assert_eq!(c.renewed, Some(at));
        let later = |s: i64| Timestamp::from_second(1_000 + s).unwrap();
        assert!(live(c.renewed, later(60)));
        assert!(!live(c.renewed, later(120)));
        assert!(live(c.renewed, Timestamp::from_second(900).unwrap()));
        assert!(!live(None, later(0)));
        assert_eq!(read(&ConfigMap::default()), None);
    }
}
