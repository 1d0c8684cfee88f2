//! A health check for the cron job: who holds its lock, is it still beating,
//! and did it succeed recently? Prints one verdict and exits with the
//! monitoring-plugin status (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN).
//!
//! ```sh
//! cargo run --example health_check             # expects a success daily
//! EXPECT_EVERY=60 cargo run --example health_check
//! ```

use std::process::ExitCode;
use std::time::Duration;

use lockfile::LockState;
use lockfile::inspect::{InspectOptions, Severity, Status};

fn main() -> ExitCode {
    let expect_every = std::env::var("EXPECT_EVERY")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(Duration::from_secs(86_400), Duration::from_secs);
    let report = lockfile::default_lock_dir().and_then(|dir| {
        InspectOptions::new()
            .expect_every(expect_every)
            .inspect(dir.join("cron-job.lock"))
    });
    let report = match report {
        Ok(report) => report,
        Err(e) => {
            println!("{}: {e}", Status::Unknown);
            return Status::Unknown.into();
        }
    };
    let who = match (&report.state, &report.owner) {
        (LockState::Held, Some(owner)) => format!("running as {owner}"),
        (state, _) => format!("lock is {state}"),
    };
    let status = report.severity().map_or(Status::Ok, Severity::status);
    println!("{status}: cron-job {who}");
    for finding in &report.findings {
        println!("  {} {}: {finding}", finding.severity(), finding.kind());
    }
    status.into()
}
