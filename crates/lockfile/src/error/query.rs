//! What a caller asks of an error: whether it is contention, who holds the
//! lock, why the holder was not evicted, which path it is about.

use std::path::Path;

use super::variants::{Error, EvictionRefused};
use crate::{Holder, OwnerRecord};

impl Error {
    /// Whether the lock is held by someone else ([`Error::Contended`] or
    /// [`Error::Timeout`]), as opposed to a failure to try at all.
    ///
    /// # Examples
    ///
    /// ```
    /// # fn main() -> Result<(), lockfile::Error> {
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("job.lock");
    /// let _held = lockfile::LockGuard::try_acquire(&path)?;
    /// // Another open file description conflicts, even in the same process.
    /// let err = lockfile::LockGuard::try_acquire(&path).unwrap_err();
    /// assert!(err.is_contended());
    /// assert_eq!(err.owner().unwrap().pid, std::process::id());
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_contended(&self) -> bool {
        matches!(
            self,
            Error::Contended { .. } | Error::Timeout { .. } | Error::SlotsHeld { .. }
        )
    }

    /// The holder's owner record, for [`Error::Contended`] and [`Error::Timeout`].
    pub fn owner(&self) -> Option<&OwnerRecord> {
        match self {
            Error::Contended { owner, .. } | Error::Timeout { owner, .. } => owner.as_deref(),
            _ => None,
        }
    }

    /// The processes holding the lock when no record names them, for
    /// [`Error::Contended`] and [`Error::Timeout`]: as the kernel's lock
    /// table shows them from here (util-linux flock(1), shared holders).
    /// Empty when [`owner`](Self::owner) names the holder.
    pub fn holders(&self) -> &[Holder] {
        match self {
            Error::Contended { holders, .. } | Error::Timeout { holders, .. } => holders,
            _ => &[],
        }
    }

    /// Why the holder was not evicted, for [`Error::Contended`] and
    /// [`Error::Timeout`] from an acquire with
    /// [`LockOptions::evict_after`](crate::LockOptions::evict_after).
    pub fn not_evicted(&self) -> Option<&EvictionRefused> {
        match self {
            Error::Contended { not_evicted, .. } | Error::Timeout { not_evicted, .. } => {
                not_evicted.as_deref()
            }
            _ => None,
        }
    }

    /// The path the error is about.
    pub fn path(&self) -> &Path {
        match self {
            Error::Contended { path, .. }
            | Error::Timeout { path, .. }
            | Error::DirectoryNotFound { path, .. }
            | Error::NotADirectory { path, .. }
            | Error::PermissionDenied { path, .. }
            | Error::ReadOnlyFilesystem { path, .. }
            | Error::NoSpace { path, .. }
            | Error::LockUnsupported { path, .. }
            | Error::Symlink { path, .. }
            | Error::NotRegularFile { path, .. }
            | Error::ForeignContent { path, .. }
            | Error::PlantedFile { path, .. }
            | Error::RecordTooLarge { path, .. }
            | Error::NotOurRun { path, .. }
            | Error::TickUsed { path, .. }
            | Error::TooLate { path, .. }
            | Error::SlotsHeld { path, .. }
            | Error::Io { path, .. } => path,
        }
    }
}
