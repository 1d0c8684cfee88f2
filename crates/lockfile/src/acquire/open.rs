//! Opening a lock file: never through a symlink, never blocking on a FIFO,
//! read-only when the file may not be written and the options allow a lock
//! without a record.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::Path;

use crate::error::Operation;
use crate::sys;
use crate::trust::{self, DirFacts, Planted};
use crate::{Error, LockOptions, Result};

/// Where a lock file is opened and looked up: `name` in the directory
/// `dir`. The current directory and the whole path, unless the directory
/// was pinned (for a removal on release, which must unlink in the very
/// directory the file was opened in).
#[derive(Clone, Copy)]
pub(super) struct At<'a> {
    pub(super) dir: BorrowedFd<'a>,
    pub(super) name: &'a Path,
}

impl At<'_> {
    /// What `name` refers to now, without following a symlink.
    pub(super) fn identity(self) -> io::Result<sys::Identity> {
        sys::identity_in(self.dir, self.name)
    }
}

/// Pins the directory of the lock file `itself` (`path` as given), for a
/// removal on release: the file is opened by its name in the directory
/// opened here, and the guard unlinks it there. `None` for a path without a
/// file name (`..`), which cannot name a lock file of ours.
pub(super) fn pin_directory<'a>(
    itself: &'a Path,
    path: &Path,
) -> Result<Option<(OwnedFd, &'a OsStr)>> {
    let Some(name) = itself.file_name() else {
        return Ok(None);
    };
    let dir = sys::open_dir_pinned(crate::paths::parent_dir(itself))
        .map_err(|e| Error::from_io(Operation::Open, path, e).explain())?;
    Ok(Some((dir, name)))
}

/// How a lock file was opened.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Access {
    ReadWrite,
    ReadOnly,
}

/// Opens (creating if needed) the lock file without following a symlink and
/// without blocking on a FIFO. What it opened is judged by [`check_kind`].
///
/// The file is opened for reading and writing, so that a record can be
/// written, unless `read_only` asks otherwise or the lock is shared (which
/// writes nothing). A file that may not be written (its mode, a read-only
/// mount, a running executable) and a directory are opened read-only when
/// the options allow a lock without a record, as flock(1) opens every file.
pub(super) fn open_lock_file(
    at: At<'_>,
    itself: &Path,
    path: &Path,
    opts: &LockOptions,
    read_only: bool,
) -> Result<(File, Access)> {
    let open = |access: Access, create: bool| {
        sys::open_noatime(at.name, |name, extra| {
            use rustix::fs::OFlags;
            // O_NONBLOCK: opening a FIFO must not hang.
            let mut flags = OFlags::NOFOLLOW
                | OFlags::NONBLOCK
                | OFlags::NOCTTY
                | OFlags::CLOEXEC
                | OFlags::from_bits_retain(extra as _);
            flags |= match access {
                Access::ReadWrite => OFlags::RDWR,
                Access::ReadOnly => OFlags::RDONLY,
            };
            if create {
                flags |= OFlags::CREATE;
            }
            let mode = rustix::fs::Mode::from_raw_mode(opts.mode as rustix::fs::RawMode);
            rustix::fs::openat(at.dir, name, flags, mode)
                .map(File::from)
                .map_err(io::Error::from)
        })
    };
    // Opening without creating: a file we may not write, or a directory
    // (Linux refuses O_CREAT on one). When that fails too (not even
    // readable, or missing and not creatable) the first refusal says why.
    let read_only_after = |first: io::Error| {
        open(Access::ReadOnly, false)
            .map(|file| (file, Access::ReadOnly))
            .map_err(|_| first)
    };
    let opened = if opts.shared && !read_only {
        // A shared lock writes nothing, so reading is all it needs; like
        // flock(1), it creates a missing file.
        match open(Access::ReadOnly, true) {
            Ok(file) => Ok((file, Access::ReadOnly)),
            Err(e) if may_not_write(&e) || is_a_directory(&e) => read_only_after(e),
            Err(e) => Err(e),
        }
    } else if read_only {
        open(Access::ReadOnly, false).map(|file| (file, Access::ReadOnly))
    } else {
        match open(Access::ReadWrite, true) {
            Ok(file) => Ok((file, Access::ReadWrite)),
            Err(e) if opts.record_optional && (may_not_write(&e) || is_a_directory(&e)) => {
                read_only_after(e)
            }
            Err(e) => Err(e),
        }
    };
    opened.map_err(|e| match planted_at(itself) {
        // The kernel's own protected_regular refused it: say why in our words.
        Some(planted) if may_not_write(&e) => planted_error(path, planted),
        _ => Error::from_io(Operation::Open, path, e).explain(),
    })
}

/// Refuses a planted lock file (see [`trust::planted`]), before anything
/// waits on its lock or writes into it. The directory is looked at only
/// when the file is not the caller's own: the common case costs nothing but
/// the owner that the identity already carries.
pub(super) fn refuse_planted(path: &Path, itself: &Path, id: &sys::Identity) -> Result<()> {
    let euid = trust::euid();
    if !id.is_regular() || id.uid == euid {
        return Ok(());
    }
    let dir = DirFacts::containing(itself).map_err(|e| Error::from_io(Operation::Stat, path, e))?;
    match trust::planted(id.uid, dir, euid) {
        Some(planted) => Err(planted_error(path, planted)),
        None => Ok(()),
    }
}

/// Whether the regular file at `itself` (no symlink followed) is planted.
fn planted_at(itself: &Path) -> Option<Planted> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(itself).ok()?;
    if !meta.file_type().is_file() {
        return None;
    }
    trust::planted(
        meta.uid(),
        DirFacts::containing(itself).ok()?,
        trust::euid(),
    )
}

fn planted_error(path: &Path, planted: Planted) -> Error {
    Error::PlantedFile {
        path: path.to_path_buf(),
        owner_uid: planted.owner_uid,
        dir_owner_uid: planted.dir_owner_uid,
    }
}

/// Refuses to lock anything but a regular file, or a directory when the
/// options allow a lock without a record (and `dir/` asks for one). Judged
/// from the stat that the lock takes anyway, so that it costs no syscall of
/// its own.
pub(super) fn check_kind(
    path: &Path,
    opts: &LockOptions,
    names_dir: bool,
    id: &sys::Identity,
) -> Result<()> {
    if names_dir && !id.is_dir() {
        let not_a_dir = io::Error::from_raw_os_error(libc::ENOTDIR);
        return Err(Error::from_io(Operation::Open, path, not_a_dir));
    }
    if id.is_regular() || (id.is_dir() && opts.record_optional) {
        return Ok(());
    }
    Err(Error::NotRegularFile {
        op: Operation::Open,
        path: path.to_path_buf(),
        kind: sys::file_kind(id.kind),
    })
}

/// Whether opening for writing failed only because writing is not allowed.
pub(crate) fn may_not_write(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EACCES | libc::EPERM | libc::EROFS | libc::ETXTBSY)
    )
}

/// Whether an open failed because the path is a directory, which may not be
/// opened for writing or with `O_CREAT`.
fn is_a_directory(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EISDIR)
}
