//! Between [`std::io::Error`] and this crate's: an I/O failure classified
//! into the most specific variant, explained by a look at the path, and an
//! error handed back to code that speaks `io::Result`.

use std::io;
use std::path::Path;

use super::operation::Operation;
use super::variants::Error;
use crate::paths::parent_dir;

impl Error {
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
            Some(libc::ENOTDIR) => Error::NotADirectory {
                op,
                not_dir: first_non_directory(path),
                path: path_buf,
                source,
            },
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
            Error::Timeout { .. }
            | Error::SlotsHeld {
                waited: Some(_), ..
            } => io::ErrorKind::TimedOut,
            Error::SlotsHeld { .. } => io::ErrorKind::WouldBlock,
            Error::DirectoryNotFound { .. } => io::ErrorKind::NotFound,
            Error::NotADirectory { .. } => io::ErrorKind::NotADirectory,
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

/// The first component of `path` that exists and is not a directory: what
/// ENOTDIR is about. Followed as the kernel follows it (`metadata`), from
/// the root down; the path's parent when none is found (the path changed
/// since the failure).
fn first_non_directory(path: &Path) -> std::path::PathBuf {
    let mut ancestors: Vec<&Path> = path.ancestors().skip(1).collect();
    ancestors.reverse();
    ancestors
        .into_iter()
        .chain([path])
        .find(|p| !p.as_os_str().is_empty() && std::fs::metadata(p).is_ok_and(|m| !m.is_dir()))
        .unwrap_or_else(|| parent_dir(path))
        .to_path_buf()
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

/// Says who owns what is in the way.
fn permission_hint(op: Operation, path: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let describe = |what: &str, p: &Path| match std::fs::symlink_metadata(p) {
        Ok(m) => format!(
            "{what} `{}` is owned by uid {} with mode {:o}",
            crate::text::path(p),
            m.uid(),
            m.mode() & 0o7777
        ),
        Err(_) => format!("{what} `{}` is not accessible", crate::text::path(p)),
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
