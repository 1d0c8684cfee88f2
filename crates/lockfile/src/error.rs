//! The crate's one error type. Every message names the operation and the path.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::OwnerRecord;
pub use crate::evict::refused::EvictionRefused;

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
    #[error(
        "`{}` is locked by {}{}",
        path.display(),
        OwnerRecord::describe(owner.as_deref()),
        NotEvicted(not_evicted.as_deref())
    )]
    Contended {
        /// The lock file.
        path: PathBuf,
        /// The holder's owner record, when the file held a readable one.
        /// `None` when the holders hold the lock shared: they keep no record,
        /// and one left in the file is an earlier holder's.
        owner: Option<Box<OwnerRecord>>,
        /// Why the holder was not evicted, when
        /// [`LockOptions::evict_after`](crate::LockOptions::evict_after) asked.
        not_evicted: Option<Box<EvictionRefused>>,
    },
    /// A bounded wait ended before the lock came free.
    #[error(
        "gave up waiting for `{}` after {}: it is locked by {}{}",
        path.display(),
        humantime::format_duration(*waited),
        OwnerRecord::describe(owner.as_deref()),
        NotEvicted(not_evicted.as_deref())
    )]
    Timeout {
        /// The lock file.
        path: PathBuf,
        /// How long the call waited.
        waited: Duration,
        /// The holder's owner record at the moment the wait ended, when
        /// readable (`None` against shared holders, as for `Contended`).
        owner: Option<Box<OwnerRecord>>,
        /// Why the holder was not evicted, when
        /// [`LockOptions::evict_after`](crate::LockOptions::evict_after) asked:
        /// the last judgement of the wait.
        not_evicted: Option<Box<EvictionRefused>>,
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
        /// The error the kernel returned (ENOENT).
        source: io::Error,
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
        /// The error the kernel returned (EACCES, EPERM), when it was one.
        source: Option<io::Error>,
    },
    /// The lock file lives on a read-only filesystem.
    #[error("cannot {op} `{}`: the filesystem is read-only (put lock files on a writable filesystem)", path.display())]
    ReadOnlyFilesystem {
        /// The failed operation.
        op: Operation,
        /// The lock file.
        path: PathBuf,
        /// The error the kernel returned (EROFS).
        source: io::Error,
    },
    /// The filesystem is full (or out of inodes, or over quota).
    #[error("cannot {op} `{}`: no space left on the filesystem", path.display())]
    NoSpace {
        /// The failed operation.
        op: Operation,
        /// The lock file.
        path: PathBuf,
        /// The error the kernel returned (ENOSPC, EDQUOT).
        source: io::Error,
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
        /// The error the kernel returned (ELOOP).
        source: io::Error,
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
    /// The lock file is planted: it sits in a sticky directory that its
    /// group or everyone may write, and neither this process's effective
    /// uid nor the directory's owner owns it (the kernel's
    /// `fs.protected_regular` rule). Its owner can unlink it while it is
    /// held, rewrite its record and set its times, so a lock on it excludes
    /// nobody. Nothing was locked or written.
    #[error(
        "refusing to lock `{}`: it is owned by uid {owner_uid}, in a sticky directory that others may write and that uid {dir_owner_uid} owns, so its owner can unlink or rewrite it at will and a lock on it excludes nobody (the fs.protected_regular rule); use a lock directory only trusted users may write",
        path.display()
    )]
    PlantedFile {
        /// The lock file.
        path: PathBuf,
        /// Its owner.
        owner_uid: u32,
        /// The owner of its directory.
        dir_owner_uid: u32,
    },
    /// The owner record would be longer than any record may be (64 KiB): a
    /// file that long is someone else's, so a record must never grow to it.
    /// Only a very long job name gets there. Refused before the file is
    /// opened, so nothing was created, locked or written.
    #[error(
        "refusing to {op} `{}`: the record would take {size} bytes, more than the {max} an owner record may; shorten the job name ({job_len} bytes)",
        path.display()
    )]
    RecordTooLarge {
        /// What was refused: [`Operation::Write`] of the record.
        op: Operation,
        /// The lock file.
        path: PathBuf,
        /// How long the record would be, at least.
        size: usize,
        /// The longest an owner record may be.
        max: usize,
        /// The job name's length in bytes.
        job_len: usize,
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
    /// The run's tick (`LockOptions::claim_tick`) was used up by a run that
    /// finished: this run must not start. Not a failure: a skip.
    #[error(
        "tick {} of `{}` already ran{} ({})",
        crate::rfc3339::display(*tick),
        path.display(),
        claim.as_ref().map(|c| format!(" on host {:?}", c.host)).unwrap_or_default(),
        run.outcome
    )]
    TickUsed {
        /// The lock file.
        path: PathBuf,
        /// The tick.
        tick: std::time::SystemTime,
        /// The run that used it up.
        run: Box<crate::LastRun>,
        /// Its claim, naming the host and pid that ran it, when kept.
        claim: Option<Box<crate::Claim>>,
    },
    /// The lock came later than half a period after the run's tick
    /// (`LockOptions::claim_tick`): the run belongs to no tick any more.
    #[error(
        "the lock on `{}` came too late for tick {}: more than half a period after it",
        path.display(),
        crate::rfc3339::display(*tick)
    )]
    TooLate {
        /// The lock file.
        path: PathBuf,
        /// The tick it was too late for.
        tick: std::time::SystemTime,
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

/// Why a holder was not evicted, after the holder: nothing for a plain
/// conflict.
struct NotEvicted<'a>(Option<&'a EvictionRefused>);

