//! Waiting for something a user would wait for, with a bound that only turns a hang into a
//! failure (the bound is never the assertion).

use std::future::Future;
use std::time::Duration;

use anyhow::bail;

/// Polls `probe` every `every` until it returns `Some`, for at most `limit`; the last error
/// (or "not yet") becomes the failure's cause.
pub async fn until<T, F, Fut>(what: &str, limit: Duration, mut probe: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let last = match probe().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => "not yet".to_owned(),
            Err(e) => format!("{e:#}"),
        };
        if tokio::time::Instant::now() >= deadline {
            bail!("timed out after {limit:?} waiting for {what} (last: {last})");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
