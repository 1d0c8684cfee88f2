//! A waiter's look at one slot: is it free? Read-only, so that the close
//! that ends the look wakes no other waiter (see `crate::slot`).

use std::os::fd::AsFd as _;
use std::path::Path;

use rustix::fs::{FileType, Mode, OFlags};

use crate::sys::{self, LockMode};

/// Whether the slot file at `path` may be free: `false` only when its lock
/// is held. A file that is missing, cannot be opened or is not a regular
/// file is "may be free": the real attempt that follows creates it, or
/// refuses it with the error that names it.
pub(super) fn may_be_free(path: &Path) -> bool {
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let Ok(fd) = rustix::fs::open(path, flags, Mode::empty()) else {
        return true;
    };
    // Never a lock on what is not a regular file (a FIFO, a device).
    match rustix::fs::fstat(&fd) {
        Ok(stat) if FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile => {}
        _ => return true,
    }
    match sys::try_lock(fd.as_fd(), LockMode::Exclusive) {
        Ok(true) => {
            let _ = sys::unlock(fd.as_fd());
            true
        }
        Ok(false) => false,
        Err(_) => true,
    }
}
