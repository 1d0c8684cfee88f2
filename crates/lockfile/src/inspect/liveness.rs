//! Whether a recorded owner lives, and who really holds a lock: judged by
//! boot id, PID namespace and start time, never by a PID alone.

use crate::OwnerRecord;
use crate::sys::{self, ProcessIdentity};

/// Whether the process `pid` (in our namespace) is the one the record names,
/// which may have written its PID from inside a container's PID namespace.
pub(super) fn holder_is_owner(pid: u32, owner: &OwnerRecord, me: &ProcessIdentity) -> bool {
    match (owner.pid_namespace, me.pid_namespace) {
        (Some(theirs), Some(ours)) if theirs != ours => {
            sys::pid_namespace(Some(pid)) == Some(theirs)
                && sys::innermost_pid(pid) == Some(owner.pid)
        }
        _ => pid == owner.pid,
    }
}

/// What can be said about a recorded local owner.
#[derive(Clone)]
pub(crate) enum Liveness {
    Alive,
    Dead(String),
    /// Recorded in another PID namespace: the number cannot be checked here.
    Unknown,
}

/// Judges a local record's owner by boot id, PID and start time, never by PID
/// alone: PIDs are reused, and restart at 1 in every container.
pub(crate) fn judge_owner(owner: &OwnerRecord, me: &ProcessIdentity) -> Liveness {
    if let (Some(theirs), Some(ours)) = (&owner.boot_id, &me.boot_id)
        && theirs != ours
    {
        return Liveness::Dead(format!(
            "the host rebooted since (boot id {theirs}, now {ours})"
        ));
    }
    if let (Some(theirs), Some(ours)) = (owner.pid_namespace, me.pid_namespace)
        && theirs != ours
    {
        return Liveness::Unknown;
    }
    if !sys::pid_exists(owner.pid) {
        return Liveness::Dead(format!("no process with pid {} exists", owner.pid));
    }
    if let Some(stat) = sys::process_stat(owner.pid) {
        if stat.exited {
            return Liveness::Dead(format!(
                "pid {} has exited or is exiting (its locks are gone)",
                owner.pid
            ));
        }
        if let Some(theirs) = owner.start_time
            && theirs != stat.start_time
        {
            return Liveness::Dead(format!(
                "pid {} now belongs to another process (started at tick {}, the owner at tick {theirs})",
                owner.pid, stat.start_time
            ));
        }
    }
    Liveness::Alive
}
