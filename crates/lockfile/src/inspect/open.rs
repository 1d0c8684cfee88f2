//! Opening lock files and directories for a look that changes nothing.

use std::fs::File;
use std::io;
use std::path::Path;

use crate::error::Operation;
use crate::{Error, Result, sys};

/// The names of the `*.lock` entries of the open directory `dir_fd`, sorted.
/// Listed through the descriptor the files are then opened from, so that a
/// directory renamed or replaced meanwhile cannot mix two listings.
pub(super) fn lock_file_names(dir: &Path, dir_fd: &File) -> Result<Vec<std::ffi::OsString>> {
    use std::os::unix::ffi::OsStringExt;
    let read_err =
        |e: rustix::io::Errno| Error::from_io(Operation::ReadDir, dir, e.into()).explain();
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir_fd).map_err(read_err)? {
        let entry = entry.map_err(read_err)?;
        let name = entry.file_name().to_bytes();
        if name.ends_with(b".lock") {
            names.push(std::ffi::OsString::from_vec(name.to_owned()));
        }
    }
    names.sort();
    Ok(names)
}

/// Opens a directory to list it, and to look at its own lock.
pub(super) fn open_dir(dir: &Path) -> Result<File> {
    rustix::fs::open(
        dir,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map(File::from)
    .map_err(|e| Error::from_io(Operation::ReadDir, dir, e.into()).explain())
}

fn inspect_flags() -> rustix::fs::OFlags {
    use rustix::fs::OFlags;
    // Never follow a symlink, never hang on a FIFO, never adopt a terminal.
    OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC
}

pub(crate) fn open_for_inspect(path: &Path) -> io::Result<File> {
    open_for_inspect_at(rustix::fs::CWD, path)
}

/// Opens `path` (relative to `dir`) read-only, for a look that changes
/// nothing: no symlink followed, no FIFO waited on, no access time updated.
pub(super) fn open_for_inspect_at(dir: impl rustix::fd::AsFd, path: &Path) -> io::Result<File> {
    use rustix::fs::OFlags;
    sys::open_noatime(path, |path, extra| {
        rustix::fs::openat(
            &dir,
            path,
            OFlags::RDONLY | inspect_flags() | OFlags::from_bits_retain(extra as _),
            rustix::fs::Mode::empty(),
        )
        .map(File::from)
        .map_err(io::Error::from)
    })
}

pub(super) fn open_error(path: &Path, e: io::Error) -> Error {
    Error::from_io(Operation::Read, path, e).explain()
}
