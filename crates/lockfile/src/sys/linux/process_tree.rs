//! Every process at once, for eviction: who is whose parent (to find a hung
//! holder's descendants), whose uid each has, and whose descriptors we may
//! read. Facts read once, then verified again per process through a pidfd.

use super::procfs::read_proc;
use crate::sys::{ProcStat, process_stat};

/// Every process in our PID namespace whose `/proc/PID/stat` we could read,
/// with what it says.
pub(crate) fn process_table() -> Vec<(u32, ProcStat)> {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, process_stat(pid)?)))
        .collect()
}

/// A process's real and effective uids, from the `Uid:` line of
/// `/proc/PID/status`.
pub(crate) fn process_uids(pid: u32) -> Option<(u32, u32)> {
    let status = read_proc(&format!("/proc/{pid}/status"))?;
    let status = String::from_utf8_lossy(&status);
    let mut ids = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .map(str::parse::<u32>);
    Some((ids.next()?.ok()?, ids.next()?.ok()?))
}

/// Whether we may read a process's descriptors (`/proc/PID/fd`): only then
/// can we tell whether it holds a lock.
pub(crate) fn descriptors_readable(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sees_us_with_our_parent_and_uids() {
        let me = std::process::id();
        let table = process_table();
        let (_, stat) = table.iter().find(|(pid, _)| *pid == me).unwrap();
        assert_eq!(stat.parent, std::os::unix::process::parent_id());
        let uid = rustix::process::getuid().as_raw();
        let euid = rustix::process::geteuid().as_raw();
        assert_eq!(process_uids(me), Some((uid, euid)));
        assert!(descriptors_readable(me));
    }
}
