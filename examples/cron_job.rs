//! A cron-style job: one copy at a time, a heartbeat between batches, and a
//! recorded success for the silence alarm.
//!
//! ```sh
//! cargo run --example cron_job            # works through 5 batches
//! cargo run --example cron_job & cargo run --example cron_job
//!                                         # one runs, the other skips
//! ```
//!
//! Exit statuses: 0 the job ran; 75 (EX_TEMPFAIL) the previous run still
//! holds the lock, so this run skipped; 73 (EX_CANTCREAT) the lock could not
//! be taken at all (the message names the path and the cause).
//!
//! The lock lives in `lockfile::default_lock_dir()` (for example
//! `~/.local/state/lockfile/cron-job.lock`; set `LOCKFILE_DIR` to move it).
//! `BATCHES` sets the number of batches (default 5, one second each).

use std::process::ExitCode;
use std::time::Duration;

/// The previous run still holds the lock.
const SKIPPED: u8 = 75;
/// The lock could not be taken.
const CANNOT_LOCK: u8 = 73;

fn main() -> ExitCode {
    let batches: u32 = std::env::var("BATCHES")
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(5);
    let path = match lockfile::default_lock_dir() {
        Ok(dir) => dir.join("cron-job.lock"),
        Err(e) => {
            eprintln!("cron-job: {e}");
            return ExitCode::from(CANNOT_LOCK);
        }
    };
    let mut guard = match lockfile::LockOptions::new()
        .job("cron-job")
        .heartbeat_interval(Duration::from_secs(1))
        .try_acquire(&path)
    {
        Ok(guard) => guard,
        Err(e) if e.is_contended() => {
            // A skip is an event, not a success: say who is in the way.
            eprintln!("cron-job: skipped: {e}");
            return ExitCode::from(SKIPPED);
        }
        Err(e) => {
            eprintln!("cron-job: {e}");
            return ExitCode::from(CANNOT_LOCK);
        }
    };
    println!(
        "cron-job: pid {} holds {} (token {})",
        guard.record().pid,
        path.display(),
        guard.record().token
    );
    for batch in 1..=batches {
        std::thread::sleep(Duration::from_secs(1)); // the work of one batch
        if let Err(e) = guard.heartbeat() {
            eprintln!("cron-job: {e}");
        }
        println!("cron-job: batch {batch}/{batches} done");
    }
    if let Err(e) = guard.record_success() {
        eprintln!("cron-job: {e}");
    }
    if let Err(e) = guard.release() {
        eprintln!("cron-job: {e}");
    }
    println!("cron-job: finished");
    ExitCode::SUCCESS
}
