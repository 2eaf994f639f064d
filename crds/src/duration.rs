//! Go-syntax durations (`5m`, `6h`, `1h30m`, `1.5h`), as every duration field in the CRDs is
//! written, and their conversion to the whole seconds of the terdut-server wire format
//! (terdut-api.md "Durations on the wire are whole seconds"). This is the one place that parses
//! them: the CRD schema (CEL) admits the same language, and the operator re-checks it here
//! (docs/design.md §4.2 "Durations are validated by a CRD pattern and re-checked").

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// The longest duration string the schema admits; keeps CEL cost estimates small.
pub const MAX_DURATION_LEN: usize = 32;

/// The regular expression the CRD schema checks with CEL. Kept equivalent to [`GoDuration::nanos`]
/// (a property test checks that they agree on every string).
/// `[.]` rather than a backslash escape, which CEL string literals would refuse.
pub const DURATION_REGEX: &str = "^(0|([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+)$";

/// A duration in Go's `time.ParseDuration` syntax, kept as the user wrote it so a round trip
/// through the API server never rewrites their spec.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct GoDuration(pub String);

/// Why a duration string was refused. The message names the offending text so a user knows
/// what to fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("duration is empty; write it like 5m, 6h or 1h30m")]
    Empty,
    #[error("duration {0:?} is not a Go duration; write it like 5m, 6h or 1h30m")]
    Syntax(String),
    #[error("duration {0:?} is too large")]
    Overflow(String),
}

impl GoDuration {
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Parses the duration to nanoseconds, exactly as Go's `time.ParseDuration` would for the
    /// non-negative values the CRDs allow (no sign: a negative timeout means nothing here).
    pub fn nanos(&self) -> Result<u128, DurationError> {
        parse_nanos(&self.0)
    }

    /// Whole seconds for the wire, rounding a fractional remainder up: a `1500ms` timeout must
    /// not turn into a shorter one than the user asked for.
    pub fn to_seconds(&self) -> Result<u64, DurationError> {
        let n = self.nanos()?;
        let secs = n.div_ceil(1_000_000_000);
        u64::try_from(secs).map_err(|_| DurationError::Overflow(self.0.clone()))
    }
}

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for GoDuration {
    fn from(s: &str) -> Self {
        Self(s.to_owned())
    }
}

/// Renders whole seconds back into the shortest Go duration (`90` -> `1m30s`), used where the
/// operator reports a server value in a message.
pub fn seconds_to_go(secs: u64) -> String {
    if secs == 0 {
        return "0s".into();
    }
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 {
        out.push_str(&format!("{s}s"));
    }
    out
}

fn unit_nanos(unit: &str) -> Option<u128> {
    Some(match unit {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60 * 1_000_000_000,
        "h" => 3600 * 1_000_000_000,
        _ => return None,
    })
}

fn parse_nanos(s: &str) -> Result<u128, DurationError> {
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    if s == "0" {
        return Ok(0);
    }
    let syntax = || DurationError::Syntax(s.to_owned());
    let overflow = || DurationError::Overflow(s.to_owned());
    let mut rest = s;
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        if int_len == 0 {
            return Err(syntax());
        }
        let (int_part, after_int) = rest.split_at(int_len);
        let (frac_part, after_num) = match after_int.strip_prefix('.') {
            Some(f) => {
                let n = f.bytes().take_while(u8::is_ascii_digit).count();
                if n == 0 {
                    return Err(syntax());
                }
                f.split_at(n)
            }
            None => ("", after_int),
        };
        let unit_len = after_num
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit() || *c == '.')
            .map_or(after_num.len(), |(i, _)| i);
        let (unit, tail) = after_num.split_at(unit_len);
        let scale = unit_nanos(unit).ok_or_else(syntax)?;
        let whole: u128 = int_part.parse().map_err(|_| overflow())?;
        let mut value = whole.checked_mul(scale).ok_or_else(overflow)?;
        // Fraction digits beyond nanosecond precision cannot change the result.
        let mut place = scale;
        for d in frac_part.bytes() {
            place /= 10;
            if place == 0 {
                break;
            }
            value += u128::from(d - b'0') * place;
        }
        total = total.checked_add(value).ok_or_else(overflow)?;
        rest = tail;
    }
    // Go refuses durations past ~292 years (int64 nanoseconds); so do we.
    if total > i64::MAX as u128 {
        return Err(overflow());
    }
    Ok(total)
}

