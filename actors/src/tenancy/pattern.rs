//! The patterns of a server owner's policy (`spec.allowedTeams.policies[].allowed`): a literal,
//! or `*` standing for any run of characters, nothing else. No regular expressions: a policy
//! is read by people deciding what a tenant may do, and a glob says it plainly (and cannot be
//! made to backtrack for long).

/// Whether `value` matches `pattern` (`*` is any run of characters, possibly none).
pub fn matches(pattern: &str, value: &str) -> bool {
    let mut parts = pattern.split('*');
    // No `*`: a literal.
    let Some(first) = parts.next() else {
        return value.is_empty();
    };
    let Some(mut rest) = value.strip_prefix(first) else {
        return false;
    };
    let mut parts: Vec<&str> = parts.collect();
    let Some(last) = parts.pop() else {
        return rest.is_empty();
    };
    for middle in parts {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// Whether `value` matches any of `patterns`.
pub fn any(patterns: &[String], value: &str) -> bool {
    patterns.iter().any(|p| matches(p, value))
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn literals_and_stars() {
        let cases = [
            ("alice", "alice", true),
            ("alice", "alicex", false),
            ("alice", "", false),
            ("", "", true),
            ("*", "", true),
            ("*", "anything", true),
            ("pay-*", "pay-alice", true),
            ("pay-*", "pay-", true),
            ("pay-*", "xpay-alice", false),
            ("*-oncall", "payments-oncall", true),
            ("*-oncall", "payments-oncall-x", false),
            ("a*b*c", "abc", true),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "aXcYb", false),
            // The suffix must not reuse what the prefix took.
            ("ab*ba", "aba", false),
            ("ab*ba", "abba", true),
            ("**", "x", true),
        ];
        for (pattern, value, want) in cases {
            assert_eq!(matches(pattern, value), want, "{pattern:?} ~ {value:?}");
        }
    }

    proptest::proptest! {
        // The seed is `just test`'s PROPTEST_RNG_SEED (docs/adr/0006-property-test-seeds.md).
        #![proptest_config(proptest::prelude::ProptestConfig {
            failure_persistence: None,
            ..Default::default()
        })]
        /// A pattern made from the value by replacing a slice with `*` always matches it; a
        /// literal matches only itself.
        #[test]
        fn a_value_matches_its_own_starred_slices(value in "[a-z-]{0,12}", a in 0usize..13, b in 0usize..13) {
            let (lo, hi) = (a.min(b).min(value.len()), a.max(b).min(value.len()));
            let pattern = format!("{}*{}", &value[..lo], &value[hi..]);
            proptest::prop_assert!(matches(&pattern, &value));
            proptest::prop_assert!(matches(&value, &value));
            let longer = format!("{value}x");
            proptest::prop_assert!(!matches(&value, &longer));
        }
    }
}
