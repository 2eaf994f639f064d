//! What the stand-in refuses as 422 `invalid`. The contract names the code but not the rules,
//! so each limit here is an assumption, chosen to match what the CRDs admit (docs/design.md §4.2,
//! §4.5): a body a valid CR produces must pass, a body no CR can produce may fail.

use crate::error::ContractError;
use crate::wire::{Ladder, NewIntegration, NewTeam, Oidc, SwitchBody, Target};

/// The severities of a dead man's switch (the CRD's enum).
pub const SEVERITIES: [&str; 3] = ["critical", "warning", "info"];

fn invalid(msg: impl Into<String>) -> ContractError {
    ContractError::Invalid(msg.into())
}

fn text(field: &str, value: &str, max: usize) -> Result<(), ContractError> {
    if value.trim().is_empty() {
        return Err(invalid(format!("{field} must not be empty")));
    }
    if value.chars().count() > max {
        return Err(invalid(format!("{field} is longer than {max} characters")));
    }
    Ok(())
}

pub fn team_name(name: &str) -> Result<(), ContractError> {
    text("name", name, 128)
}

pub fn new_team(body: &NewTeam) -> Result<(), ContractError> {
    team_name(&body.name)?;
    text("external_id", &body.external_id, 512)
}

pub fn oidc(body: &Oidc) -> Result<(), ContractError> {
    for (field, value) in [
        ("member_group", &body.member_group),
        ("owner_group", &body.owner_group),
    ] {
        if let Some(v) = value {
            text(field, v, 256)?;
        }
    }
    Ok(())
}

/// Structure only; usernames are resolved afterwards (422 `unknown_user`).
pub fn ladder(body: &Ladder) -> Result<(), ContractError> {
    if body.repeat_count > 100 {
        return Err(invalid("repeat_count must be at most 100"));
    }
    if let Some(topic) = &body.fallback_topic {
        text("fallback_topic", topic, 256)?;
    }
    if body.levels.is_empty() || body.levels.len() > 20 {
        return Err(invalid("a ladder has 1 to 20 levels"));
    }
    for (i, level) in body.levels.iter().enumerate() {
        if level.timeout_seconds == 0 {
            return Err(invalid(format!(
                "levels[{i}].timeout_seconds must be at least 1"
            )));
        }
        if level.targets.is_empty() || level.targets.len() > 20 {
            return Err(invalid(format!("levels[{i}] has 1 to 20 targets")));
        }
        for target in &level.targets {
            if let Target::User { username } = target {
                text("username", username, 128)?;
            }
        }
    }
    Ok(())
}

pub fn switch(body: &SwitchBody) -> Result<(), ContractError> {
    text("name", &body.name, 63)?;
    text("matcher", &body.matcher, 1024)?;
    if body.timeout_seconds == 0 {
        return Err(invalid("timeout_seconds must be at least 1"));
    }
    if !SEVERITIES.contains(&body.severity.as_str()) {
        return Err(invalid("severity must be critical, warning or info"));
    }
    Ok(())
}

pub fn integration_name(name: &str) -> Result<(), ContractError> {
    text("name", name, 128)
}

pub fn new_integration(body: &NewIntegration) -> Result<(), ContractError> {
    integration_name(&body.name)?;
    text("external_id", &body.external_id, 512)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Level;

    #[test]
    fn ladder_rules() {
        let ok = Ladder {
            repeat_count: 2,
            fallback_topic: None,
            levels: vec![Level {
                timeout_seconds: 300,
                targets: vec![Target::Oncall],
            }],
        };
        assert!(ladder(&ok).is_ok());
        let mut empty = ok.clone();
        empty.levels.clear();
        assert!(ladder(&empty).is_err());
        let mut zero = ok;
        zero.levels[0].timeout_seconds = 0;
        assert!(ladder(&zero).is_err());
    }

    #[test]
    fn switch_rules() {
        let mut s = SwitchBody {
            name: "watchdog".into(),
            matcher: "alertname=Watchdog".into(),
            timeout_seconds: 900,
            severity: "critical".into(),
        };
        assert!(switch(&s).is_ok());
        s.severity = "page".into();
        assert!(switch(&s).is_err());
    }
}
