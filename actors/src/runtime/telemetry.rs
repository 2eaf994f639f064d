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
        _ => parse(&with_quiet_kube_requests(filter)),
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

/// kube-client's HTTP trace layer logs every failed request at ERROR (`failed with error
/// client error (Connect)`), so a kube-apiserver restart printed ~300 ERROR lines that say
/// nothing the operator's own lines do not: watches log one warning per error streak, passes
/// one per failure streak, the elector each lost renewal (docs/reliability.md). The default
/// filter therefore turns that layer off, unless the filter names kube_client itself;
/// `RUST_LOG` is taken as given.
const KUBE_REQUEST_TRACE: &str = "kube_client::client::builder";

fn with_quiet_kube_requests(filter: &str) -> String {
    if filter.contains("kube_client") {
        filter.to_owned()
    } else if filter.trim().is_empty() {
        format!("info,{KUBE_REQUEST_TRACE}=off")
    } else {
        format!("{filter},{KUBE_REQUEST_TRACE}=off")
    }
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
    use super::{KUBE_REQUEST_TRACE, LogFormat, init, parse, with_quiet_kube_requests};
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    /// What a subscriber with `filter` writes for one kube-client request failure and one
    /// operator warning.
    fn written_with(filter: &str) -> String {
        #[derive(Clone, Default)]
        struct Buf(Arc<Mutex<Vec<u8>>>);
        impl Write for Buf {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf::default();
        let sink = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(parse(filter).0)
            .with_writer(move || sink.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::error!(target: "kube_client::client::builder", "failed with error connect");
            tracing::warn!(target: "terdut_actors::informers", "watch error (retrying with backoff)");
        });
        String::from_utf8(buf.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn the_default_filter_drops_kube_clients_per_request_errors_only() {
        let out = written_with(&with_quiet_kube_requests("info"));
        assert!(!out.contains("failed with error"), "{out}");
        assert!(out.contains("watch error"), "{out}");
        // At debug too, and an empty filter means info.
        let debug = with_quiet_kube_requests("debug");
        assert!(!written_with(&debug).contains("failed with error"));
        assert_eq!(
            with_quiet_kube_requests(" "),
            format!("info,{KUBE_REQUEST_TRACE}=off")
        );
    }

    #[test]
    fn a_filter_that_names_kube_client_is_taken_as_given() {
        let asked = "info,kube_client=error";
        assert_eq!(with_quiet_kube_requests(asked), asked);
        assert!(written_with(asked).contains("failed with error"));
    }

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
