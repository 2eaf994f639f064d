//! The state every handler shares: the [`Store`] behind a mutex (persisted after each change),
//! the operator key's digest, the fault rules and the call counts.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use sha2::{Digest, Sha256};

use crate::admin::types::CallCounts;
use crate::error::ContractError;
use crate::faults::Faults;
use crate::persist;
use crate::secrets;
use crate::store::Store;

pub type AppState = Arc<Shared>;

#[derive(Debug)]
pub struct Shared {
    store: Mutex<Store>,
    data_file: Option<PathBuf>,
    /// SHA-256 of `TERDUT_OPERATOR_KEY`: the plain key is not kept (docs/design.md §6: the server
    /// re-keys its `terdut-operator` account from it at start).
    operator_key_digest: [u8; 32],
    admin_token_digest: Option<[u8; 32]>,
    public_url: String,
    faults: Mutex<Faults>,
    calls: Mutex<BTreeMap<String, u64>>,
    /// The last [`CALL_LOG_KEPT`] calls in the order they arrived (`GET /admin/calls/log`).
    call_log: Mutex<std::collections::VecDeque<String>>,
}

/// How many calls the call log keeps.
pub const CALL_LOG_KEPT: usize = 50_000;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A handler that panicked mid-change left no half-written store: changes are applied to a
    // copy and swapped in whole (see `write`).
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

impl Shared {
    pub fn new(
        store: Store,
        data_file: Option<PathBuf>,
        operator_key: &str,
        admin_token: Option<&str>,
        public_url: String,
    ) -> Self {
        Self {
            store: Mutex::new(store),
            data_file,
            operator_key_digest: digest(operator_key),
            admin_token_digest: admin_token.map(digest),
            public_url,
            faults: Mutex::new(Faults::default()),
            calls: Mutex::new(BTreeMap::new()),
            call_log: Mutex::default(),
        }
    }

    pub fn public_url(&self) -> &str {
        &self.public_url
    }

    pub fn read<T>(&self, f: impl FnOnce(&Store) -> T) -> T {
        f(&lock(&self.store))
    }

    /// Applies a change: a refused call or a failed write leaves the state as it was. Every
    /// `Store` method checks before it changes anything, so a refused call changes nothing by
    /// itself; with a data file the change is made to a copy, persisted, then made current, so
    /// a failed write changes nothing either. Without one the change is made in place: a copy
    /// per call made a run with 10,000 teams spend most of its time copying the store.
    pub fn write<T>(
        &self,
        f: impl FnOnce(&mut Store) -> Result<T, ContractError>,
    ) -> Result<T, ContractError> {
        let mut store = lock(&self.store);
        let Some(path) = &self.data_file else {
            return f(&mut store);
        };
        let mut next = store.clone();
        let out = f(&mut next)?;
        persist::save(path, &next).map_err(|e| {
            tracing::error!(error = %e, "could not persist the stand-in state");
            ContractError::Internal("could not persist the state".into())
        })?;
        *store = next;
        Ok(out)
    }

    pub fn operator_key_matches(&self, presented: &str) -> bool {
        secrets::digests_eq(&digest(presented), &self.operator_key_digest)
    }

    /// Whether an admin call may proceed: always when no admin token is configured.
    pub fn admin_token_matches(&self, presented: Option<&str>) -> bool {
        match (&self.admin_token_digest, presented) {
            (None, _) => true,
            (Some(want), Some(got)) => secrets::digests_eq(&digest(got), want),
            (Some(_), None) => false,
        }
    }

    pub fn count_call(&self, endpoint: &str) {
        *lock(&self.calls).entry(endpoint.to_owned()).or_default() += 1;
    }

    /// Records one call in arrival order: `"METHOD /path"` with its ids, so a test can tell
    /// which team a call was for and what came before it. An ingest path carries its
    /// integration's token, so those are logged by `endpoint` (the route template) only.
    pub fn log_call(&self, endpoint: &str, method: &str, path: &str) {
        let line = if path.starts_with("/api/v1/ingest/") {
            endpoint.to_owned()
        } else {
            format!("{method} {path}")
        };
        let mut log = lock(&self.call_log);
        if log.len() == CALL_LOG_KEPT {
            log.pop_front();
        }
        log.push_back(line);
    }

    pub fn call_log(&self) -> Vec<String> {
        lock(&self.call_log).iter().cloned().collect()
    }

    pub fn calls(&self) -> CallCounts {
        CallCounts(lock(&self.calls).clone())
    }

    pub fn reset_calls(&self) {
        lock(&self.calls).clear();
        lock(&self.call_log).clear();
    }

    pub fn faults(&self) -> MutexGuard<'_, Faults> {
        lock(&self.faults)
    }

    /// Forgets everything but the operator key: state (persisted), faults and call counts.
    pub fn reset(&self) -> Result<(), ContractError> {
        self.write(|store| {
            *store = Store::default();
            Ok(())
        })?;
        self.faults().clear();
        self.reset_calls();
        Ok(())
    }
}
