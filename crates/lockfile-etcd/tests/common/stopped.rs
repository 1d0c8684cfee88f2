//! Whether a process has stopped: the tests that stop a holder in the
//! middle of a store write wait for this before they judge what it did.
//! Only std: the command's tests include this file too (`#[path]`).

/// Whether every thread of `pid` has stopped (SIGSTOP), as their
/// /proc/PID/task/TID/stat say: a process's own stat shows only its main
/// thread, which may stop before another thread does.
pub fn stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|task| {
        std::fs::read_to_string(task.path().join("stat")).is_ok_and(|stat| {
            stat.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('T')
        })
    })
}
