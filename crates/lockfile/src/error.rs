//! The crate's one error type. Every message names the operation and the path.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::OwnerRecord;

/// A `Result` whose error is this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What the crate was doing when an error happened. Shown in messages as
/// "cannot OPERATION `PATH`".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Operation {
    /// Opening or creating the lock file.
    Open,
    /// Taking or releasing the kernel lock.
    Lock,
    /// Checking the file's identity (`stat`).
    Stat,
    /// Reading the owner record.
    Read,
    /// Writing the owner record.
    Write,
    /// Refreshing the heartbeat.
    Heartbeat,
    /// Listing a directory of lock files.
    ReadDir,
    /// Removing a lock file.
    Remove,
    /// Creating a lock directory.
    CreateDir,
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operation::Open => "open lock file",
            Operation::Lock => "lock",
            Operation::Stat => "stat lock file",
            Operation::Read => "read owner record from",
            Operation::Write => "write owner record to",
            Operation::Heartbeat => "refresh heartbeat of",
            Operation::ReadDir => "list lock directory",
            Operation::Remove => "remove lock file",
            Operation::CreateDir => "create lock directory",
        })
    }
}

/// Everything that can go wrong while locking, inspecting or reaping.
///
/// Contention is its own variant, [`Error::Contended`], never a generic I/O
/// error: test for it with [`Error::is_contended`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Someone else holds the lock. `owner` is their record when it could be read.
    #[error("`{}` is locked by {}", path.display(), DisplayOwner(owner.as_deref()))]
    Contended {
        /// The lock file.
        path: PathBuf,
        /// The holder's owner record, when the file held a readable one.
        /// `None` when the holders hold the lock shared: they keep no record,
        /// and one left in the file is an earlier holder's.
        owner: Option<Box<OwnerRecord>>,
    },
    /// A bounded wait ended before the lock came free.
    #[error(
        "gave up waiting for `{}` after {}: it is locked by {}",
        path.display(),
        humantime::format_duration(*waited),
        DisplayOwner(owner.as_deref())
    )]
    Timeout {
        /// The lock file.
        path: PathBuf,
        /// How long the call waited.
        waited: Duration,
        /// The holder's owner record at the moment the wait ended, when
        /// readable (`None` against shared holders, as for `Contended`).
        owner: Option<Box<OwnerRecord>>,
    },
    /// The directory that should contain the lock file does not exist.
    #[error(
        "cannot {op} `{}`: the directory `{}` does not exist (create it, or choose an existing lock directory)",
        path.display(),
        dir.display()
    )]
    DirectoryNotFound {
        /// The failed operation.
        op: Operation,
        /// The lock file.
        path: PathBuf,
        /// The missing directory.
        dir: PathBuf,
    },
    /// The operating system refused access.
    #[error("cannot {op} `{}`: permission denied for euid {euid}: {hint}", path.display())]
    PermissionDenied {
        /// The failed operation.
        op: Operation,
        /// The path that was refused.
        path: PathBuf,
        /// The effective user id of this process.
        euid: u32,
        /// What is in the way and what to do about it.
        hint: String,
    },
    /// The lock file lives on a read-only filesystem.
    #[error("cannot {op} `{}`: the filesystem is read-only (put lock files on a writable filesystem)", path.display())]
    ReadOnlyFilesystem {
        /// The failed operation.
        op: Operation,
        /// The lock file.
        path: PathBuf,
    },
    /// The filesystem is full (or out of inodes, or over quota).
    #[error("cannot {op} `{}`: no space left on the filesystem", path.display())]
    NoSpace {
        /// The failed operation.
        op: Operation,
        /// The lock file.
        path: PathBuf,
    },
    /// The filesystem does not support `flock` (some NFS and FUSE mounts).
    #[error(
        "cannot {op} `{}`: the filesystem does not support advisory locks ({source}); use a local filesystem, or a lease (lockfile-etcd) across hosts",
        path.display()
    )]
    LockUnsupported {
        /// The failed operation.
        op: Operation,
        /// The lock file.
        path: PathBuf,
        /// The error the kernel returned (ENOLCK, EOPNOTSUPP, ...).
        source: io::Error,
    },
    /// A symbolic link sits at the lock path. It is refused, never followed, so
    /// the file it points to is never written or truncated.
    #[error("refusing to {op} `{}`: it is a symbolic link; a lock file must be a regular file", path.display())]
    Symlink {
        /// The failed operation.
        op: Operation,
        /// The lock path.
        path: PathBuf,
    },
    /// Something other than a regular file sits at the lock path.
    #[error("refusing to {op} `{}`: it is a {kind}, not a regular file", path.display())]
    NotRegularFile {
        /// The failed operation.
        op: Operation,
        /// The lock path.
        path: PathBuf,
        /// What was found: "directory", "FIFO", "character device", ...
        kind: &'static str,
    },
    /// The lock file holds content that is not ours (a script, data, another
    /// tool's lock or PID file), and the lock was to carry an owner record.
    /// Nothing was written. [`LockOptions::record_optional`] takes such a
    /// lock without a record, leaving the file byte for byte as it is.
    ///
    /// [`LockOptions::record_optional`]: crate::LockOptions::record_optional
    #[error(
        "refusing to write an owner record into `{}`: it holds {size} bytes that are not one of ours (beginning \"{preview}\"); lock it without a record (LockOptions::record_optional), or use a lock file of its own",
        path.display()
    )]
    ForeignContent {
        /// The lock file.
        path: PathBuf,
        /// The file's size in bytes.
        size: u64,
        /// Its first bytes, escaped for printing.
        preview: String,
    },
    /// A beat for a run whose record is no longer in the lock file: the run
    /// ended, or another run holds the lock now. Nothing was changed.
    #[error(
        "refusing to beat `{}` for run {token}: {}; a process left behind by an earlier run must not keep a later run's lock alive",
        path.display(),
        match found {
            Some(other) => format!("its record belongs to run {other}"),
            None => "it holds no unreleased record".to_owned(),
        }
    )]
    NotOurRun {
        /// The lock file.
        path: PathBuf,
        /// The run that asked to beat.
        token: uuid::Uuid,
        /// The run whose record the file holds, if an unreleased one.
        found: Option<uuid::Uuid>,
    },
    /// Any other I/O failure.
    #[error("cannot {op} `{}`: {source}", path.display())]
    Io {
        /// The failed operation.
        op: Operation,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
}

