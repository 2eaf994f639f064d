//! The two Kubernetes clients of the operator: one for the watches, one with a read timeout
//! for every call a reconcile pass makes.
//!
//! kube's default client has no read timeout (long-lived watch and exec streams would break),
//! so a pass whose API server stops answering mid-request would hold its actor, and its slot
//! of the pass limit, forever. Every call of a pass therefore goes through a client whose
//! reads time out (docs/security.md, "bounded and fair"); the watches keep the default client
//! and kube-runtime's own idle timeout.

use std::time::Duration;

use kube::Client;

/// How long a reconcile pass waits for the API server to answer one call. Longer than any
/// healthy API server takes (a write is tens of milliseconds), short enough that a hung one
/// costs a pass seconds, not forever; the failure is retryable, with backoff.
pub const RECONCILE_CALL_TIMEOUT: Duration = Duration::from_secs(15);

/// The operator's clients; cheap to clone.
#[derive(Clone)]
pub struct KubeClients {
    /// Informers: watches and their lists.
    pub watch: Client,
    /// Everything a pass reads or writes, Events included.
    pub reconcile: Client,
}

impl std::fmt::Debug for KubeClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeClients").finish_non_exhaustive()
    }
}

impl KubeClients {
    /// Both clients from one configuration, with [`RECONCILE_CALL_TIMEOUT`].
    pub fn from_config(config: kube::Config) -> Result<Self, kube::Error> {
        Self::with_timeout(config, RECONCILE_CALL_TIMEOUT)
    }

    /// One client in both roles, without the read timeout: for tools and tests that bring a
    /// client of their own (the operator itself always uses [`Self::from_config`]).
    pub fn from_client(client: Client) -> Self {
        Self {
            watch: client.clone(),
            reconcile: client,
        }
    }

    /// Both clients, the reconcile one with `timeout` for connecting and for each response.
    pub fn with_timeout(config: kube::Config, timeout: Duration) -> Result<Self, kube::Error> {
        let watch = Client::try_from(config.clone())?;
        let mut bounded = config;
        bounded.connect_timeout = Some(timeout);
        bounded.read_timeout = Some(timeout);
        bounded.write_timeout = Some(timeout);
        // Count from the request, not from when its pooled connection went idle.
        bounded.reset_reader_on_write = true;
        let reconcile = Client::try_from(bounded)?;
        Ok(Self { watch, reconcile })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::Api;

    /// An "API server" that accepts connections and never answers.
    async fn black_hole() -> (String, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let mut held = vec![];
            while let Ok((conn, _)) = listener.accept().await {
                held.push(conn);
            }
        });
        (format!("http://{addr}"), task)
    }

    #[tokio::test]
    async fn a_pass_call_to_a_silent_api_server_times_out_and_is_retryable() {
        crate::api::init_tls();
        let (url, server) = black_hole().await;
        let config = kube::Config::new(url.parse().unwrap());
        let clients = KubeClients::with_timeout(config, Duration::from_millis(300)).unwrap();
        let api: Api<ConfigMap> = Api::namespaced(clients.reconcile, "default");
        // The outer bound only keeps a broken test from hanging; the call must end on its own.
        let result = tokio::time::timeout(Duration::from_secs(30), api.get_opt("x"))
            .await
            .expect("the reconcile client's own timeout ended the call");
        let err = result.unwrap_err();
        let reconcile = crate::error::ReconcileError::kube(
            crate::error::KubeCall::ReadServerObject,
            "ConfigMap default/x",
            err,
        );
        assert!(reconcile.is_retryable(), "{reconcile}");
        server.abort();
    }
}
