//! What /proc says about this process: how many threads it runs, and how
//! many of its flock requests the kernel has queued as blocked.

use anyhow::Result;

/// The threads of this process now: the entries of /proc/self/task.
pub(crate) fn threads() -> Result<usize> {
    Ok(std::fs::read_dir("/proc/self/task")?.count())
}

/// This process's blocked flock requests: the `->` lines of /proc/locks
/// that name its PID (every thread of a process shows as the process).
pub(crate) fn blocked_flocks() -> Result<usize> {
    let pid = std::process::id().to_string();
    let locks = std::fs::read_to_string("/proc/locks")?;
    Ok(locks
        .lines()
        .filter(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            f.len() >= 7 && f[1] == "->" && f[2] == "FLOCK" && f[5] == pid
        })
        .count())
}
