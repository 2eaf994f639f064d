//! `terdut-standin`: the stand-in terdut-server as a process, for the demo and the e2e
//! scenario on kind (its container image replaces the real server's). See `Config::from_args`
//! for flags and environment.

use std::process::ExitCode;

use terdut_standin::{Config, ConfigError, spawn};
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .init();
    let config = match Config::from_args(std::env::args().skip(1), |k| std::env::var(k).ok()) {
        Ok(c) => c,
        Err(ConfigError::Usage(text)) => {
            eprintln!("{text}");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("terdut-standin: {e}");
            return ExitCode::from(2);
        }
    };
    if config.admin {
        tracing::warn!("the test-only admin surface is enabled under /admin/");
    }
    let handle = match spawn(config).await {
        Ok(h) => h,
        Err(e) => {
            eprintln!("terdut-standin: {e}");
            return ExitCode::FAILURE;
        }
    };
    wait_for_signal().await;
    tracing::info!("shutting down");
    handle.shutdown().await;
    ExitCode::SUCCESS
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
