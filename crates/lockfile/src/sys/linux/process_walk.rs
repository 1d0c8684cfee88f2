//! Who holds a lock, learned from every process's descriptors
//! (`/proc/PID/fd` and `fdinfo`). The lock table names only the process that
//! took a lock; when it has exited and a child inherited the descriptor, only
//! the descriptors still tell. Walking them is costly, so callers ask here
//! only when the table cannot answer.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;

use super::lock_line::parse_lock_line;
use super::procfs::read_proc;
use crate::sys::{HoldAccess, LockMode, ProcessHold};

/// Every process that has a descriptor holding the `flock` lock on (dev, ino).
///
/// `/proc/locks` names only the process that took a lock. When it has exited
/// but a child inherited the descriptor (a daemon started by a cron job),
/// the lock is still held and only `/proc/PID/fdinfo` shows by whom. This walks
/// every process's descriptors, so it is only used when the recorded taker is
/// gone. Processes we may not look into are skipped.
pub(crate) fn processes_holding(dev: u64, ino: u64) -> Vec<u32> {
    holding_among(&open_files(), dev, ino)
        .into_iter()
        .map(|(pid, _)| pid)
        .collect()
}

/// Which process has each regular file or directory open, by (stat device,
/// inode).
pub(super) type OpenFiles = HashMap<(u64, u64), Vec<u32>>;

/// Every process's open regular files and directories (both can be locked),
/// from `/proc/PID/fd`. Processes we may not look into are skipped.
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
                && (m.is_file() || m.is_dir())
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

/// The processes among those with (dev, ino) open that hold its lock, and
/// how each holds it.
pub(super) fn holding_among(open: &OpenFiles, dev: u64, ino: u64) -> Vec<(u32, ProcessHold)> {
    open.get(&(dev, ino))
        .into_iter()
        .flatten()
        .filter_map(|&pid| Some((pid, process_hold(pid, dev, ino)?)))
        .collect()
}

/// How process `pid` holds the `flock` lock on (dev, ino), read from its
/// `/proc/PID/fdinfo`, exact and lock-free: `None` when it holds none (or its
/// descriptors are not ours to read), otherwise whether any descriptor that
/// holds it is open for writing (a holder that opened the file read-only, as
/// flock(1) does, cannot have written a record), and whether it holds the
/// lock shared.
pub(crate) fn process_hold(pid: u32, dev: u64, ino: u64) -> Option<ProcessHold> {
    let mut unbounded = usize::MAX;
    match walk_descriptors(pid, &mut unbounded) {
        DescriptorWalk::Open(open) => open.hold(dev, ino),
        DescriptorWalk::OverBudget | DescriptorWalk::Unreadable => None,
    }
}

/// One walk over a process's descriptors: which of its descriptors refer to
/// which file. The walk (a `stat` per descriptor) is what costs; asking
/// afterwards how the process holds one file reads only the `fdinfo` of the
/// few descriptors that refer to it, so it is exact at the time it is asked.
#[derive(Debug)]
pub(crate) enum DescriptorWalk {
    /// The process's descriptors, walked.
    Open(OpenDescriptors),
    /// It has more descriptors than the budget left: nothing can be said.
    OverBudget,
    /// Its descriptors are not ours to read (another user's process, or it
    /// is gone).
    Unreadable,
}

/// The descriptors of one process, by the (stat device, inode) of the
/// regular file or directory each refers to.
#[derive(Debug)]
pub(crate) struct OpenDescriptors {
    pid: u32,
    by_file: HashMap<(u64, u64), Vec<u32>>,
}

