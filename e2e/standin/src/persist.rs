//! The data file: the whole [`Store`] as JSON, written after every change by writing a temporary
//! file beside it, syncing it and renaming it over the old one, so a crash (or a test killing
//! the process) leaves either the old or the new state, never half of one. This is what lets
//! crash tests restart the stand-in and find the teams the operator made.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::store::Store;

/// Bumped when the file's shape changes incompatibly.
const FORMAT_VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    #[error("data file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("data file {path} does not parse: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("data file {path} has format version {found}, this stand-in reads {FORMAT_VERSION}")]
    Version { path: PathBuf, found: u32 },
}

#[derive(Deserialize)]
struct FileV1 {
    version: u32,
    store: Store,
}

#[derive(Serialize)]
struct FileV1Ref<'a> {
    version: u32,
    store: &'a Store,
}

/// The stored state, or an empty one when the file does not exist yet. A file that exists but
/// does not parse is an error: starting empty would silently lose the state a test relies on.
pub fn load(path: &Path) -> Result<Store, PersistError> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Store::default()),
        Err(source) => {
            return Err(PersistError::Io {
                path: path.to_owned(),
                source,
            });
        }
    };
    let file: FileV1 = serde_json::from_slice(&bytes).map_err(|source| PersistError::Parse {
        path: path.to_owned(),
        source,
    })?;
    if file.version != FORMAT_VERSION {
        return Err(PersistError::Version {
            path: path.to_owned(),
            found: file.version,
        });
    }
    Ok(file.store)
}

/// Writes the state atomically (temp file, fsync, rename).
pub fn save(path: &Path, store: &Store) -> Result<(), PersistError> {
    let io = |source| PersistError::Io {
        path: path.to_owned(),
        source,
    };
    let file = FileV1Ref {
        version: FORMAT_VERSION,
        store,
    };
    let bytes = serde_json::to_vec_pretty(&file).map_err(|source| PersistError::Parse {
        path: path.to_owned(),
        source,
    })?;
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".tmp");
    let tmp = PathBuf::from(tmp_name);
    let mut f = fs::File::create(&tmp).map_err(io)?;
    f.write_all(&bytes).map_err(io)?;
    f.sync_all().map_err(io)?;
    drop(f);
    fs::rename(&tmp, path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::NewTeam;

    #[test]
    fn round_trips_and_refuses_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        assert_eq!(load(&path).unwrap(), Store::default());
        let mut store = Store::default();
        store
            .create_team(NewTeam {
                name: "A".into(),
                external_id: "ns/a".into(),
            })
            .unwrap();
        save(&path, &store).unwrap();
        assert_eq!(load(&path).unwrap(), store);
        fs::write(&path, b"{not json").unwrap();
        assert!(matches!(load(&path), Err(PersistError::Parse { .. })));
    }
}
