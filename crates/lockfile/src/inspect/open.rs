//! Opening lock files and directories for a look that changes nothing.

use std::fs::File;
use std::io;
use std::path::Path;

use crate::error::Operation;
use crate::{Error, Result, sys};

/// A `*.lock` entry of a directory: its path, as its report names it, and
/// where its name starts in that path, to open it by.
pub(super) struct LockFileEntry {
    pub(super) path: std::path::PathBuf,
    name_at: usize,
    /// The name's first 16 bytes, zero-padded, as one big-endian number:
    /// ordering by it orders by name as far as it goes (a name holds no NUL,
    /// so the padding sorts a shorter name first, as bytes do), and a sort
    /// of many files then compares whole names only on a tie.
    order_key: u128,
}

impl LockFileEntry {
    pub(super) fn name(&self) -> &Path {
        use std::os::unix::ffi::OsStrExt;
        Path::new(std::ffi::OsStr::from_bytes(
            &self.path.as_os_str().as_bytes()[self.name_at..],
        ))
    }
}

/// The `*.lock` entries of the open directory `dir_fd`, sorted by name.
/// Listed through the descriptor the files are then opened from, so that a
/// directory renamed or replaced meanwhile cannot mix two listings. Each
/// path is built once, here, for the report that names it.
pub(super) fn lock_files(dir: &Path, dir_fd: &File) -> Result<Vec<LockFileEntry>> {
    use std::os::unix::ffi::OsStrExt;
    let read_err =
        |e: rustix::io::Errno| Error::from_io(Operation::ReadDir, dir, e.into()).explain();
    let mut entries = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir_fd).map_err(read_err)? {
        let entry = entry.map_err(read_err)?;
        let name = entry.file_name().to_bytes();
        if name.ends_with(b".lock") {
            let path = dir.join(std::ffi::OsStr::from_bytes(name));
            let name_at = path.as_os_str().len() - name.len();
            let mut key = [0; 16];
            let prefix = &name[..name.len().min(16)];
            key[..prefix.len()].copy_from_slice(prefix);
            entries.push(LockFileEntry {
                path,
                name_at,
                order_key: u128::from_be_bytes(key),
            });
        }
    }
    entries.sort_unstable_by(|a, b| {
        a.order_key
            .cmp(&b.order_key)
            .then_with(|| a.name().as_os_str().cmp(b.name().as_os_str()))
    });
    Ok(entries)
}

/// Opens a directory to list it, and to look at its own lock.
pub(crate) fn open_dir(dir: &Path) -> Result<File> {
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
pub(crate) fn open_for_inspect_at(dir: impl rustix::fd::AsFd, path: &Path) -> io::Result<File> {
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

/// Opens the lock file at `path` for an inspection: `None` when there is
/// none. Never what a symlink named `link/` points to; and `dir/` names a
/// directory, as the kernel reads it.
pub(super) fn open_one(path: &Path) -> Result<Option<File>> {
    let itself = crate::sys::without_trailing_slash(path);
    let names_dir = matches!(itself, std::borrow::Cow::Owned(_));
    match open_for_inspect(&itself) {
        Ok(file) if names_dir && !file.metadata().is_ok_and(|m| m.is_dir()) => Err(open_error(
            path,
            io::Error::from_raw_os_error(libc::ENOTDIR),
        )),
        Ok(file) => Ok(Some(file)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(open_error(path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The listing's order is the names' byte order, whether names differ
    /// within their first 16 bytes, after them, or are prefixes of others.
    #[test]
    fn lock_files_are_listed_in_the_byte_order_of_their_names() {
        let dir = tempfile::tempdir().unwrap();
        let mut names = vec![
            "a.lock",
            "a.lock.lock",
            "b.lock",
            "backup-nightly-2.lock",
            "backup-nightly-10.lock",
            "backup-nightly.lock",
            "backup-nightly-1.lock",
            "backup-nightly-1a.lock",
            "Z.lock",
            "\u{e9}t\u{e9}.lock",
            "0123456789abcdef.lock",
            "0123456789abcdef0.lock",
            "0123456789abcde.lock",
        ];
        for name in &names {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        std::fs::write(dir.path().join("not-a-lock.txt"), "").unwrap();
        let dir_fd = open_dir(dir.path()).unwrap();
        let listed: Vec<String> = lock_files(dir.path(), &dir_fd)
            .unwrap()
            .iter()
            .map(|entry| {
                assert_eq!(entry.path, dir.path().join(entry.name()));
                entry.name().to_str().unwrap().to_owned()
            })
            .collect();
        names.sort();
        assert_eq!(listed, names);
    }
}