impl fmt::Display for NotEvicted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(why) => write!(f, "; not evicted: {why}"),
            None => Ok(()),
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
            | Error::Io { path, .. } => path,
        }
    }

    /// Classifies an I/O error from `op` on `path` into the most specific
    /// variant, from the error alone: it does no I/O of its own. (An open for
    /// a lock creates the file, so ENOENT there means a missing directory.)
    /// [`explain`](Error::explain) adds what a look at the path can tell.
    pub(crate) fn from_io(op: Operation, path: &Path, source: io::Error) -> Error {
        let path_buf = path.to_path_buf();
        match source.raw_os_error() {
            Some(libc::ENOENT) if matches!(op, Operation::Open | Operation::ReadDir) => {
                let dir = match op {
                    Operation::ReadDir => path.to_path_buf(),
                    _ => parent_dir(path).to_path_buf(),
                };
                Error::DirectoryNotFound {
                    op,
                    path: path_buf,
                    dir,
                    source,
                }
            }
            Some(libc::EACCES | libc::EPERM) => Error::PermissionDenied {
                op,
                hint: generic_permission_hint(op).to_owned(),
                euid: rustix::process::geteuid().as_raw(),
                path: path_buf,
                source: Some(source),
            },
            Some(libc::EROFS) => Error::ReadOnlyFilesystem {
                op,
                path: path_buf,
                source,
            },
            Some(libc::ENOSPC | libc::EDQUOT) => Error::NoSpace {
                op,
                path: path_buf,
                source,
            },
            Some(libc::ENOLCK | libc::EOPNOTSUPP) => Error::LockUnsupported {
                op,
                path: path_buf,
                source,
            },
            Some(libc::ELOOP) if matches!(op, Operation::Open | Operation::Read) => {
                Error::Symlink {
                    op,
                    path: path_buf,
                    source,
                }
            }
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

    /// Adds what a look at the path tells: for a refused permission, who owns
    /// what is in the way, with what mode. "Permission denied" alone sends
    /// people guessing (a lock in /tmp created by another user,
    /// `fs.protected_regular`, a directory they cannot write). This stats the
    /// path; callers on an error path that a human reads call it.
    pub(crate) fn explain(self) -> Error {
        match self {
            Error::PermissionDenied {
                op,
                path,
                euid,
                source: source @ Some(_),
                ..
            } => Error::PermissionDenied {
                hint: permission_hint(op, &path),
                op,
                path,
                euid,
                source,
            },
            other => other,
        }
    }
}

impl From<Error> for io::Error {
    /// The closest `io::ErrorKind`, with the whole error (path, operation and
    /// cause) as its message and source: for code that speaks `io::Result`.
    fn from(e: Error) -> io::Error {
        let kind = match &e {
            Error::Contended { .. } | Error::TickUsed { .. } | Error::TooLate { .. } => {
                io::ErrorKind::WouldBlock
            }
            Error::Timeout { .. } => io::ErrorKind::TimedOut,
            Error::DirectoryNotFound { .. } => io::ErrorKind::NotFound,
            Error::PermissionDenied { .. }
            | Error::NotOurRun { .. }
            | Error::PlantedFile { .. } => io::ErrorKind::PermissionDenied,
            Error::ReadOnlyFilesystem { .. } => io::ErrorKind::ReadOnlyFilesystem,
            Error::NoSpace { .. } => io::ErrorKind::StorageFull,
            Error::LockUnsupported { .. } => io::ErrorKind::Unsupported,
            Error::Symlink { .. }
            | Error::NotRegularFile { .. }
            | Error::ForeignContent { .. }
            | Error::RecordTooLarge { .. } => io::ErrorKind::InvalidInput,
            Error::Io { source, .. } => source.kind(),
        };
        io::Error::new(kind, e)
    }
}

/// What to do about a refused permission, said without looking.
fn generic_permission_hint(op: Operation) -> &'static str {
    match op {
        Operation::ReadDir | Operation::CreateDir => {
            "run as a user who can read it, or choose another directory"
        }
        _ => {
            "run as the file's owner, make it writable for this user, or choose a lock directory this user owns"
        }
    }
}

pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Says who owns what is in the way.
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

    #[test]
    fn every_error_from_the_kernel_keeps_it_as_its_source() {
        use std::error::Error as _;
        for errno in [
            libc::ENOENT,
            libc::EACCES,
            libc::EROFS,
            libc::ENOSPC,
            libc::ENOLCK,
            libc::ELOOP,
            libc::EIO,
        ] {
            let e = Error::from_io(
                Operation::Open,
                Path::new("/x/y.lock"),
                io::Error::from_raw_os_error(errno),
            );
            let source = e.source().and_then(|s| s.downcast_ref::<io::Error>());
            assert_eq!(
                source.and_then(io::Error::raw_os_error),
                Some(errno),
                "{e:?}"
            );
        }
    }

    #[test]
    fn an_error_converts_into_an_io_error_of_the_closest_kind() {
        let e = Error::from_io(
            Operation::Write,
            Path::new("/x/y.lock"),
            io::Error::from_raw_os_error(libc::ENOSPC),
        );
        let message = e.to_string();
        let io: io::Error = e.into();
        assert_eq!(io.kind(), io::ErrorKind::StorageFull);
        assert_eq!(io.to_string(), message);
        let contended: io::Error = Error::Contended {
            path: "/x/y.lock".into(),
            owner: None,
            not_evicted: None,
        }
        .into();
        assert_eq!(contended.kind(), io::ErrorKind::WouldBlock);
    }
}
