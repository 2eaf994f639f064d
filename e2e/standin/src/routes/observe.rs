//! Counts every contract call by its route template and applies the injected faults (admin
//! surface): delay, error status, or a connection closed without an answer.

use axum::Extension;
use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use tokio::sync::Notify;

use crate::error::ContractError;
use crate::faults::Action;
use crate::state::AppState;

/// Put on every request by the accept loop (`serve`): notifying it drops the connection the
/// request came on, without a response.
#[derive(Clone, Debug, Default)]
pub struct ConnKill(pub Arc<Notify>);

pub async fn observe(
    State(state): State<AppState>,
    matched: MatchedPath,
    kill: Option<Extension<ConnKill>>,
    request: Request,
    next: Next,
) -> Response {
    let endpoint = format!("{} {}", request.method(), matched.as_str());
    state.count_call(&endpoint);
    state.log_call(&endpoint, request.method().as_str(), request.uri().path());
    let decision = state.faults().decide(&endpoint);
    if !decision.delay.is_zero() {
        tokio::time::sleep(decision.delay).await;
    }
    match decision.action {
        Action::Pass => next.run(request).await,
        Action::Fail(status) => ContractError::Injected(status).into_response(),
        Action::Oversize { bytes, stall } => oversize(bytes, stall),
        Action::Reset => match kill {
            Some(Extension(ConnKill(notify))) => {
                notify.notify_one();
                // The connection task drops this future together with the connection.
                std::future::pending::<Response>().await
            }
            // Served without the accept loop (no connection to drop): the closest answer.
            None => ContractError::Injected(axum::http::StatusCode::BAD_GATEWAY).into_response(),
        },
    }
}

/// A 200 whose body is `bytes` long, in 64 KiB chunks with no Content-Length, so a client
/// can only find out how long it is by reading; with a `stall`, the body stays open that long
/// after its last byte (a client holds what it read meanwhile).
fn oversize(bytes: u64, stall: std::time::Duration) -> Response {
    use futures::StreamExt as _;
    const CHUNK: u64 = 64 * 1024;
    let chunks = bytes.div_ceil(CHUNK);
    let body = futures::stream::iter((0..chunks).map(move |i| {
        let len = CHUNK.min(bytes - i * CHUNK) as usize;
        Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(vec![b' '; len]))
    }));
    let end = futures::stream::once(async move {
        tokio::time::sleep(stall).await;
        Ok::<_, std::convert::Infallible>(axum::body::Bytes::new())
    });
    let stream = body.chain(end);
    (
        axum::http::StatusCode::OK,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        axum::body::Body::from_stream(stream),
    )
        .into_response()
}
