//! Stopping a holder for a fault test: whether a process has stopped, and
//! stopping it at a moment when it is outside a write to the fenced store.
//! Only std and the examples' store: the command's tests include this file
//! too (`#[path]`).

use std::time::{Duration, Instant};

use lockfile_examples::FencedStore;

/// The longest a stopped process may take to get off its CPU.
const PATIENCE: Duration = Duration::from_secs(60);

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
/// with `cont` and trying again while it is inside one: a writer stopped
/// inside a write would keep every other writer waiting on the store's lock
/// until it continues. Returns what the successful `stop` returned.
pub fn stop_outside_a_write<T>(
    writer: u32,
    store: &FencedStore,
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
        if !store.busy().expect("try the store's lock") {
            return stopped_at;
        }
        cont();
        std::thread::sleep(Duration::from_millis(3));
    }
}
