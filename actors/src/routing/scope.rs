//! Whether an object this instance's caches do not show is outside its scope (PURE): "exists,
//! but not mine" (docs/configuration.md "Sharding"). The caches hold only what the instance
//! selects, so an object absent from them may be missing, not listed yet, or another
//! instance's; a live read says it exists, and this says which.

use std::collections::BTreeMap;

use super::selector::Selector;

/// What decides an instance's scope: `--watch-namespaces`, `--watch-namespace-selector`,
/// `--selector`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scope {
    pub namespaces: Vec<String>,
    pub namespace_selector: Option<String>,
    pub selector: Option<String>,
}

impl Scope {
    /// Why a namespace is outside the scope, if it is; `namespace_labels` `None`: unknown.
    pub fn namespace_excluded(
        &self,
        namespace: &str,
        namespace_labels: Option<&BTreeMap<String, String>>,
    ) -> Option<String> {
        if !self.namespaces.is_empty() && !self.namespaces.iter().any(|n| n == namespace) {
            return Some(format!(
                "its namespace {namespace} is not one this operator instance watches \
                 (--watch-namespaces {})",
                self.namespaces.join(",")
            ));
        }
        if let Some(text) = &self.namespace_selector {
            let selected = match (Selector::parse(text), namespace_labels) {
                (Ok(s), Some(labels)) => s.matches(labels),
                // Unreadable: not provably outside (the caller waits).
                _ => true,
            };
            if !selected {
                return Some(format!(
                    "its namespace {namespace} is not selected by this operator instance's \
                     --watch-namespace-selector {text}"
                ));
            }
        }
        None
    }

    /// Why an object of `namespace` with `labels` is outside the scope, if it is.
    pub fn excluded(
        &self,
        namespace: &str,
        namespace_labels: Option<&BTreeMap<String, String>>,
        labels: &BTreeMap<String, String>,
    ) -> Option<String> {
        if let Some(why) = self.namespace_excluded(namespace, namespace_labels) {
            return Some(why);
        }
        let text = self.selector.as_ref()?;
        match Selector::parse(text) {
            Ok(s) if !s.matches(labels) => Some(format!(
                "its labels do not match this operator instance's --selector {text}"
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn an_object_outside_the_selector_or_the_namespaces_is_not_mine() {
        let shard = Scope {
            selector: Some("shard=a".into()),
            ..Scope::default()
        };
        assert_eq!(shard.excluded("ns", None, &labels(&[("shard", "a")])), None);
        let why = shard
            .excluded("ns", None, &labels(&[("shard", "b")]))
            .unwrap();
        assert!(why.contains("--selector shard=a"), "{why}");

        let listed = Scope {
            namespaces: vec!["a".into(), "b".into()],
            ..Scope::default()
        };
        assert_eq!(listed.excluded("a", None, &labels(&[])), None);
        let why = listed.excluded("c", None, &labels(&[])).unwrap();
        assert!(why.contains("namespace c") && why.contains("a,b"), "{why}");

        let picked = Scope {
            namespace_selector: Some("team=x".into()),
            ..Scope::default()
        };
        let ns = labels(&[("team", "x")]);
        assert_eq!(picked.excluded("n", Some(&ns), &labels(&[])), None);
        let other = labels(&[("team", "y")]);
        assert!(picked.excluded("n", Some(&other), &labels(&[])).is_some());
        // Labels not known: not provably outside.
        assert_eq!(picked.excluded("n", None, &labels(&[])), None);
        // Everything in scope without any of them.
        assert_eq!(Scope::default().excluded("n", None, &labels(&[])), None);
    }
}
