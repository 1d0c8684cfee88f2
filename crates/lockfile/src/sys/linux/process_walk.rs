//! Who holds a lock, learned from every process's descriptors
//! (`/proc/PID/fd` and `fdinfo`). The lock table names only the process that
//! took a lock; when it has exited and a child inherited the descriptor, only
//! the descriptors still tell. Walking them is costly, so callers ask here
//! only when the table cannot answer.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;

use super::lock_line::parse_lock_line;
use super::procfs::read_proc;
use crate::sys::HoldAccess;

/// Every process that has a descriptor holding the `flock` lock on (dev, ino).
///
/// `/proc/locks` names only the process that took a lock. When it has exited
/// but a child inherited the descriptor (a daemon started by a cron job),
/// the lock is still held and only `/proc/PID/fdinfo` shows by whom. This walks
/// every process's descriptors, so it is only used when the recorded taker is
/// gone. Processes we may not look into are skipped.
pub(crate) fn processes_holding(dev: u64, ino: u64) -> Vec<u32> {
    holding_among(&open_files(), dev, ino)
}

/// Which process has each regular file open, by (stat device, inode).
pub(super) type OpenFiles = HashMap<(u64, u64), Vec<u32>>;

/// Every process's open regular files, from `/proc/PID/fd`. Processes we may
/// not look into are skipped.
pub(super) fn open_files() -> OpenFiles {
    let mut open = OpenFiles::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return open;
    };
    for pid in procs
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
    {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            // stat() follows the magic link to the open file itself.
            if let Ok(m) = std::fs::metadata(fd.path())
                && m.is_file()
            {
                let pids = open.entry((m.dev(), m.ino())).or_default();
                if !pids.contains(&pid) {
                    pids.push(pid);
                }
            }
        }
    }
    open
}

/// The processes among those with (dev, ino) open that hold its lock.
pub(super) fn holding_among(open: &OpenFiles, dev: u64, ino: u64) -> Vec<u32> {
    open.get(&(dev, ino))
        .into_iter()
        .flatten()
        .copied()
        .filter(|&pid| process_holds(pid, dev, ino))
        .collect()
}

/// Whether process `pid` holds the `flock` lock on (dev, ino) through one of
/// its descriptors, read from `/proc/PID/fdinfo`: exact, and lock-free.
pub(crate) fn process_holds(pid: u32, dev: u64, ino: u64) -> bool {
    process_hold_access(pid, dev, ino).is_some()
}

/// How process `pid` holds the `flock` lock on (dev, ino): `None` when it
/// holds none (or its descriptors are not ours to read), otherwise whether
/// any descriptor that holds it is open for writing. A holder that opened the
/// file read-only, as flock(1) does, cannot have written a record.
pub(crate) fn process_hold_access(pid: u32, dev: u64, ino: u64) -> Option<HoldAccess> {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    let mut found = None;
    for fd in fds.flatten() {
        // stat() follows the magic link to the open file itself.
        let same_file =
            std::fs::metadata(fd.path()).is_ok_and(|m| m.dev() == dev && m.ino() == ino);
        if !same_file {
            continue;
        }
        let Some(info) = read_proc(&format!(
            "/proc/{pid}/fdinfo/{}",
            fd.file_name().to_string_lossy()
        )) else {
            continue;
        };
        let info = String::from_utf8_lossy(&info);
        // The fd is our file (stat matched), so its lock lines are about it;
        // their device is the superblock's, not stat's.
        let holds = info
            .lines()
            .filter_map(|l| l.strip_prefix("lock:"))
            .filter_map(parse_lock_line)
            .any(|l| l.flock && l.ino == ino);
        if !holds {
            continue;
        }
        let writable = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .and_then(|flags| u32::from_str_radix(flags.trim(), 8).ok())
            .is_none_or(|flags| flags & libc::O_ACCMODE as u32 != libc::O_RDONLY as u32);
        if writable {
            return Some(HoldAccess::Writable);
        }
        found = Some(HoldAccess::ReadOnly);
    }
    found
}
