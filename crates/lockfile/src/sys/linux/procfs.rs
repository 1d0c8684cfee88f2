//! What `/proc` tells of a process: the boot, its PID namespace, its start
//! time and state, its innermost PID and command name. These are the facts an
//! owner record carries and that tell a live owner from a reused PID.

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;

use crate::sys::ProcStat;

/// Reads a small `/proc` file (a few hundred bytes) in as few `read` calls as
/// it takes, where `read_to_string` would start with a 32-byte probe and
/// grow: a process's first lock reads several such files. Bytes, because a
/// command name need not be UTF-8.
pub(super) fn read_proc(path: &str) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut file = File::open(path).ok()?;
    let mut buf = [0u8; 4096];
    let mut text = Vec::new();
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Some(text),
            Ok(n) => text.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

pub(in crate::sys) fn boot_id() -> Option<String> {
    let id = read_proc("/proc/sys/kernel/random/boot_id")?;
    Some(String::from_utf8_lossy(&id).trim().to_owned()).filter(|id| !id.is_empty())
}

/// The inode of a process's PID namespace: ours when `pid` is `None`.
pub(crate) fn pid_namespace(pid: Option<u32>) -> Option<u64> {
    let path = match pid {
        None => "/proc/self/ns/pid".to_owned(),
        Some(pid) => format!("/proc/{pid}/ns/pid"),
    };
    std::fs::metadata(path).ok().map(|m| m.ino())
}

pub(crate) fn process_stat(pid: u32) -> Option<ProcStat> {
    stat_from(&format!("/proc/{pid}/stat"))
}

/// Our own start time. Through `/proc/self`, because inside a PID namespace
/// whose `/proc` is the host's, `/proc/<our pid>` names another process.
pub(in crate::sys) fn own_start_time() -> Option<u64> {
    stat_from("/proc/self/stat").map(|s| s.start_time)
}

fn stat_from(path: &str) -> Option<ProcStat> {
    let stat = read_proc(path)?;
    // The command name (field 2) may hold spaces, parentheses and bytes that
    // are not UTF-8; the fields after it start behind the last ')', with the
    // state (field 3), and are ASCII.
    const PF_EXITING: u64 = 0x4;
    let after_comm = &stat[stat.iter().rposition(|&b| b == b')')? + 1..];
    let after_comm = std::str::from_utf8(after_comm).ok()?;
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    let state = fields.first()?;
    let flags: u64 = fields.get(6)?.parse().ok()?;
    Some(ProcStat {
        exited: matches!(*state, "Z" | "X") || flags & PF_EXITING != 0,
        parent: fields.get(1)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

/// The PID a process has inside its own (innermost) PID namespace, from the
/// `NSpid:` line of `/proc/PID/status`.
pub(crate) fn innermost_pid(pid: u32) -> Option<u32> {
    let status = read_proc(&format!("/proc/{pid}/status"))?;
    let status = String::from_utf8_lossy(&status);
    let line = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    line.split_whitespace().last()?.parse().ok()
}

/// The short command name of a process (`/proc/PID/comm`).
pub(crate) fn command_name(pid: u32) -> Option<String> {
    let comm = read_proc(&format!("/proc/{pid}/comm"))?;
    Some(String::from_utf8_lossy(&comm).trim_end().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_our_own_identity() {
        let pid = std::process::id();
        let stat = process_stat(pid).unwrap();
        assert!(!stat.exited);
        assert_eq!(stat.parent, std::os::unix::process::parent_id());
        assert_eq!(Some(stat.start_time), own_start_time());
        assert_eq!(innermost_pid(pid), Some(pid));
        assert_eq!(pid_namespace(Some(pid)), pid_namespace(None));
        assert!(boot_id().is_some());
    }
}
