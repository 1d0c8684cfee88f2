//! `FencedStore`: a resource that checks fencing tokens, the other half of a
//! safe lease.
//!
//! A lease alone cannot stop a holder that was paused past its deadline from
//! writing when it wakes up: it still believes it holds the lease, and
//! nothing can interrupt a write already on its way. The resource can: it
//! has seen the next holder's larger token, and refuses the older one. This
//! store shows the check in its simplest form; a database does the same with
//! a `WHERE fencing_token <= $1` guard or a conditional write.
//!
//! It belongs to the examples, not to a published crate: every real resource
//! checks tokens its own way. It knows no engine: the etcd example
//! `fenced_store` and the fault tests of both engines and of the command use
//! it as the resource their holders write to.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A small file-backed register that accepts a write only if its fencing
/// token is at least the highest it has accepted, and keeps a history of the
/// writes it accepted.
///
/// Writers on one host are serialised with a lock file next to the store
/// (`PATH.lock`, a `lockfile::LockGuard`); the store is replaced atomically.
#[derive(Clone, Debug)]
pub struct FencedStore {
    path: PathBuf,
}

/// One write a [`FencedStore`] accepted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FencedWrite {
    /// The fencing token the write carried.
    pub token: u64,
    /// The value written.
    pub value: String,
}

/// What can go wrong with a [`FencedStore`].
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store refused a write carrying an older fencing token.
    #[error(
        "fenced store `{}` rejected a write with fencing token {token}: it already accepted token {highest}",
        path.display()
    )]
    Fenced {
        /// The store.
        path: PathBuf,
        /// The token the write carried.
        token: u64,
        /// The highest token the store has accepted.
        highest: u64,
    },
    /// The store could not be read or written.
    #[error("cannot {op} fenced store `{}`: {source}", path.display())]
    Io {
        /// What failed: "read" or "write".
        op: &'static str,
        /// The store.
        path: PathBuf,
        /// The underlying error.
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
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

    /// Writes `value` if `token` is at least the highest token accepted so
    /// far (equal tokens are the same holder writing again).
    ///
    /// # Errors
    ///
    /// [`StoreError::Fenced`] when a larger token has been accepted;
    /// [`StoreError::Io`] when the store cannot be read or written.
    pub fn write(&self, token: u64, value: &str) -> Result<(), StoreError> {
        let _lock = self.lock()?;
        let mut doc = self.read_document()?;
        if token < doc.highest_token {
            return Err(StoreError::Fenced {
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
    pub fn highest_token(&self) -> Result<u64, StoreError> {
        Ok(self.read_document()?.highest_token)
    }

    /// The last value accepted.
    pub fn value(&self) -> Result<Option<String>, StoreError> {
        Ok(self.read_document()?.value)
    }

    /// Every write accepted, oldest first.
    pub fn history(&self) -> Result<Vec<FencedWrite>, StoreError> {
        Ok(self.read_document()?.history)
    }

    /// Whether a writer is inside [`write`](Self::write) at this moment,
    /// holding the store's lock. A writer stopped there (SIGSTOP, a frozen
    /// VM) keeps every other writer on this host waiting until it
    /// continues: a test that stops a writer checks that it stopped
    /// outside a write.
    ///
    /// # Errors
    ///
    /// [`StoreError::Io`] when the lock cannot be tried.
    pub fn busy(&self) -> Result<bool, StoreError> {
        match lockfile::LockGuard::try_acquire(self.lock_path()) {
            Ok(_free) => Ok(false),
            Err(e) if e.is_contended() => Ok(true),
            Err(e) => Err(StoreError::Io {
                op: "write",
                path: self.path.clone(),
                source: Box::new(e),
            }),
        }
    }

    fn lock(&self) -> Result<lockfile::LockGuard, StoreError> {
        lockfile::LockGuard::acquire(self.lock_path()).map_err(|e| StoreError::Io {
            op: "write",
            path: self.path.clone(),
            source: Box::new(e),
        })
    }

    fn lock_path(&self) -> PathBuf {
        let mut lock_path = self.path.clone().into_os_string();
        lock_path.push(".lock");
        PathBuf::from(lock_path)
    }

    fn read_document(&self) -> Result<Document, StoreError> {
        let err = |source: Box<dyn std::error::Error + Send + Sync>| StoreError::Io {
            op: "read",
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
    fn write_document(&self, doc: &Document) -> Result<(), StoreError> {
        let err = |e: io::Error| StoreError::Io {
            op: "write",
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
