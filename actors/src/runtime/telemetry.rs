//! Process-wide logging: JSON lines in clusters (one object per event, for log shippers),
//! human-readable text on a terminal. `RUST_LOG` wins over the given default filter so an
//! operator can be made verbose without a new release.

use std::str::FromStr;

use tracing_subscriber::EnvFilter;

/// How log lines are written to stdout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// One JSON object per line, event fields flattened to the top level.
    Json,
    /// Human-readable text.
    Text,
}

impl FromStr for LogFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "json" => Ok(Self::Json),
            "text" => Ok(Self::Text),
            other => Err(format!("unknown log format {other:?}: use json or text")),
        }
    }
}

/// Installs the global subscriber. Returns `false` (and changes nothing) when one is already
/// installed, so tests may call it repeatedly. An unparsable filter falls back to `info`
/// with a warning rather than failing start-up over a log setting.
pub fn init(format: LogFormat, filter: &str) -> bool {
    let (env_filter, rejected) = match std::env::var("RUST_LOG") {
        Ok(env) if !env.trim().is_empty() => parse(&env),
        _ => parse(filter),
    };
    let builder = tracing_subscriber::fmt().with_env_filter(env_filter);
    let installed = match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init()
            .is_ok(),
        LogFormat::Text => builder.try_init().is_ok(),
    };
    if installed && let Some((filter, error)) = rejected {
        tracing::warn!(filter, %error, "invalid log filter, using \"info\"");
    }
    installed
}

fn parse(filter: &str) -> (EnvFilter, Option<(String, String)>) {
    match EnvFilter::try_new(filter) {
        Ok(f) => (f, None),
        Err(e) => (
            EnvFilter::new("info"),
            Some((filter.to_owned(), e.to_string())),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::{LogFormat, init};

    #[test]
    fn init_is_idempotent_and_formats_parse() {
        // "warn": the subscriber is process-wide and writes past the test harness capture.
        let first = init(LogFormat::Json, "warn");
        // Whoever installed first, a second call must not panic and must not install again.
        assert!(!init(LogFormat::Text, "not a [valid filter"));
        let _ = first;
        assert_eq!("JSON".parse::<LogFormat>(), Ok(LogFormat::Json));
        assert_eq!("text".parse::<LogFormat>(), Ok(LogFormat::Text));
        assert!("yaml".parse::<LogFormat>().is_err());
    }
}
