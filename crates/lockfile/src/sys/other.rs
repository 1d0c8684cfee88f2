//! Other Unix systems: `flock(2)` exists, `/proc` does not. The fallbacks are
//! documented in the crate docs ("Platform notes").

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, RawFd};
use std::path::PathBuf;
use std::time::Instant;

use super::{Identity, KernelHold, LockMode, ProcStat};

pub(super) fn boot_id() -> Option<String> {
    None
}

pub(crate) fn pid_namespace(_pid: Option<u32>) -> Option<u64> {
    None
}

pub(crate) fn process_stat(_pid: u32) -> Option<ProcStat> {
    None
}

pub(super) fn own_start_time() -> Option<u64> {
    None
}

pub(crate) fn innermost_pid(_pid: u32) -> Option<u32> {
    None
}

pub(crate) fn command_name(_pid: u32) -> Option<String> {
    None
}

pub(super) fn filesystem_type(_file: &File) -> Option<u64> {
    None
}

pub(super) fn noatime_flag() -> i32 {
    0
}

pub(crate) fn identity_of(fd: impl AsFd) -> io::Result<super::Identity> {
    Ok(identity(rustix::fs::fstat(fd)?))
}

// The field types of `stat` differ between platforms: a cast that is a
// no-op here is a widening one elsewhere.
#[allow(clippy::unnecessary_cast)]
fn identity(st: rustix::fs::Stat) -> super::Identity {
    super::Identity {
        dev: st.st_dev as u64,
        ino: st.st_ino as u64,
        kind: rustix::fs::FileType::from_raw_mode(st.st_mode as rustix::fs::RawMode),
        links: st.st_nlink as u64,
        uid: st.st_uid,
        size: st.st_size as u64,
    }
}

pub(crate) fn identity_at(path: &std::path::Path) -> io::Result<super::Identity> {
    identity_in(rustix::fs::CWD, path)
}

pub(crate) fn identity_in(dir: impl AsFd, name: &std::path::Path) -> io::Result<super::Identity> {
    let st = rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)?;
    Ok(identity(st))
}

/// Opens the directory `path` to pin it: later lookups and unlinks go
/// through this descriptor. Without `O_PATH`, it must be readable.
pub(crate) fn open_dir_pinned(path: &std::path::Path) -> io::Result<std::os::fd::OwnedFd> {
    use rustix::fs::OFlags;
    rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(io::Error::from)
}

/// Without `/proc/locks` the only way to learn whether a file is locked is to
/// probe it with non-blocking locks: a shared one (which fails only against an
/// exclusive holder), then an exclusive one (which fails against shared
/// holders too). Each probe lasts microseconds, but a `try_acquire` in that
/// window reports contention.
#[derive(Debug, Default)]
pub(crate) struct KernelLocks;

impl KernelLocks {
    pub(crate) fn snapshot() -> io::Result<KernelLocks> {
        Ok(KernelLocks)
    }

    /// The probes below are exact at the moment they are made.
    pub(crate) fn read_whole(&self) -> bool {
        true
    }

    pub(crate) fn processes_holding(&self, _dev: u64, _ino: u64) -> Vec<u32> {
        Vec::new()
    }

    /// POSIX locks of other tools cannot be seen without `/proc/locks`.
    pub(crate) fn other_lockers(&self, _file: &File, _dev: u64, _ino: u64) -> Vec<i64> {
        Vec::new()
    }

    pub(crate) fn hold(&self, file: &File, _dev: u64, _ino: u64) -> KernelHold {
        let probe = |mode| super::try_lock(file.as_fd(), mode).unwrap_or(false);
        if !probe(LockMode::Shared) {
            return KernelHold::Held {
                pids: Vec::new(),
                shared: false,
            };
        }
        // Converting our shared probe into an exclusive one: it fails only
        // when others hold the lock shared.
        let free = probe(LockMode::Exclusive);
        let _ = super::unlock(file.as_fd());
        if free {
            KernelHold::Free
        } else {
            KernelHold::Held {
                pids: Vec::new(),
                shared: true,
            }
        }
    }
}

/// Without the lock table, whether others hold a lock shared is unknown (a
/// probe could tell, but would take the lock for a moment on the hot path).
pub(crate) fn held_shared(_file: &File) -> bool {
    false
}

pub(crate) fn processes_holding(_dev: u64, _ino: u64) -> Vec<u32> {
    Vec::new()
}

pub(crate) fn process_hold(_pid: u32, _dev: u64, _ino: u64) -> Option<super::ProcessHold> {
    None
}

/// A walk over a process's descriptors: without `/proc`, never possible.
#[derive(Debug)]
#[allow(dead_code)]
pub(crate) enum DescriptorWalk {
    Open(OpenDescriptors),
    OverBudget,
    Unreadable,
}

