//! Where the contract suite runs: an in-process stand-in by default, or a real terdut-server
//! when `TERDUT_CONTRACT_URL` (and `TERDUT_CONTRACT_KEY`) are set. Tests that need the
//! stand-in's admin surface ask [`Target::admin`], which prints why they skip against a real
//! server.

use std::time::Duration;

use rand::Rng;
use terdut_actors::api::{ClientConfig, OperatorKey, TerdutClient};
use terdut_standin::{AdminClient, Config, Handle};

pub const ENV_URL: &str = "TERDUT_CONTRACT_URL";
pub const ENV_KEY: &str = "TERDUT_CONTRACT_KEY";
/// A username the real server knows, for the positive ladder case.
pub const ENV_USER: &str = "TERDUT_CONTRACT_USER";

pub struct Target {
    pub base_url: String,
    pub key: OperatorKey,
    pub client: TerdutClient,
    standin: Option<Handle>,
    admin: Option<AdminClient>,
}

impl Target {
    pub async fn new() -> Self {
        match std::env::var(ENV_URL).ok().filter(|u| !u.is_empty()) {
            Some(base_url) => {
                let key = OperatorKey::new(
                    std::env::var(ENV_KEY).expect("TERDUT_CONTRACT_KEY must be set with the URL"),
                );
                let client = TerdutClient::new(ClientConfig::new(&base_url, key.clone()))
                    .expect("client for TERDUT_CONTRACT_URL");
                Self {
                    base_url,
                    key,
                    client,
                    standin: None,
                    admin: None,
                }
            }
            None => {
                let standin = terdut_standin::spawn(Config::for_tests())
                    .await
                    .expect("stand-in starts");
                let base_url = standin.base_url().to_owned();
                let key = OperatorKey::new(standin.operator_key());
                let client = TerdutClient::new(
                    ClientConfig::new(&base_url, key.clone())
                        .request_timeout(Duration::from_secs(5)),
                )
                .expect("client for the stand-in");
                let admin = Some(standin.admin());
                Self {
                    base_url,
                    key,
                    client,
                    standin: Some(standin),
                    admin,
                }
            }
        }
    }

    pub fn is_standin(&self) -> bool {
        self.standin.is_some()
    }

    /// A client of the same server with other settings (timeouts, metrics, a wrong key).
    pub fn client_with(&self, f: impl FnOnce(ClientConfig) -> ClientConfig) -> TerdutClient {
        TerdutClient::new(f(ClientConfig::new(&self.base_url, self.key.clone())))
            .expect("client builds")
    }

    /// A client of the same server presenting another key.
    pub fn client_with_key(&self, key: OperatorKey) -> TerdutClient {
        TerdutClient::new(ClientConfig::new(&self.base_url, key)).expect("client builds")
    }

    /// The admin surface, or `None` with the reason printed when running against a real server.
    pub fn admin(&self, test: &str) -> Option<&AdminClient> {
        if self.admin.is_none() {
            println!(
                "SKIP {test}: needs the stand-in's admin surface, not available with {ENV_URL} set"
            );
        }
        self.admin.as_ref()
    }

    /// A username the server knows: seeded on the stand-in, `TERDUT_CONTRACT_USER` on a real
    /// server (skip when unset).
    pub async fn known_user(&self, test: &str) -> Option<String> {
        if let Some(admin) = &self.admin {
            admin.seed_users(["alice"]).await.expect("seed alice");
            return Some("alice".into());
        }
        let user = std::env::var(ENV_USER).ok().filter(|u| !u.is_empty());
        if user.is_none() {
            println!("SKIP part of {test}: set {ENV_USER} to a username the server knows");
        }
        user
    }

    pub async fn stop(self) {
        if let Some(standin) = self.standin {
            standin.shutdown().await;
        }
    }
}

/// A name no other test (or earlier run against a real server) uses.
pub fn unique(prefix: &str) -> String {
    let n: u64 = rand::rng().random();
    format!("{prefix}-{n:016x}")
}
