//! A lock file awaited by many tasks at once, without a thread each: the
//! core's `acquire_async` (its `tokio` feature).
//!
//! ```text
//! cargo run -p lockfile-examples --example async_lock
//! ```
//!
//! 100 tasks on a single-threaded runtime wait for a lock this program
//! holds; once they all wait, it lets go, and they take it in turn. The
//! process's threads are counted before and after: the waits cost one
//! thread, the process's waiter thread, however many tasks wait.

use std::time::Duration;

use lockfile::{LockGuard, LockOptions};

const TASKS: usize = 100;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("report.lock");
    let threads_before = threads();
    let held = LockGuard::try_acquire(&path)?;

    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let path = path.clone();
        tasks.push(tokio::spawn(async move {
            let guard = LockOptions::new()
                .job(format!("task {task}"))
                .timeout(Duration::from_secs(60))
                .acquire_async(&path)
                .await?;
            // ... the task's work, under the lock ...
            guard.release() // a few system calls: fine in async code
        }));
    }
    while lockfile::waiter::waiters() < TASKS {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!(
        "{TASKS} tasks wait for {}: {} threads in this process (it had {threads_before})",
        path.display(),
        threads()
    );
    held.release()?;
    for task in tasks {
        task.await??;
    }
    println!(
        "each took the lock in turn; {} waits left",
        lockfile::waiter::waiters()
    );
    Ok(())
}

/// This process's threads.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |tasks| tasks.count())
}
