//! A stand-in terdut-server: the whole contract of docs/terdut-api.md with its real semantics,
//! for tests, the demo and the e2e scenario, since the real server's source is not available
//! to this project (docs/design.md §11). It also serves a test-only admin surface (off by default)
//! to seed users and open incidents, read everything back and inject faults.
//!
//! In-process use:
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let standin = terdut_standin::spawn(terdut_standin::Config::for_tests()).await?;
//! let (url, key) = (standin.base_url(), standin.operator_key());
//! standin.admin().seed_users(["alice"]).await?;
//! # let _ = (url, key);
//! standin.shutdown().await;
//! # Ok(()) }
//! ```

pub mod admin;
pub mod config;
pub mod error;
pub mod faults;
pub mod persist;
mod routes;
pub mod secrets;
mod serve;
pub mod state;
pub mod store;
mod team_lookup;
pub mod validate;
pub mod wire;

use std::net::SocketAddr;
use std::sync::{Arc, Once};

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use admin::{AdminClient, AdminError, FaultRule};
pub use config::{Config, ConfigError};
pub use secrets::generate_operator_key;

/// Installs ring as rustls' process-wide provider, once: the workspace builds reqwest with
/// `rustls-no-provider`, and the admin client is a reqwest client.
pub fn init_tls() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _already_installed = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Why a stand-in could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Data(#[from] persist::PersistError),
}

/// A running stand-in. Dropping it stops the server too; [`shutdown`](Self::shutdown) also
/// waits until it has stopped.
pub struct Handle {
    addr: SocketAddr,
    base_url: String,
    operator_key: String,
    admin_token: Option<String>,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("base_url", &self.base_url)
            .field("operator_key", &"<redacted>")
            .finish_non_exhaustive()
    }
}

impl Handle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>`: where the operator's client points.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The key the `terdut-operator` account was keyed from.
    pub fn operator_key(&self) -> &str {
        &self.operator_key
    }

    /// A client of the admin surface (its calls fail with 404 when the surface is off).
    pub fn admin(&self) -> AdminClient {
        AdminClient::new(self.base_url.clone(), self.admin_token.clone())
    }

    /// Stops accepting, closes open connections and waits for the server task.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.task.await;
    }
}

/// Starts a stand-in on `config.listen` (port 0 picks a free one), loading the data file
/// first when one is configured.
pub async fn spawn(config: Config) -> Result<Handle, StartError> {
    config.check()?;
    let store = match &config.data_file {
        Some(path) => persist::load(path)?,
        None => store::Store::default(),
    };
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|source| StartError::Listen {
            addr: config.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| StartError::Listen {
        addr: config.listen,
        source,
    })?;
    let base_url = format!("http://{addr}");
    let public_url = config
        .public_url
        .clone()
        .unwrap_or_else(|| base_url.clone())
        .trim_end_matches('/')
        .to_owned();
    let shared = Arc::new(state::Shared::new(
        store,
        config.data_file.clone(),
        &config.operator_key,
        config.admin_token.as_deref(),
        public_url,
    ));
    let app = routes::router(shared, config.admin);
    let (shutdown, watch_rx) = watch::channel(false);
    let task = tokio::spawn(serve::serve(listener, app, watch_rx));
    tracing::info!(%addr, admin = config.admin, persisted = config.data_file.is_some(), "terdut-standin listening");
    Ok(Handle {
        addr,
        base_url,
        operator_key: config.operator_key,
        admin_token: config.admin_token,
        shutdown,
        task,
    })
}
