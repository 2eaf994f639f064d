//! Graceful shutdown: SIGTERM (what the kubelet sends) or Ctrl-C cancels one shared token.
//!
//! Every long-running part (HTTP server, leader elector, supervisor) takes a clone of the
//! token and winds down when it fires, so the process exits within the pod's grace period
//! and the leader releases its Lease instead of making the standby wait for it to expire.

use tokio_util::sync::CancellationToken;

/// Returns a token cancelled on the first SIGTERM or Ctrl-C.
///
/// Must be called inside a tokio runtime. The SIGTERM handler is installed before this
/// returns, so a signal that arrives right after is not lost. A second signal is not handled
/// specially: a stuck shutdown is ended by the kubelet's SIGKILL.
pub fn on_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let trigger = token.clone();
    let term = sigterm();
    tokio::spawn(async move {
        let name = tokio::select! {
            () = recv(term) => "SIGTERM",
            () = ctrl_c() => "SIGINT",
        };
        tracing::info!(signal = name, "shutting down");
        trigger.cancel();
    });
    token
}

#[cfg(unix)]
type Term = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
type Term = ();

#[cfg(unix)]
fn sigterm() -> Term {
    use tokio::signal::unix::{SignalKind, signal};
    signal(SignalKind::terminate())
        .inspect_err(|error| {
            tracing::warn!(%error, "cannot listen for SIGTERM; only Ctrl-C stops the operator");
        })
        .ok()
}

#[cfg(not(unix))]
fn sigterm() -> Term {}

/// Resolves on the signal, or never when it cannot be received.
#[cfg(unix)]
async fn recv(term: Term) {
    match term {
        Some(mut term) => {
            if term.recv().await.is_none() {
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending().await,
    }
}

#[cfg(not(unix))]
async fn recv(_: Term) {
    std::future::pending().await
}

/// Resolves on Ctrl-C, or never when it cannot be received (rather than shut down at once).
async fn ctrl_c() {
    if let Err(error) = tokio::signal::ctrl_c().await {
        tracing::error!(%error, "cannot listen for Ctrl-C");
        std::future::pending::<()>().await;
    }
}
