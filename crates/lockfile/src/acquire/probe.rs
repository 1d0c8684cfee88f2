//! A waiter's look at one lock file (a slot's, or an async waiter's): is it
//! free? Read-only, so that the close that ends the look wakes no other
//! waiter (see `crate::slot` and `crate::waiter`).

use std::io;
use std::os::fd::AsFd as _;
use std::path::Path;

use rustix::fs::{FileType, Mode, OFlags};

use crate::sys::{self, LockMode};

/// What a look found at a lock file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Probe {
    /// Missing, or a regular file whose lock a `mode` request would get
    /// now: worth a try.
    Free,
    /// A regular file whose lock is held against a `mode` request.
    Held,
    /// Anything else: not a regular file, not ours to read, or a lock the
    /// filesystem refuses through a read-only descriptor (NFSv4). Tried
    /// only on the waiter's sweeps, whose attempt names what is wrong: a
    /// try on every wake-up could wake the waiter itself, its own failed
    /// attempt's close being an event.
    Unknown,
}

/// Looks at the lock file at `path`, for a lock in `mode`, without
/// creating, writing or waiting.
pub(crate) fn probe(path: &Path, mode: LockMode) -> Probe {
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd = match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(e) if io::Error::from(e).kind() == io::ErrorKind::NotFound => return Probe::Free,
        Err(_) => return Probe::Unknown,
    };
    // Never a lock on what is not a regular file (a FIFO, a device).
    match rustix::fs::fstat(&fd) {
        Ok(stat) if FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile => {}
        _ => return Probe::Unknown,
    }
    match sys::try_lock(fd.as_fd(), mode) {
        Ok(true) => {
            let _ = sys::unlock(fd.as_fd());
            Probe::Free
        }
        Ok(false) => Probe::Held,
        Err(_) => Probe::Unknown,
    }
}
