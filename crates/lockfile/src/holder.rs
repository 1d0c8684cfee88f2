//! `Holder`: a process that holds a kernel lock, as `inspect`,
//! `LockGuard::inheritors` and a contention error name it.

use std::fmt;
use std::fs::File;

use serde::{Deserialize, Serialize};

use crate::OwnerRecord;
use crate::sys::{self, KernelHold, KernelLocks};

/// A process that holds a kernel lock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Holder {
    /// Its PID in our PID namespace.
    pub pid: u32,
    /// Its command name, when readable.
    pub command: Option<String>,
}

impl Holder {
    /// Resolves the kernel's view into live processes. `/proc/locks` names the
    /// process that took the lock; when that one is gone (or invisible from our
    /// namespace) the lock lives on in a descriptor someone inherited, so look
    /// for that someone, with one walk of every process's descriptors per table,
    /// however many files ask.
    pub(crate) fn resolve(
        locks: &KernelLocks,
        kernel_pids: &[i64],
        dev: u64,
        ino: u64,
    ) -> Vec<Holder> {
        let visible: Vec<u32> = kernel_pids
            .iter()
            .filter_map(|&p| u32::try_from(p).ok())
            .filter(|&p| p > 0 && sys::pid_exists(p))
            .collect();
        let pids = if visible.len() == kernel_pids.len() {
            visible
        } else {
            locks.processes_holding(dev, ino)
        };
        pids.into_iter().map(Holder::from_pid).collect()
    }

    /// The processes holding the lock on `file` that we did not get, as far
    /// as the kernel's lock table shows them from here: for a contention
    /// error whose holder wrote no record (util-linux flock(1), a shared
    /// holder). Empty when the table cannot be read or names no one visible.
    /// It costs a read of the table, as long as the host's lock list: paid
    /// only when no record names the holder.
    pub(crate) fn of_file(file: &File) -> Vec<Holder> {
        let Ok(id) = sys::identity_of(file) else {
            return Vec::new();
        };
        let Ok(locks) = KernelLocks::snapshot() else {
            return Vec::new();
        };
        match locks.hold(file, id.dev, id.ino) {
            KernelHold::Held { pids, .. } => Holder::resolve(&locks, &pids, id.dev, id.ino),
            KernelHold::Free => Vec::new(),
        }
    }

    pub(crate) fn from_pid(pid: u32) -> Holder {
        Holder {
            pid,
            command: sys::command_name(pid),
        }
    }
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pid {}", self.pid)?;
        if let Some(c) = &self.command {
            write!(f, " ({})", crate::text::escape(c))?;
        }
        Ok(())
    }
}

/// Who holds a lock that an acquire did not get, as its error names them:
/// the holder's record, or, when none names the holder, the processes the
/// kernel shows.
#[derive(Debug, Default)]
pub(crate) struct Named {
    pub(crate) owner: Option<Box<OwnerRecord>>,
    pub(crate) holders: Vec<Holder>,
}

impl Named {
    /// `owner` read from `file`, or the kernel's holders of `file` when
    /// there is none.
    pub(crate) fn new(file: &File, owner: Option<Box<OwnerRecord>>) -> Named {
        let holders = match owner {
            Some(_) => Vec::new(),
            None => Holder::of_file(file),
        };
        Named { owner, holders }
    }
}
