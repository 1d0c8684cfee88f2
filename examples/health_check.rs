//! A health check for the cron job, as a monitoring plugin: one line and the
//! plugin's exit status (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN), the same
//! verdicts `lockfile check` gives.
//!
//! ```sh
//! cargo run --example health_check             # expects a success daily
//! EXPECT_EVERY=60 cargo run --example health_check
//! ```

use std::process::ExitCode;
use std::time::Duration;

use lockfile::check::{CheckOptions, Status};

fn main() -> ExitCode {
    let expect_every = std::env::var("EXPECT_EVERY")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(Duration::from_secs(86_400), Duration::from_secs);
    let health = lockfile::default_lock_dir().and_then(|dir| {
        CheckOptions::new()
            .expect_every(expect_every)
            .check(dir.join("cron-job.lock"))
    });
    match health {
        Ok(health) => {
            println!("{health}");
            health.status.into()
        }
        Err(e) => {
            println!("{}: {e}", Status::Unknown);
            Status::Unknown.into()
        }
    }
}
