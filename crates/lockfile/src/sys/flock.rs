//! The kernel lock itself: `flock(2)` in either mode, waited for or not.

use std::io;
use std::os::fd::BorrowedFd;

/// The two kinds of `flock(2)` lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LockMode {
    /// `LOCK_EX`: one open file holds it, and nobody else.
    Exclusive,
    /// `LOCK_SH`: any number of open files hold it together.
    Shared,
}

impl LockMode {
    fn operation(self, wait: bool) -> rustix::fs::FlockOperation {
        use rustix::fs::FlockOperation as Op;
        match (self, wait) {
            (LockMode::Exclusive, true) => Op::LockExclusive,
            (LockMode::Exclusive, false) => Op::NonBlockingLockExclusive,
            (LockMode::Shared, true) => Op::LockShared,
            (LockMode::Shared, false) => Op::NonBlockingLockShared,
        }
    }
}

/// Takes the lock on the open file `fd` refers to if nobody holds it in a
/// conflicting way: `Ok(false)` when someone does. On an open file that
/// already holds the lock, this converts it to `mode`, as flock(2) does.
pub(crate) fn try_lock(fd: BorrowedFd<'_>, mode: LockMode) -> io::Result<bool> {
    match rustix::fs::flock(fd, mode.operation(false)) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Waits in the kernel for the lock, however long it takes.
pub(crate) fn lock(fd: BorrowedFd<'_>, mode: LockMode) -> io::Result<()> {
    loop {
        match rustix::fs::flock(fd, mode.operation(true)) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Drops the lock of the open file `fd` refers to, for every descriptor that
/// shares that open file.
pub(crate) fn unlock(fd: BorrowedFd<'_>) -> io::Result<()> {
    rustix::fs::flock(fd, rustix::fs::FlockOperation::Unlock).map_err(io::Error::from)
}

/// The fallback bounded wait: try, then sleep with exponential backoff
/// (1 ms doubling to 50 ms), never past the deadline. Used where the kernel
/// wait cannot be interrupted (no POSIX per-thread timers, or the wake signal
/// is taken by the application).
pub(crate) fn poll_until(
    fd: BorrowedFd<'_>,
    mode: LockMode,
    deadline: std::time::Instant,
) -> io::Result<bool> {
    use std::time::{Duration, Instant};
    let mut pause = Duration::from_millis(1);
    loop {
        if try_lock(fd, mode)? {
            return Ok(true);
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(false);
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}
