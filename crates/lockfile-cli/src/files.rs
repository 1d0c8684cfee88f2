//! Opening the files the command keeps beside the lock: a metrics file, its
//! side lock, temporary files, `inspect --output`.
//!
//! They live in directories that others may write (a shared textfile
//! directory, say), so any name there may have been planted: a FIFO, where
//! an open waits for a writer that never comes; a symlink to `/dev/zero`,
//! which a read never finishes; a directory or a device. Each open here
//! follows no symlink in the last component, never blocks, and is accepted
//! only for a regular file (checked on the open descriptor, so a swap after
//! a check cannot fool it); each read stops at a bound.
//!
//! The lock file itself is the library's business, and is not opened here.

use std::fmt;
use std::fs::{File, FileType, Metadata, OpenOptions};
use std::io::{self, Read as _};
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

/// What a name is when it is not a regular file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Directory,
    Fifo,
    Symlink,
    CharDevice,
    BlockDevice,
    Socket,
    /// A type this platform has and we do not name.
    Other,
}

impl Kind {
    /// `None` for a regular file.
    fn of(ty: FileType) -> Option<Kind> {
        if ty.is_file() {
            None
        } else if ty.is_dir() {
            Some(Kind::Directory)
        } else if ty.is_fifo() {
            Some(Kind::Fifo)
        } else if ty.is_symlink() {
            Some(Kind::Symlink)
        } else if ty.is_char_device() {
            Some(Kind::CharDevice)
        } else if ty.is_block_device() {
            Some(Kind::BlockDevice)
        } else if ty.is_socket() {
            Some(Kind::Socket)
        } else {
            Some(Kind::Other)
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Directory => "a directory",
            Kind::Fifo => "a FIFO",
            Kind::Symlink => "a symbolic link",
            Kind::CharDevice => "a character device",
            Kind::BlockDevice => "a block device",
            Kind::Socket => "a socket",
            Kind::Other => "an unknown kind of file",
        })
    }
}

/// Why a file beside the lock could not be used.
#[derive(Debug)]
pub(crate) enum FileError {
    /// The name is not a regular file: it is neither followed, read nor
    /// replaced, and stays as it was.
    NotRegular {
        op: &'static str,
        path: PathBuf,
        kind: Kind,
    },
    /// The file is larger than anything we write: reading it whole would
    /// be unbounded.
    TooLarge { path: PathBuf, limit: u64 },
    /// A system call failed.
    Io {
        op: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

impl FileError {
    fn io(op: &'static str, path: &Path, source: io::Error) -> FileError {
        FileError::Io {
            op,
            path: path.to_owned(),
            source,
        }
    }

    /// Whether the name did not exist.
    pub(crate) fn is_not_found(&self) -> bool {
        matches!(self, FileError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }

    pub(crate) fn kind(&self) -> io::ErrorKind {
        match self {
            FileError::NotRegular { .. } => io::ErrorKind::InvalidInput,
            FileError::TooLarge { .. } => io::ErrorKind::FileTooLarge,
            FileError::Io { source, .. } => source.kind(),
        }
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileError::NotRegular { op, path, kind } => write!(
                f,
                "cannot {op} `{}`: it is {kind}, not a regular file",
                crate::term::path(path)
            ),
            FileError::TooLarge { path, limit } => write!(
                f,
                "cannot read `{}`: it is larger than {limit} bytes, more than we ever write",
                crate::term::path(path)
            ),
            FileError::Io { op, path, source } => {
                write!(f, "cannot {op} `{}`: {source}", crate::term::path(path))
            }
        }
    }
}

impl std::error::Error for FileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FileError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<FileError> for io::Error {
    fn from(e: FileError) -> io::Error {
        io::Error::new(e.kind(), e)
    }
}

/// Opens `path` with `options`, following no symlink in its last component,
/// without blocking (a FIFO would otherwise wait for its other end), closed
/// on exec; and keeps it only if it is a regular file.
///
/// # Errors
///
/// [`FileError::NotRegular`] naming what the name is, or the failed open.
pub(crate) fn open_regular(
    path: &Path,
    options: &mut OpenOptions,
    op: &'static str,
) -> Result<File, FileError> {
    let file = options
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            // ELOOP for a symlink, EISDIR for a directory opened to write,
            // ENXIO for a FIFO nobody reads: say what the name is instead.
            match (e.kind(), std::fs::symlink_metadata(path)) {
                (io::ErrorKind::NotFound, _) => FileError::io(op, path, e),
                (_, Ok(meta)) => match Kind::of(meta.file_type()) {
                    Some(kind) => FileError::NotRegular {
                        op,
                        path: path.to_owned(),
                        kind,
                    },
                    None => FileError::io(op, path, e),
                },
                (_, Err(_)) => FileError::io(op, path, e),
            }
        })?;
    let meta = file
        .metadata()
        .map_err(|e| FileError::io("examine", path, e))?;
    match Kind::of(meta.file_type()) {
        None => Ok(file),
        Some(kind) => Err(FileError::NotRegular {
            op,
            path: path.to_owned(),
            kind,
        }),
    }
}

