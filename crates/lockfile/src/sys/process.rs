//! Other processes, as far as signals and `/proc/PID/stat` tell.

/// Whether a process with this PID exists in our PID namespace. EPERM means it
/// exists but belongs to another user: alive. Tools that read EPERM as "dead"
/// have deleted live locks.
pub(crate) fn pid_exists(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    match rustix::process::test_kill_process(pid) {
        Ok(()) => true,
        Err(e) => e != rustix::io::Errno::SRCH,
    }
}

/// Our parent's PID in our PID namespace; `None` when it is not visible from
/// here (we are the first process of a PID namespace).
pub(crate) fn parent_pid() -> Option<u32> {
    rustix::process::getppid().map(|pid| pid.as_raw_nonzero().get().unsigned_abs())
}

/// What `/proc/PID/stat` tells of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcStat {
    /// It has exited, or is exiting: a zombie its parent has not reaped yet
    /// (state Z or X), or a process past the point where the kernel closed
    /// its files (flag PF_EXITING), whose locks are gone.
    pub(crate) exited: bool,
    /// Field 4: the parent's PID (0 when the parent is outside our PID
    /// namespace).
    pub(crate) parent: u32,
    /// Field 22: the start time in clock ticks since boot.
    pub(crate) start_time: u64,
}
