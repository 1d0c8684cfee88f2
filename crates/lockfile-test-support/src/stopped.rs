//! Stopping a holder for a fault test: whether a process has stopped, and
//! stopping it at a moment when it is outside a write to a fenced store.

use std::time::{Duration, Instant};

use crate::wait::PATIENCE;

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

/// Stops `writer` with `stop` (which may stop more, such as its process
/// group) at a moment when it is outside a write to `store`, continuing it
/// with `cont` and trying again while it is inside one (`in_write`: the
/// store's lock is taken): a writer stopped inside a write would keep every
/// other writer waiting on the store's lock until it continues. Returns
/// what the successful `stop` returned.
pub fn stop_outside_a_write<T>(
    writer: u32,
    in_write: impl Fn() -> bool,
    mut stop: impl FnMut() -> T,
    cont: impl Fn(),
) -> T {
    loop {
        let stopped_at = stop();
        // kill(2) may return before the target is off its CPU.
        let started = Instant::now();
        while !stopped(writer) {
            assert!(
                started.elapsed() < PATIENCE,
                "process {writer} did not stop"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        if !in_write() {
            return stopped_at;
        }
        cont();
        std::thread::sleep(Duration::from_millis(3));
    }
}