struct DisplayOwner<'a>(Option<&'a OwnerRecord>);

impl fmt::Display for DisplayOwner<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(owner) => owner.fmt(f),
            None => f.write_str("another process (no owner record yet)"),
        }
    }
}

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
        matches!(self, Error::Contended { .. } | Error::Timeout { .. })
    }

    /// The holder's owner record, for [`Error::Contended`] and [`Error::Timeout`].
    pub fn owner(&self) -> Option<&OwnerRecord> {
        match self {
            Error::Contended { owner, .. } | Error::Timeout { owner, .. } => owner.as_deref(),
            _ => None,
        }
    }

    /// The path the error is about.
    pub fn path(&self) -> &Path {
        match self {
            Error::Contended { path, .. }
            | Error::Timeout { path, .. }
            | Error::DirectoryNotFound { path, .. }
            | Error::PermissionDenied { path, .. }
            | Error::ReadOnlyFilesystem { path, .. }
            | Error::NoSpace { path, .. }
            | Error::LockUnsupported { path, .. }
            | Error::Symlink { path, .. }
            | Error::NotRegularFile { path, .. }
            | Error::ForeignContent { path, .. }
            | Error::NotOurRun { path, .. }
            | Error::Io { path, .. } => path,
        }
    }

    /// Classifies an I/O error from `op` on `path` into the most specific variant.
    pub(crate) fn from_io(op: Operation, path: &Path, source: io::Error) -> Error {
        let path_buf = path.to_path_buf();
        match source.raw_os_error() {
            Some(libc::ENOENT) if matches!(op, Operation::Open | Operation::ReadDir) => {
                let dir = match op {
                    Operation::ReadDir => path.to_path_buf(),
                    _ => parent_dir(path).to_path_buf(),
                };
                if op == Operation::Open && dir.is_dir() {
                    // The directory exists after all: the file vanished (or a
                    // dangling component); report the raw error.
                    return Error::Io {
                        op,
                        path: path_buf,
                        source,
                    };
                }
                Error::DirectoryNotFound {
                    op,
                    path: path_buf,
                    dir,
                }
            }
            Some(libc::EACCES | libc::EPERM) => Error::PermissionDenied {
                op,
                hint: permission_hint(op, path),
                euid: rustix::process::geteuid().as_raw(),
                path: path_buf,
            },
            Some(libc::EROFS) => Error::ReadOnlyFilesystem { op, path: path_buf },
            Some(libc::ENOSPC | libc::EDQUOT) => Error::NoSpace { op, path: path_buf },
            Some(libc::ENOLCK | libc::EOPNOTSUPP) => Error::LockUnsupported {
                op,
                path: path_buf,
                source,
            },
            Some(libc::ELOOP) if op == Operation::Open => Error::Symlink { op, path: path_buf },
            Some(libc::EISDIR) => Error::NotRegularFile {
                op,
                path: path_buf,
                kind: "directory",
            },
            _ => Error::Io {
                op,
                path: path_buf,
                source,
            },
        }
    }
}

pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Says who owns what is in the way, because "permission denied" alone sends
/// people guessing (a lock in /tmp created by another user, `fs.protected_regular`,
/// a directory they cannot write).
fn permission_hint(op: Operation, path: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let describe = |what: &str, p: &Path| match std::fs::symlink_metadata(p) {
        Ok(m) => format!(
            "{what} `{}` is owned by uid {} with mode {:o}",
            p.display(),
            m.uid(),
            m.mode() & 0o7777
        ),
        Err(_) => format!("{what} `{}` is not accessible", p.display()),
    };
    match op {
        Operation::ReadDir | Operation::CreateDir => format!(
            "{}; run as a user who can read it, or choose another directory",
            describe("directory", path)
        ),
        _ if path.exists() => format!(
            "{}; run as that user, make the file writable for this user (`chmod`), or choose a lock directory this user owns",
            describe("the file", path)
        ),
        _ => format!(
            "{}; this user cannot create files there: choose a lock directory this user owns (for example lockfile::default_lock_dir(), under ~/.local/state)",
            describe("directory", parent_dir(path))
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_operation_and_the_path() {
        let e = Error::from_io(
            Operation::Write,
            Path::new("/x/y.lock"),
            io::Error::from_raw_os_error(libc::ENOSPC),
        );
        assert_eq!(
            e.to_string(),
            "cannot write owner record to `/x/y.lock`: no space left on the filesystem"
        );
        let e = Error::from_io(
            Operation::Open,
            Path::new("/no/such/dir/y.lock"),
            io::Error::from_raw_os_error(libc::ENOENT),
        );
        assert!(matches!(e, Error::DirectoryNotFound { .. }), "{e:?}");
        assert!(
            e.to_string().contains("`/no/such/dir` does not exist"),
            "{e}"
        );
        let e = Error::from_io(
            Operation::Open,
            Path::new("/proc/y.lock"),
            io::Error::from_raw_os_error(libc::EACCES),
        );
        assert!(e.to_string().contains("permission denied for euid"), "{e}");
        assert_eq!(e.path(), Path::new("/proc/y.lock"));
        let e = Error::from_io(
            Operation::Lock,
            Path::new("/nfs/y.lock"),
            io::Error::from_raw_os_error(libc::ENOLCK),
        );
        assert!(matches!(e, Error::LockUnsupported { .. }));
        assert!(!e.is_contended());
    }
}