/// The contents of the regular file `path` and its metadata (from the
/// descriptor read), or `None` if there is no such file. At most `limit`
/// bytes are ever read.
///
/// # Errors
///
/// Those of [`open_regular`], and [`FileError::TooLarge`] for a file of
/// more than `limit` bytes, even one that grew while it was read.
pub(crate) fn read_bounded(
    path: &Path,
    limit: u64,
) -> Result<Option<(Vec<u8>, Metadata)>, FileError> {
    let file = match open_regular(path, OpenOptions::new().read(true), "read") {
        Ok(file) => file,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = file
        .metadata()
        .map_err(|e| FileError::io("examine", path, e))?;
    let too_large = || FileError::TooLarge {
        path: path.to_owned(),
        limit,
    };
    if meta.len() > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| FileError::io("read", path, e))?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(Some((bytes, meta)))
}

/// Creates `path`, which must not exist, for writing with `mode` (before
/// the umask). An existing name of any kind fails the open, so nothing
/// planted there is ever followed or written.
///
/// # Errors
///
/// [`FileError::NotRegular`] if the name exists and is not a regular file;
/// `AlreadyExists` if it is one; or the failed open.
pub(crate) fn create_new(path: &Path, mode: u32) -> Result<File, FileError> {
    open_regular(
        path,
        OpenOptions::new().write(true).create_new(true).mode(mode),
        "create",
    )
}

/// What `path` is, if it exists and is not a regular file; the name itself
/// is examined, never what a symlink points to.
///
/// # Errors
///
/// A failure to examine it, other than its absence.
pub(crate) fn not_regular(path: &Path) -> Result<Option<Kind>, FileError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => Ok(Kind::of(meta.file_type())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(FileError::io("examine", path, e)),
    }
}

/// Fails unless `path` is absent or a regular file: the check before a
/// rename replaces it, so that what someone planted there stays.
///
/// # Errors
///
/// [`FileError::NotRegular`], or a failure to examine the name.
pub(crate) fn replaceable(path: &Path) -> Result<(), FileError> {
    match not_regular(path)? {
        None => Ok(()),
        Some(kind) => Err(FileError::NotRegular {
            op: "replace",
            path: path.to_owned(),
            kind,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::os::unix::fs::symlink;

    fn fifo(path: &Path) {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
    }

    #[test]
    fn only_a_regular_file_is_read_and_never_past_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let path = |n: &str| dir.path().join(n);
        std::fs::write(path("file"), "abc").unwrap();
        let (bytes, meta) = read_bounded(&path("file"), 3).unwrap().unwrap();
        assert_eq!((bytes.as_slice(), meta.len()), (&b"abc"[..], 3));
        assert!(matches!(
            read_bounded(&path("file"), 2),
            Err(FileError::TooLarge { limit: 2, .. })
        ));
        assert!(read_bounded(&path("none"), 2).unwrap().is_none());

        fifo(&path("fifo"));
        symlink("/dev/zero", path("zero")).unwrap();
        std::fs::create_dir(path("dir")).unwrap();
        for (name, kind) in [
            ("fifo", Kind::Fifo),
            ("zero", Kind::Symlink),
            ("dir", Kind::Directory),
        ] {
            let err = read_bounded(&path(name), 1 << 20).unwrap_err();
            assert!(
                matches!(&err, FileError::NotRegular { kind: k, .. } if *k == kind),
                "{name}: {err}"
            );
            assert!(err.to_string().contains(name), "{err}");
            assert_eq!(not_regular(&path(name)).unwrap(), Some(kind));
            assert!(replaceable(&path(name)).is_err());
        }
        let err = read_bounded(Path::new("/dev/null"), 1).unwrap_err();
        assert!(
            matches!(
                err,
                FileError::NotRegular {
                    kind: Kind::CharDevice,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn create_new_opens_nothing_that_exists_and_says_what_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fifo");
        fifo(&path);
        let err = create_new(&path, 0o644).unwrap_err();
        assert!(
            matches!(
                err,
                FileError::NotRegular {
                    kind: Kind::Fifo,
                    ..
                }
            ),
            "{err}"
        );
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let err = create_new(&file, 0o644).unwrap_err();
        assert!(
            matches!(
                err,
                FileError::Io { ref source, .. } if source.kind() == io::ErrorKind::AlreadyExists
            ),
            "{err}"
        );
        assert!(create_new(&dir.path().join("new"), 0o644).is_ok());
    }
}