/// Walks the descriptors of `pid`, each one counted against `budget`, and
/// gives up as soon as the budget runs out.
pub(crate) fn walk_descriptors(pid: u32, budget: &mut usize) -> DescriptorWalk {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags};
    let Ok(fd_dir) = rustix::fs::open(
        format!("/proc/{pid}/fd"),
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return DescriptorWalk::Unreadable;
    };
    let Ok(entries) = rustix::fs::Dir::read_from(&fd_dir) else {
        return DescriptorWalk::Unreadable;
    };
    let mut by_file: HashMap<(u64, u64), Vec<u32>> = HashMap::new();
    for entry in entries {
        let Ok(entry) = entry else {
            return DescriptorWalk::Unreadable;
        };
        let name = entry.file_name();
        let Some(number) = std::str::from_utf8(name.to_bytes())
            .ok()
            .and_then(|n| n.parse().ok())
        else {
            continue; // "." and ".."
        };
        let Some(left) = budget.checked_sub(1) else {
            return DescriptorWalk::OverBudget;
        };
        *budget = left;
        // Relative to the directory: one lookup per descriptor, not four.
        // stat() follows the magic link to the open file itself.
        if let Ok(st) = rustix::fs::statat(&fd_dir, name, AtFlags::empty())
            && matches!(
                FileType::from_raw_mode(st.st_mode),
                FileType::RegularFile | FileType::Directory
            )
        {
            by_file
                .entry((st.st_dev, st.st_ino))
                .or_default()
                .push(number);
        }
    }
    DescriptorWalk::Open(OpenDescriptors { pid, by_file })
}

impl OpenDescriptors {
    /// How the process holds the `flock` lock on (dev, ino) through the
    /// descriptors the walk found on it, read now from their `fdinfo`.
    /// A descriptor it opened after the walk is not looked at.
    pub(crate) fn hold(&self, dev: u64, ino: u64) -> Option<ProcessHold> {
        let mut found: Option<ProcessHold> = None;
        for fd in self.by_file.get(&(dev, ino)).into_iter().flatten() {
            let Some(info) = read_proc(&format!("/proc/{}/fdinfo/{fd}", self.pid)) else {
                continue;
            };
            let Some((mode, writable)) = fdinfo_flock(&String::from_utf8_lossy(&info), ino) else {
                continue;
            };
            let hold = ProcessHold {
                access: if writable {
                    HoldAccess::Writable
                } else {
                    HoldAccess::ReadOnly
                },
                mode,
            };
            if writable {
                return Some(hold);
            }
            found = Some(hold);
        }
        found
    }
}

/// The `flock` lock that the open file an fdinfo text describes holds on
/// inode `ino`, if any, and whether that open file is open for writing.
///
/// The fdinfo of a descriptor lists the locks its open file holds, not the
/// locks of other open files of the same inode.
pub(super) fn fdinfo_flock(info: &str, ino: u64) -> Option<(LockMode, bool)> {
    // The fd is our file (stat matched), so its lock lines are about it;
    // their device is the superblock's, not stat's.
    let lock = info
        .lines()
        .filter_map(|l| l.strip_prefix("lock:"))
        .filter_map(parse_lock_line)
        .find(|l| l.flock && l.ino == ino)?;
    let writable = info
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|flags| u32::from_str_radix(flags.trim(), 8).ok())
        .is_none_or(|flags| flags & libc::O_ACCMODE as u32 != libc::O_RDONLY as u32);
    let mode = if lock.shared {
        LockMode::Shared
    } else {
        LockMode::Exclusive
    };
    Some((mode, writable))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_lock_of_an_open_file_from_its_fdinfo() {
        let info = "pos:\t0\nflags:\t0100000\nmnt_id:\t31\nino:\t77\nlock:\t1: FLOCK  ADVISORY  READ 2207 00:2d:77 0 EOF\n";
        assert_eq!(fdinfo_flock(info, 77), Some((LockMode::Shared, false)));
        let info =
            "pos:\t0\nflags:\t0100002\nlock:\t1: FLOCK  ADVISORY  WRITE 2207 00:2d:77 0 EOF\n";
        assert_eq!(fdinfo_flock(info, 77), Some((LockMode::Exclusive, true)));
        // A POSIX lock, or a lock on another inode, is not the flock lock.
        let info = "flags:\t0100002\nlock:\t1: POSIX  ADVISORY  WRITE 2207 00:2d:77 0 EOF\n";
        assert_eq!(fdinfo_flock(info, 77), None);
        assert_eq!(fdinfo_flock("flags:\t0100002\n", 77), None);
    }
}
