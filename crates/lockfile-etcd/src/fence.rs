//! `FencedStore`: a resource that checks fencing tokens, the other half of a
//! safe lease.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::Operation;
use crate::{Error, Result};

/// A small file-backed register that accepts a write only if its fencing
/// token is at least the highest it has accepted, and keeps a history of the
/// writes it accepted.
///
/// A lease alone cannot stop a holder that was paused past its deadline from
/// writing when it wakes up: it still believes it holds the lease, and
/// nothing can interrupt a write already on its way. The resource can: it has
/// seen the next holder's larger token, and refuses the older one. This type
/// shows the check in its simplest form; a database does the same with a
/// `WHERE fencing_token <= $1` guard or a conditional write.
///
/// Writers on one host are serialised with a lock file next to the store
/// (`PATH.lock`, a `lockfile::LockGuard`); the store is replaced atomically.
///
/// ```
/// # fn main() -> Result<(), lockfile_etcd::Error> {
/// # let dir = tempfile::tempdir().unwrap();
/// use lockfile_etcd::FencedStore;
///
/// let store = FencedStore::new(dir.path().join("report.json"));
/// store.write(7, "from holder 7")?;
/// store.write(9, "from holder 9")?;
/// // Holder 7 wakes up from a long pause and writes: refused.
/// let err = store.write(7, "late").unwrap_err();
/// assert!(matches!(err, lockfile_etcd::Error::Fenced { token: 7, highest: 9, .. }));
/// assert_eq!(store.value()?.as_deref(), Some("from holder 9"));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct FencedStore {
    path: PathBuf,
}

/// One write a [`FencedStore`] accepted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FencedWrite {
    /// The fencing token the write carried.
    pub token: u64,
    /// The value written.
    pub value: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Document {
    highest_token: u64,
    value: Option<String>,
    history: Vec<FencedWrite>,
}

impl FencedStore {
    /// The store at `path` (created by the first write).
    pub fn new(path: impl Into<PathBuf>) -> FencedStore {
        FencedStore { path: path.into() }
    }

    /// The store's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `value` if `token` is at least the highest token accepted so
    /// far (equal tokens are the same holder writing again).
    ///
    /// # Errors
    ///
    /// [`Error::Fenced`] when a larger token has been accepted;
    /// [`Error::Store`] when the store cannot be read or written.
    pub fn write(&self, token: u64, value: &str) -> Result<()> {
        let _lock = self.lock()?;
        let mut doc = self.read_document()?;
        if token < doc.highest_token {
            return Err(Error::Fenced {
                path: self.path.clone(),
                token,
                highest: doc.highest_token,
            });
        }
        doc.highest_token = token;
        doc.value = Some(value.to_owned());
        doc.history.push(FencedWrite {
            token,
            value: value.to_owned(),
        });
        self.write_document(&doc)
    }

    /// The highest token accepted so far (0 for a new store).
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the store cannot be read.
    pub fn highest_token(&self) -> Result<u64> {
        Ok(self.read_document()?.highest_token)
    }

    /// The last value accepted.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the store cannot be read.
    pub fn value(&self) -> Result<Option<String>> {
        Ok(self.read_document()?.value)
    }

    /// Every write accepted, oldest first.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the store cannot be read.
    pub fn history(&self) -> Result<Vec<FencedWrite>> {
        Ok(self.read_document()?.history)
    }

    fn lock(&self) -> Result<lockfile::LockGuard> {
        let mut lock_path = self.path.clone().into_os_string();
        lock_path.push(".lock");
        lockfile::LockGuard::acquire(PathBuf::from(lock_path)).map_err(|e| Error::Store {
            op: Operation::WriteStore,
            path: self.path.clone(),
            source: Box::new(e),
        })
    }

    fn read_document(&self) -> Result<Document> {
        let err = |source: Box<dyn std::error::Error + Send + Sync>| Error::Store {
            op: Operation::ReadStore,
            path: self.path.clone(),
            source,
        };
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| err(Box::new(e))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Document::default()),
            Err(e) => Err(err(Box::new(e))),
        }
    }

    /// Replaces the store atomically: readers see the old or the new
    /// document, never half of one.
    fn write_document(&self, doc: &Document) -> Result<()> {
        let err = |e: io::Error| Error::Store {
            op: Operation::WriteStore,
            path: self.path.clone(),
            source: Box::new(e),
        };
        let dir = match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let mut tmp = tempfile_in(dir, &self.path).map_err(err)?;
        let bytes = serde_json::to_vec_pretty(doc).expect("a store document always serialises");
        tmp.1.write_all(&bytes).map_err(err)?;
        tmp.1.sync_data().map_err(err)?;
        std::fs::rename(&tmp.0, &self.path).map_err(err)
    }
}

/// A new file next to `path` to be renamed over it.
fn tempfile_in(dir: &Path, path: &Path) -> io::Result<(PathBuf, std::fs::File)> {
    let stem = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{stem}.{}.tmp", std::process::id()));
    let file = std::fs::File::create(&tmp)?;
    Ok((tmp, file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_equal_and_higher_tokens_and_rejects_lower_ones() {
        let dir = tempfile::tempdir().unwrap();
        let store = FencedStore::new(dir.path().join("s.json"));
        assert_eq!(store.highest_token().unwrap(), 0);
        assert_eq!(store.value().unwrap(), None);
        store.write(5, "a").unwrap();
        store.write(5, "b").unwrap();
        store.write(8, "c").unwrap();
        let err = store.write(6, "late").unwrap_err();
        assert!(
            err.to_string()
                .contains("rejected a write with fencing token 6: it already accepted token 8"),
            "{err}"
        );
        assert_eq!(store.highest_token().unwrap(), 8);
        let tokens: Vec<u64> = store.history().unwrap().iter().map(|w| w.token).collect();
        assert_eq!(tokens, [5, 5, 8]);
    }

    #[test]
    fn a_corrupt_store_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        std::fs::write(&path, b"not json").unwrap();
        let err = FencedStore::new(&path).write(1, "x").unwrap_err();
        assert!(
            err.to_string().starts_with("cannot read fenced store `"),
            "{err}"
        );
    }
}
