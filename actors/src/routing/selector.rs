//! Label selectors as `--selector` and `--watch-namespace-selector` are written, read locally
//! (PURE): whether an object an instance does not watch would be selected by it or by another
//! instance (`scope.rs`, `claims.rs`). The API server judges the same strings for the watches;
//! this follows its grammar (`k8s.io/apimachinery/pkg/labels`): comma-separated requirements
//! `key`, `!key`, `key=value`, `key==value`, `key!=value`, `key in (a,b)`, `key notin (a,b)`,
//! `key>n`, `key<n`.

use std::collections::{BTreeMap, BTreeSet};

/// One requirement of a selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    Exists(String),
    DoesNotExist(String),
    /// `=`, `==` and `in`: present with one of these values.
    In(String, BTreeSet<String>),
    /// `!=` and `notin`: absent, or present with none of these values.
    NotIn(String, BTreeSet<String>),
    Gt(String, i64),
    Lt(String, i64),
}

impl Requirement {
    fn key(&self) -> &str {
        match self {
            Self::Exists(k)
            | Self::DoesNotExist(k)
            | Self::In(k, _)
            | Self::NotIn(k, _)
            | Self::Gt(k, _)
            | Self::Lt(k, _) => k,
        }
    }

    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(self.key());
        match self {
            Self::Exists(_) => value.is_some(),
            Self::DoesNotExist(_) => value.is_none(),
            Self::In(_, set) => value.is_some_and(|v| set.contains(v)),
            Self::NotIn(_, set) => value.is_none_or(|v| !set.contains(v)),
            Self::Gt(_, n) => value
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            Self::Lt(_, n) => value
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        }
    }

    /// Whether it needs the key present.
    fn needs_key(&self) -> bool {
        !matches!(self, Self::DoesNotExist(_) | Self::NotIn(..))
    }

    /// PURE: whether no label set can meet both `self` and `other` (sound, not complete:
    /// `false` may still be impossible).
    fn excludes(&self, other: &Self) -> bool {
        if self.key() != other.key() {
            return false;
        }
        match (self, other) {
            (Self::DoesNotExist(_), o) | (o, Self::DoesNotExist(_)) => o.needs_key(),
            (Self::In(_, a), Self::In(_, b)) => a.is_disjoint(b),
            (Self::In(_, a), Self::NotIn(_, b)) | (Self::NotIn(_, b), Self::In(_, a)) => {
                a.is_subset(b)
            }
            _ => false,
        }
    }
}

/// A parsed selector: every requirement must hold; none selects everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector(pub Vec<Requirement>);

/// The text is not a selector this module reads.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a label selector: {0}")]
pub struct ParseError(pub String);

impl Selector {
    /// Parses `text` (see the module doc). An empty text selects everything.
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let mut out = vec![];
        for part in split_top(text) {
            let part = part.trim();
            if part.is_empty() {
                if text.trim().is_empty() {
                    continue;
                }
                return Err(ParseError(text.to_owned()));
            }
            out.push(requirement(part).ok_or_else(|| ParseError(part.to_owned()))?);
        }
        Ok(Self(out))
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| r.matches(labels))
    }

    /// PURE: whether no label set can be selected by both (sound, not complete: `false` means
    /// "may overlap"). A tenant writes the labels of their objects, so selectors that may
    /// overlap do overlap as soon as someone labels an object for both.
    pub fn disjoint(&self, other: &Self) -> bool {
        self.0.iter().any(|a| other.0.iter().any(|b| a.excludes(b)))
    }
}

/// Splits at the commas outside parentheses.
fn split_top(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (vec![], 0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn requirement(part: &str) -> Option<Requirement> {
    if let Some(key) = part.strip_prefix('!') {
        return valid(key.trim()).map(|k| Requirement::DoesNotExist(k.to_owned()));
    }
    for (op, set) in [("!=", false), ("==", true), ("=", true)] {
        if let Some((k, v)) = part.split_once(op) {
            let (k, v) = (valid(k.trim())?, v.trim());
            let values = BTreeSet::from([v.to_owned()]);
            return Some(if set {
                Requirement::In(k.to_owned(), values)
            } else {
                Requirement::NotIn(k.to_owned(), values)
            });
        }
    }
    for (op, gt) in [(">", true), ("<", false)] {
        if let Some((k, v)) = part.split_once(op) {
            let (k, n) = (valid(k.trim())?, v.trim().parse().ok()?);
            return Some(if gt {
                Requirement::Gt(k.to_owned(), n)
            } else {
                Requirement::Lt(k.to_owned(), n)
            });
        }
    }
    let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
    if let [key, rest] = words[..] {
        let rest = rest.trim();
        let (negated, list) = if let Some(l) = rest.strip_prefix("notin") {
            (true, l)
        } else if let Some(l) = rest.strip_prefix("in") {
            (false, l)
        } else {
            return None;
        };
        let inner = list.trim().strip_prefix('(')?.strip_suffix(')')?;
        let values: BTreeSet<String> = inner.split(',').map(|v| v.trim().to_owned()).collect();
        let key = valid(key)?.to_owned();
        return Some(if negated {
            Requirement::NotIn(key, values)
        } else {
            Requirement::In(key, values)
        });
    }
    valid(part).map(|k| Requirement::Exists(k.to_owned()))
}

/// A label key as far as this reading needs: non-empty, no spaces or operators.
fn valid(key: &str) -> Option<&str> {
    let ok = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/'));
    ok.then_some(key)
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

    fn sel(s: &str) -> Selector {
        Selector::parse(s).unwrap()
    }

    #[test]
    fn reads_every_operator_as_the_api_server_does() {
        let l = labels(&[("shard", "a"), ("tier", "gold"), ("n", "5")]);
        for (s, want) in [
            ("", true),
            ("shard=a", true),
            ("shard==a", true),
            ("shard=b", false),
            ("shard!=b", true),
            ("shard!=a", false),
            ("missing!=a", true),
            ("shard in (a, b)", true),
            ("shard in (b,c)", false),
            ("shard notin (b,c)", true),
            ("missing notin (b)", true),
            ("shard", true),
            ("missing", false),
            ("!missing", true),
            ("!shard", false),
            ("n>4", true),
            ("n>5", false),
            ("n<6", true),
            ("tier>1", false),
            ("shard=a,tier=gold", true),
            ("shard=a, tier in (silver)", false),
            ("terdut.ryuvia.com/shard=a", false),
        ] {
            assert_eq!(sel(s).matches(&l), want, "{s:?}");
        }
        for bad in ["shard in a", "=a", "shard=a,,tier", "sh ard=a", "n>x"] {
            assert!(Selector::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn disjoint_only_when_no_labels_could_meet_both() {
        for (a, b) in [
            ("shard=a", "shard=b"),
            ("shard in (a,b)", "shard in (c)"),
            ("shard=a", "!shard"),
            ("shard", "!shard"),
            ("shard in (a)", "shard notin (a,b)"),
            ("x=1,shard=a", "shard=b,y=2"),
        ] {
            assert!(sel(a).disjoint(&sel(b)), "{a:?} {b:?}");
            assert!(sel(b).disjoint(&sel(a)), "{b:?} {a:?}");
        }
        for (a, b) in [
            ("", "shard=a"),
            ("shard=a", "team=x"),
            ("shard in (a,b)", "shard in (b,c)"),
            ("shard!=a", "shard!=b"),
            ("shard=a", "shard notin (b)"),
            ("!shard", "shard!=a"),
        ] {
            assert!(!sel(a).disjoint(&sel(b)), "{a:?} {b:?}");
        }
    }
}