impl JsonSchema for GoDuration {
    fn schema_name() -> Cow<'static, str> {
        "GoDuration".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "maxLength": MAX_DURATION_LEN,
            "x-kubernetes-validations": [{
                "rule": format!("self.matches('{DURATION_REGEX}')"),
                "message": "must be a Go duration such as 30s, 5m, 6h or 1h30m",
            }],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: &str) -> u64 {
        GoDuration::from(s).to_seconds().unwrap()
    }

    #[test]
    fn converts_the_forms_the_design_uses() {
        assert_eq!(secs("5m"), 300);
        assert_eq!(secs("15m"), 900);
        assert_eq!(secs("6h"), 21_600);
        assert_eq!(secs("168h"), 604_800);
        assert_eq!(secs("1h30m"), 5_400);
        assert_eq!(secs("1.5h"), 5_400);
        assert_eq!(secs("0"), 0);
        assert_eq!(secs("90s"), 90);
    }

    #[test]
    fn rounds_sub_second_remainders_up() {
        assert_eq!(secs("1500ms"), 2);
        assert_eq!(secs("1ns"), 1);
        assert_eq!(secs("1000ms"), 1);
    }

    #[test]
    fn refuses_what_go_refuses() {
        for bad in [
            "", "5", "m", "5x", "-5m", "5m-", "1.h", ".5h", "5 m", "1d", "h1",
        ] {
            assert!(
                GoDuration::from(bad).nanos().is_err(),
                "{bad:?} should be refused"
            );
        }
    }

    #[test]
    fn refuses_overflow_instead_of_wrapping() {
        assert!(matches!(
            GoDuration::from("99999999999999999999h").nanos(),
            Err(DurationError::Overflow(_))
        ));
        assert!(matches!(
            GoDuration::from("3000000h").nanos(),
            Err(DurationError::Overflow(_))
        ));
    }

    #[test]
    fn renders_seconds_back() {
        assert_eq!(seconds_to_go(0), "0s");
        assert_eq!(seconds_to_go(90), "1m30s");
        assert_eq!(seconds_to_go(5400), "1h30m");
        assert_eq!(seconds_to_go(3601), "1h1s");
    }
}

/// Property tests: the CEL pattern and the parser admit the same language, and the conversion
/// to wire seconds behaves like arithmetic on durations (additive, monotonic, never shorter).
#[cfg(test)]
mod proptests {
    use proptest::prelude::*;
    use regex::Regex;

    use super::*;

    const UNITS: [&str; 8] = ["ns", "us", "µs", "ms", "s", "m", "h", "h"];

    /// One `<number>[.<fraction>]<unit>` group.
    fn group() -> impl Strategy<Value = String> {
        (
            0u64..100_000,
            proptest::option::of("[0-9]{1,4}"),
            0..UNITS.len(),
        )
            .prop_map(|(n, frac, unit)| match frac {
                Some(f) => format!("{n}.{f}{}", UNITS[unit]),
                None => format!("{n}{}", UNITS[unit]),
            })
    }

    /// A duration the CRD pattern admits.
    fn valid() -> impl Strategy<Value = String> {
        prop_oneof![
            1 => Just("0".to_owned()),
            9 => proptest::collection::vec(group(), 1..4).prop_map(|g| g.concat()),
        ]
    }

