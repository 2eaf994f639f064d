//! How a stand-in starts: from code ([`Config::for_tests`]) or from the binary's flags and
//! environment ([`Config::from_args`]), mirroring the real server's `TERDUT_LISTEN_ADDR`,
//! `TERDUT_PUBLIC_URL` and `TERDUT_OPERATOR_KEY` (terdut-api.md "Process environment").

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use crate::secrets;

/// The real server's default port (assumption; the chart always sets `TERDUT_LISTEN_ADDR`).
pub const DEFAULT_LISTEN: &str = ":8080";

pub const ENV_LISTEN: &str = "TERDUT_LISTEN_ADDR";
pub const ENV_PUBLIC_URL: &str = "TERDUT_PUBLIC_URL";
pub const ENV_OPERATOR_KEY: &str = "TERDUT_OPERATOR_KEY";
pub const ENV_DATA_FILE: &str = "TERDUT_STANDIN_DATA_FILE";
pub const ENV_ADMIN: &str = "TERDUT_STANDIN_ADMIN";
pub const ENV_ADMIN_TOKEN: &str = "TERDUT_STANDIN_ADMIN_TOKEN";

/// A stand-in's settings.
#[derive(Clone)]
pub struct Config {
    pub listen: SocketAddr,
    /// `tdsa_` + 48 lowercase hex, as the operator generates it (docs/design.md §6).
    pub operator_key: String,
    /// Where state is persisted; `None` keeps it in memory only.
    pub data_file: Option<PathBuf>,
    /// Serve the test-only `/admin/` surface.
    pub admin: bool,
    /// When set, admin calls need `Authorization: Bearer <token>`.
    pub admin_token: Option<String>,
    /// The base of webhook URLs; defaults to `http://<bound address>`.
    pub public_url: Option<String>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("listen", &self.listen)
            .field("operator_key", &"<redacted>")
            .field("data_file", &self.data_file)
            .field("admin", &self.admin)
            .field(
                "admin_token",
                &self.admin_token.as_ref().map(|_| "<redacted>"),
            )
            .field("public_url", &self.public_url)
            .finish()
    }
}

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{ENV_OPERATOR_KEY} is not set")]
    MissingKey,
    #[error("the operator key is not `tdsa_` followed by 48 lowercase hex characters")]
    MalformedKey,
    #[error("listen address {0:?} is not host:port or :port")]
    Listen(String),
    #[error("{0}")]
    Usage(String),
}

impl Config {
    /// In-process, for tests: loopback on a free port, a fresh key, admin on, memory only.
    pub fn for_tests() -> Self {
        Self {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            operator_key: secrets::generate_operator_key(),
            data_file: None,
            admin: true,
            admin_token: None,
            public_url: None,
        }
    }

    pub fn with_data_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.data_file = Some(path.into());
        self
    }

    pub fn with_operator_key(mut self, key: impl Into<String>) -> Self {
        self.operator_key = key.into();
        self
    }

    /// The binary's configuration: flags win over the environment.
    ///
    /// ```text
    /// terdut-standin [--listen ADDR] [--public-url URL] [--data-file PATH] [--admin]
    /// ```
    pub fn from_args(
        args: impl IntoIterator<Item = String>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        // An empty variable counts as unset (an image's `ENV X=` default, a chart's "").
        let env = |name: &str| env(name).filter(|v| !v.is_empty());
        let mut listen = env(ENV_LISTEN).unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
        let mut public_url = env(ENV_PUBLIC_URL);
        let mut data_file = env(ENV_DATA_FILE).map(PathBuf::from);
        let mut admin = env(ENV_ADMIN).is_some_and(|v| truthy(&v));
        let admin_token = env(ENV_ADMIN_TOKEN);
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let mut value = |flag: &str| {
                args.next()
                    .ok_or_else(|| ConfigError::Usage(format!("{flag} needs a value")))
            };
            match arg.as_str() {
                "--listen" => listen = value("--listen")?,
                "--public-url" => public_url = Some(value("--public-url")?),
                "--data-file" => data_file = Some(PathBuf::from(value("--data-file")?)),
                "--admin" => admin = true,
                "--help" | "-h" => return Err(ConfigError::Usage(usage())),
                other => {
                    return Err(ConfigError::Usage(format!(
                        "unknown argument {other:?}\n{}",
                        usage()
                    )));
                }
            }
        }
        let operator_key = env(ENV_OPERATOR_KEY).ok_or(ConfigError::MissingKey)?;
        let config = Self {
            listen: parse_listen(&listen)?,
            operator_key,
            data_file,
            admin,
            admin_token,
            public_url,
        };
        config.check()?;
        Ok(config)
    }

    /// Refuses a malformed operator key (assumption: the real server would not accept one the
    /// operator cannot have generated).
    pub fn check(&self) -> Result<(), ConfigError> {
        if secrets::well_formed(&self.operator_key, secrets::OPERATOR_KEY_PREFIX) {
            Ok(())
        } else {
            Err(ConfigError::MalformedKey)
        }
    }
}

pub fn usage() -> String {
    format!(
        "usage: terdut-standin [--listen ADDR] [--public-url URL] [--data-file PATH] [--admin]\n\
         env: {ENV_OPERATOR_KEY} (required), {ENV_LISTEN} (default {DEFAULT_LISTEN}), \
         {ENV_PUBLIC_URL}, {ENV_DATA_FILE}, {ENV_ADMIN}=1, {ENV_ADMIN_TOKEN}"
    )
}

fn truthy(v: &str) -> bool {
    matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on")
}

/// `:8080` (all interfaces, like Go's listener) or `host:port`.
pub fn parse_listen(s: &str) -> Result<SocketAddr, ConfigError> {
    let full = if s.starts_with(':') {
        format!("0.0.0.0{s}")
    } else {
        s.to_owned()
    };
    full.parse().map_err(|_| ConfigError::Listen(s.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_with(key: Option<String>) -> impl Fn(&str) -> Option<String> {
        move |name| match name {
            ENV_OPERATOR_KEY => key.clone(),
            ENV_ADMIN => Some("1".into()),
            _ => None,
        }
    }

    #[test]
    fn reads_flags_and_env() {
        let key = secrets::generate_operator_key();
        let c = Config::from_args(
            ["--listen".into(), "127.0.0.1:9000".into()],
            env_with(Some(key.clone())),
        )
        .unwrap();
        assert_eq!(c.listen, "127.0.0.1:9000".parse().unwrap());
        assert!(c.admin);
        assert_eq!(c.operator_key, key);
        assert!(!format!("{c:?}").contains(&key));
    }

    #[test]
    fn refuses_bad_input() {
        assert!(matches!(
            Config::from_args([], env_with(None)),
            Err(ConfigError::MissingKey)
        ));
        assert!(matches!(
            Config::from_args([], env_with(Some("tdsa_short".into()))),
            Err(ConfigError::MalformedKey)
        ));
        assert!(matches!(
            Config::from_args(["--bogus".into()], env_with(None)),
            Err(ConfigError::Usage(_))
        ));
        assert_eq!(
            parse_listen(":8080").unwrap(),
            "0.0.0.0:8080".parse().unwrap()
        );
    }
}
