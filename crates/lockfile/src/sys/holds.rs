//! Who holds a lock, as the kernel's table or a process's descriptors tell.

use super::flock::LockMode;

/// Whether the kernel lock on a file is held, and by whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KernelHold {
    Free,
    /// Held. The PIDs are the processes that took the lock, as the kernel
    /// recorded them; a non-positive PID is one not visible from here. For a
    /// lock the table left out, they are the processes holding it.
    Held {
        pids: Vec<i64>,
        /// Held shared (`LOCK_SH`) by all of them, as far as the platform
        /// tells; an exclusive lock has one holding open file.
        shared: bool,
    },
}

/// How a process holds a lock: through a descriptor open for writing, or
/// only read-only ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HoldAccess {
    // Only /proc tells; the fallback never knows.
    #[cfg_attr(any(not(target_os = "linux"), lockfile_fallback), allow(dead_code))]
    Writable,
    ReadOnly,
}

/// How one process holds the lock on a file, from its own descriptors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
// Only /proc tells; the fallback never builds one.
#[cfg_attr(any(not(target_os = "linux"), lockfile_fallback), allow(dead_code))]
pub(crate) struct ProcessHold {
    /// Whether a descriptor that holds it is open for writing.
    pub(crate) access: HoldAccess,
    pub(crate) mode: LockMode,
}