    /// Anything near the language: valid strings, valid strings with one character changed,
    /// inserted or removed, and short strings over the language's alphabet plus noise.
    fn candidate() -> impl Strategy<Value = String> {
        let mutated = (
            valid(),
            any::<prop::sample::Index>(),
            0..3usize,
            "[0-9.a-zµ +-]",
        )
            .prop_map(|(s, at, how, c)| {
                let mut chars: Vec<char> = s.chars().collect();
                let i = at.index(chars.len() + 1);
                let c = c.chars().next().unwrap_or('x');
                match how {
                    0 if i < chars.len() => chars[i] = c,
                    1 if i < chars.len() => {
                        chars.remove(i);
                    }
                    _ => chars.insert(i, c),
                }
                chars.into_iter().collect()
            });
        prop_oneof![valid(), mutated, "[0-9.nsuµmhd -]{0,10}"]
    }

    fn pattern() -> Regex {
        Regex::new(DURATION_REGEX).expect("DURATION_REGEX compiles")
    }

    /// `n` cases, times `TERDUT_FUZZ_SCALE` when set (`just fuzz` runs them longer, with random
    /// seeds; `just test` pins `PROPTEST_RNG_SEED` so CI is reproducible: docs/adr/0006).
    fn fuzz_cases(n: u32) -> u32 {
        std::env::var("TERDUT_FUZZ_SCALE")
            .ok()
            .and_then(|s| s.parse::<u32>().ok())
            .map_or(n, |k| n.saturating_mul(k.max(1)))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: fuzz_cases(512), failure_persistence: None, ..ProptestConfig::default() })]

        /// The schema's pattern and the parser agree on every string, except that the parser
        /// also refuses values too large for Go (the pattern cannot count).
        #[test]
        fn pattern_and_parser_accept_the_same_strings(s in candidate()) {
            let by_pattern = pattern().is_match(&s);
            let by_parser = match GoDuration::from(s.as_str()).nanos() {
                Ok(_) | Err(DurationError::Overflow(_)) => true,
                Err(DurationError::Empty | DurationError::Syntax(_)) => false,
            };
            prop_assert_eq!(by_pattern, by_parser, "{:?}", s);
        }

        /// Writing two durations one after the other adds them (Go's `1h30m` is `1h` + `30m`),
        /// and rounding up to seconds never loses time nor adds a whole second per part.
        #[test]
        fn seconds_are_additive(a in valid().prop_filter("not bare 0", |s| s != "0"),
                                b in valid().prop_filter("not bare 0", |s| s != "0")) {
            let (da, db) = (GoDuration::from(a.as_str()), GoDuration::from(b.as_str()));
            let joined = GoDuration::new(format!("{a}{b}"));
            let (na, nb) = (da.nanos().unwrap(), db.nanos().unwrap());
            prop_assert_eq!(joined.nanos().unwrap(), na + nb);
            let (sa, sb, sj) = (
                da.to_seconds().unwrap(),
                db.to_seconds().unwrap(),
                joined.to_seconds().unwrap(),
            );
            prop_assert!(sj <= sa + sb && sj >= sa.max(sb));
            prop_assert!(u128::from(sj) * 1_000_000_000 >= na + nb, "never shorter");
            prop_assert!(u128::from(sj) * 1_000_000_000 < na + nb + 1_000_000_000);
        }

        /// A longer duration never converts to fewer seconds.
        #[test]
        fn seconds_are_monotonic(a in valid(), b in valid()) {
            let (da, db) = (GoDuration::from(a.as_str()), GoDuration::from(b.as_str()));
            let (na, nb) = (da.nanos().unwrap(), db.nanos().unwrap());
            let (sa, sb) = (da.to_seconds().unwrap(), db.to_seconds().unwrap());
            if na <= nb {
                prop_assert!(sa <= sb, "{a} <= {b} but {sa}s > {sb}s");
            }
        }

        /// `h`/`m`/`s` components convert exactly.
        #[test]
        fn whole_units_convert_exactly(h in 0u64..1000, m in 0u64..1000, s in 0u64..1000) {
            let d = GoDuration::new(format!("{h}h{m}m{s}s"));
            prop_assert_eq!(d.to_seconds().unwrap(), h * 3600 + m * 60 + s);
            prop_assert_eq!(GoDuration::new(seconds_to_go(h * 3600 + m * 60 + s)).to_seconds().unwrap(), h * 3600 + m * 60 + s);
        }
    }
}