/// Never built without `/proc`.
#[derive(Debug)]
pub(crate) struct OpenDescriptors;

impl OpenDescriptors {
    pub(crate) fn hold(&self, _dev: u64, _ino: u64) -> Option<super::ProcessHold> {
        None
    }
}

pub(crate) fn walk_descriptors(_pid: u32, _budget: &mut usize) -> DescriptorWalk {
    DescriptorWalk::Unreadable
}

pub(crate) fn lock_until(
    fd: std::os::fd::BorrowedFd<'_>,
    mode: super::LockMode,
    deadline: Instant,
) -> io::Result<bool> {
    super::poll_until(fd, mode, deadline)
}

/// No `/proc/self/fd` to name a descriptor's file by.
pub(crate) fn descriptor_path(_fd: BorrowedFd<'_>) -> Option<PathBuf> {
    None
}

/// Elsewhere, opening `/dev/fd/N` duplicates the descriptor (the same open
/// file, sharing its offset and lock) rather than opening the file anew: no
/// fresh open file can be had, so descriptor locks keep no record here.
pub(crate) fn reopen(_fd: BorrowedFd<'_>, _write: bool) -> io::Result<File> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "reopening a descriptor's file needs /proc/self/fd",
    ))
}

/// Without kcmp(2) or `/proc`, no process can be shown to share an open file.
pub(crate) fn shares_locked_file(
    _pid: u32,
    _fd_number: RawFd,
    _fd: BorrowedFd<'_>,
    _mode: LockMode,
    _id: &Identity,
) -> bool {
    false
}

/// Without `/proc/PID/fdinfo`, which lock a descriptor holds is unknown.
pub(crate) fn descriptor_lock(_pid: Option<u32>, _fd_number: RawFd, _ino: u64) -> Option<LockMode> {
    None
}

/// Why eviction is refused here: stopping a process safely takes a handle
/// on it that a reused PID cannot redirect, and only Linux has one (pidfds).
/// Signalling by PID could hit an unrelated process that reused the number.
pub(crate) const EVICTION_UNSUPPORTED: Option<&str> = Some(
    "stopping another process safely needs pidfds, which only Linux has; signalling by PID could hit a process that reused it",
);

/// No pidfd can exist here: eviction is refused (see
/// [`EVICTION_UNSUPPORTED`]) before any process is looked at.
#[derive(Debug)]
pub(crate) enum Pidfd {}

impl Pidfd {
    pub(crate) fn open(_pid: u32) -> io::Result<Pidfd> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }

    pub(crate) fn pid(&self) -> u32 {
        match *self {}
    }

    pub(crate) fn signal(&self, _signal: i32) -> io::Result<()> {
        match *self {}
    }

    pub(crate) fn has_exited(&self) -> bool {
        match *self {}
    }
}

pub(crate) fn wait_exited(pidfds: &[&Pidfd], _until: Instant) -> Vec<bool> {
    vec![true; pidfds.len()]
}

pub(crate) fn process_table() -> Vec<(u32, ProcStat)> {
    Vec::new()
}

pub(crate) fn process_uids(_pid: u32) -> Option<(u32, u32)> {
    None
}

pub(crate) fn descriptors_readable(_pid: u32) -> bool {
    false
}

/// No inotify here: a waiter for any of several slots polls them, and so
/// does the async waiter. Never built: [`DirWatch::new`] always fails.
#[derive(Debug)]
pub(crate) enum DirWatch {}

/// A watch that never exists (see [`DirWatch`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum WatchId {}

impl DirWatch {
    pub(crate) fn new() -> io::Result<DirWatch> {
        Err(io::ErrorKind::Unsupported.into())
    }

    pub(crate) fn watch(&mut self, _dir: &std::path::Path) -> io::Result<WatchId> {
        match *self {}
    }

    #[cfg(feature = "tokio")]
    pub(crate) fn watch_closes(&mut self, _dir: &std::path::Path) -> io::Result<WatchId> {
        match *self {}
    }

    #[cfg(feature = "tokio")]
    pub(crate) fn unwatch(&mut self, _id: WatchId) {
        match *self {}
    }

    pub(crate) fn retire(self) -> Option<std::os::fd::OwnedFd> {
        match self {}
    }

    #[cfg(feature = "tokio")]
    pub(crate) fn as_fd(&self) -> BorrowedFd<'_> {
        match *self {}
    }

    pub(crate) fn wait(
        &mut self,
        _timeout: std::time::Duration,
        _seen: &mut dyn FnMut(WatchId, &std::ffi::OsStr),
    ) -> io::Result<bool> {
        match *self {}
    }

    #[cfg(feature = "tokio")]
    pub(crate) fn read(
        &mut self,
        _seen: &mut dyn FnMut(WatchId, &std::ffi::OsStr),
    ) -> io::Result<bool> {
        match *self {}
    }
}
