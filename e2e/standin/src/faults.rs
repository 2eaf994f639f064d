//! Fault injection (test-only admin surface): decides per call whether to delay it, answer it
//! with an error status, or close its connection without an answer, so tests can show how the
//! operator's client classifies each (terdut-api.md: faults per endpoint).

use std::time::Duration;

use axum::http::StatusCode;
use rand::Rng;

use crate::admin::types::{Fault, FaultRule};
use crate::error::ContractError;

/// What to do with one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Pass,
    Fail(StatusCode),
    /// Close the connection without writing a response.
    Reset,
    /// Answer 200 with a body of this many bytes and no declared length, kept open for
    /// `stall` after the last byte.
    Oversize {
        bytes: u64,
        stall: Duration,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub delay: Duration,
    pub action: Action,
}

/// The active rules, in the order they were added.
#[derive(Debug, Default)]
pub struct Faults {
    next_id: u64,
    rules: Vec<Fault>,
}

impl Faults {
    pub fn add(&mut self, rule: FaultRule) -> Result<u64, ContractError> {
        check(&rule)?;
        self.next_id += 1;
        self.rules.push(Fault {
            id: self.next_id,
            rule,
            fired: 0,
        });
        Ok(self.next_id)
    }

    pub fn remove(&mut self, id: u64) -> bool {
        let before = self.rules.len();
        self.rules.retain(|f| f.id != id);
        self.rules.len() != before
    }

    pub fn clear(&mut self) {
        self.rules.clear();
    }

    pub fn list(&self) -> Vec<Fault> {
        self.rules.clone()
    }

    /// Decides for a call labelled `endpoint` (`"METHOD /template"`), consuming `*_next`
    /// budgets of the rule that fires.
    pub fn decide(&mut self, endpoint: &str) -> Decision {
        let mut rng = rand::rng();
        let mut delay = Duration::ZERO;
        let mut action = Action::Pass;
        for fault in self
            .rules
            .iter_mut()
            .filter(|f| matches(&f.rule.endpoint, endpoint))
        {
            let rule = &mut fault.rule;
            let jitter = if rule.jitter_ms > 0 {
                rng.random_range(0..=rule.jitter_ms)
            } else {
                0
            };
            delay += Duration::from_millis(rule.latency_ms + jitter);
            if action != Action::Pass {
                continue;
            }
            let status = status_of(rule);
            if rule.reset_next > 0 {
                rule.reset_next -= 1;
                action = Action::Reset;
            } else if rule.fail_next > 0 {
                rule.fail_next -= 1;
                action = Action::Fail(status);
            } else if rule.reset_rate > 0.0 && rng.random_bool(rule.reset_rate) {
                action = Action::Reset;
            } else if rule.error_rate > 0.0 && rng.random_bool(rule.error_rate) {
                action = Action::Fail(status);
            } else if rule.oversize_bytes > 0 {
                action = Action::Oversize {
                    bytes: rule.oversize_bytes,
                    stall: Duration::from_millis(rule.oversize_stall_ms),
                };
            }
            if action != Action::Pass {
                fault.fired += 1;
            }
        }
        Decision { delay, action }
    }
}

fn status_of(rule: &FaultRule) -> StatusCode {
    rule.status
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

fn check(rule: &FaultRule) -> Result<(), ContractError> {
    let invalid = |m: &str| Err(ContractError::Invalid(m.to_owned()));
    if rule.endpoint.is_empty() {
        return invalid("endpoint must not be empty");
    }
    if !(0.0..=1.0).contains(&rule.error_rate) || !(0.0..=1.0).contains(&rule.reset_rate) {
        return invalid("rates are probabilities between 0 and 1");
    }
    if let Some(s) = rule.status
        && !(100..=599).contains(&s)
    {
        return invalid("status must be an HTTP status code");
    }
    Ok(())
}

/// Whether a pattern (see [`FaultRule`]) matches a call label.
pub fn matches(pattern: &str, endpoint: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    let (p_method, p_path) = pattern.split_once(' ').unwrap_or(("*", pattern));
    let (method, path) = endpoint.split_once(' ').unwrap_or(("", endpoint));
    let method_ok = p_method == "*" || p_method.eq_ignore_ascii_case(method);
    let path_ok = match p_path.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => p_path == path,
    };
    method_ok && path_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert!(matches("*", "GET /healthz"));
        assert!(matches("POST /api/v1/teams", "POST /api/v1/teams"));
        assert!(!matches("POST /api/v1/teams", "GET /api/v1/teams/{id}"));
        assert!(matches("* /api/v1/teams*", "DELETE /api/v1/teams/{id}"));
        assert!(matches("/api/v1/whoami", "GET /api/v1/whoami"));
        assert!(!matches("GET /api/*", "GET /healthz"));
    }

    #[test]
    fn each_rule_counts_the_calls_it_decided() {
        let mut f = Faults::default();
        f.add(FaultRule::new("*").latency_ms(1)).unwrap();
        f.add(FaultRule::new("GET /x").fail_next(2, 503)).unwrap();
        f.add(FaultRule::new("GET /x").reset_rate(1.0)).unwrap();
        for _ in 0..5 {
            f.decide("GET /x");
        }
        f.decide("GET /y");
        let fired: Vec<u64> = f.list().iter().map(|r| r.fired).collect();
        // Delays never count; the first rule that fires decides, the later ones do not count.
        assert_eq!(fired, [0, 2, 3]);
    }

    #[test]
    fn fail_next_then_pass() {
        let mut f = Faults::default();
        f.add(FaultRule::new("GET /x").fail_next(2, 503)).unwrap();
        let fail = Action::Fail(StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(f.decide("GET /x").action, fail);
        assert_eq!(f.decide("GET /y").action, Action::Pass);
        assert_eq!(f.decide("GET /x").action, fail);
        assert_eq!(f.decide("GET /x").action, Action::Pass);
    }

    #[test]
    fn latencies_add_up_and_rates_apply() {
        let mut f = Faults::default();
        f.add(FaultRule::new("*").latency_ms(10)).unwrap();
        let id = f
            .add(FaultRule::new("GET /x").latency_ms(5).reset_rate(1.0))
            .unwrap();
        let d = f.decide("GET /x");
        assert_eq!(d.delay, Duration::from_millis(15));
        assert_eq!(d.action, Action::Reset);
        assert!(f.remove(id));
        assert_eq!(f.decide("GET /x").action, Action::Pass);
        assert!(f.add(FaultRule::new("*").error_rate(1.5, 500)).is_err());
    }

    #[test]
    fn oversize_answers_every_matching_call() {
        let mut f = Faults::default();
        f.add(FaultRule::new("GET /x").oversize_bytes(1 << 20))
            .unwrap();
        for _ in 0..3 {
            assert_eq!(
                f.decide("GET /x").action,
                Action::Oversize {
                    bytes: 1 << 20,
                    stall: Duration::ZERO
                }
            );
        }
        assert_eq!(f.decide("GET /y").action, Action::Pass);
        assert_eq!(f.list()[0].fired, 3);
    }
}
