//! A process-wide log capture for the secrecy tests (source_secrecy, secret_hygiene): every
//! line any target logs under the given filter, kept in memory to be searched for secrets.
//! Process-wide, so each test binary that uses it installs it once, before its operator starts.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

/// Everything the process logged.
#[derive(Clone, Default)]
pub struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Capture {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

static LOGS: OnceLock<Capture> = OnceLock::new();

/// Installs the capturing subscriber once (the first call's `filter`, an `EnvFilter`
/// directive, wins). `try_init` also bridges the `log` crate (reqwest, rustls) into it.
pub fn capture_logs(filter: &str) -> Capture {
    use tracing_subscriber::util::SubscriberInitExt;
    LOGS.get_or_init(|| {
        let capture = Capture::default();
        let writer = capture.clone();
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish()
            .try_init()
            .expect("no subscriber yet");
        capture
    })
    .clone()
}
