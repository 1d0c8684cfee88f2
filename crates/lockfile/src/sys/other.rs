//! Other Unix systems: `flock(2)` exists, `/proc` does not. The fallbacks are
//! documented in the crate docs ("Platform notes").

use std::fs::File;
use std::io;
use std::time::Instant;

use super::{KernelHold, ProcStat};

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

pub(crate) fn identity_of(file: &File) -> io::Result<super::Identity> {
    use std::os::unix::fs::MetadataExt;
    let m = file.metadata()?;
    Ok(super::Identity {
        dev: m.dev(),
        ino: m.ino(),
        kind: rustix::fs::FileType::from_raw_mode(m.mode() as rustix::fs::RawMode),
    })
}

pub(crate) fn identity_at(path: &std::path::Path) -> io::Result<super::Identity> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path)?;
    Ok(super::Identity {
        dev: m.dev(),
        ino: m.ino(),
        kind: rustix::fs::FileType::from_raw_mode(m.mode() as rustix::fs::RawMode),
    })
}

/// Without `/proc/locks` the only way to learn whether a file is locked is to
/// probe it with a shared, non-blocking lock. The probe lasts microseconds,
/// but a `try_acquire` in that window reports contention.
#[derive(Debug, Default)]
pub(crate) struct KernelLocks;

impl KernelLocks {
    pub(crate) fn snapshot() -> io::Result<KernelLocks> {
        Ok(KernelLocks)
    }

    /// POSIX locks of other tools cannot be seen without `/proc/locks`.
    pub(crate) fn other_lockers(&self, _file: &File, _dev: u64, _ino: u64) -> Vec<i64> {
        Vec::new()
    }

    pub(crate) fn hold(&self, file: &File, _dev: u64, _ino: u64) -> KernelHold {
        match file.try_lock_shared() {
            Ok(()) => {
                let _ = file.unlock();
                KernelHold::Free
            }
            Err(_) => KernelHold::Held(Vec::new()),
        }
    }
}

pub(crate) fn processes_holding(_dev: u64, _ino: u64) -> Vec<u32> {
    Vec::new()
}

pub(crate) fn process_hold_access(_pid: u32, _dev: u64, _ino: u64) -> Option<super::HoldAccess> {
    None
}

pub(crate) fn process_holds(_pid: u32, _dev: u64, _ino: u64) -> bool {
    false
}

pub(crate) fn lock_until(file: &File, deadline: Instant) -> io::Result<bool> {
    super::poll_until(file, deadline)
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
