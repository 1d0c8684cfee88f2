//! Health checks: the verdicts `lockfile check` prints, for a program that
//! asks "is this job healthy?" in one call.
//!
//! A job that never starts produces no error of its own. A check notices
//! that its last success is too old, that its runs keep failing, that it
//! missed its ticks, or that its holder hangs or overruns, and says so in
//! monitoring-plugin terms: a [`Status`] (`OK`, `WARNING`, `CRITICAL`,
//! `UNKNOWN`) with an exit code, and one [`Verdict`] per reason.
//!
//! ```
//! # fn main() -> Result<(), lockfile::Error> {
//! # let dir = tempfile::tempdir().unwrap();
//! # let path = dir.path().join("nightly.lock");
//! # lockfile::LockGuard::acquire(&path)?.record_success()?;
//! use std::time::Duration;
//! use lockfile::check::{CheckOptions, Status};
//!
//! let health = CheckOptions::new()
//!     .expect_every(Duration::from_secs(24 * 3600))
//!     .check(&path)?;
//! assert_eq!(health.status, Status::Ok);
//! println!("{health}"); // OK: `/…/nightly.lock`: last success 0s ago
//! # Ok(())
//! # }
//! ```
//!
//! The same judgement applies to a lease's report (the lease crates
//! implement [`Subject`] for theirs): [`CheckOptions::judge`].

mod health;
mod missed;
mod options;
mod path;
mod slots;
mod subject;
mod verdict;

pub use crate::inspect::{Severity, Status};
pub use health::Health;
pub use options::CheckOptions;
pub use subject::Subject;
pub use verdict::{Verdict, VerdictKind};

use std::path::Path;

use crate::{LockReport, Result};

/// Checks the lock file at `path` with every default ([`CheckOptions::new`]):
/// a hung or overrunning holder, and a last run that failed. Without
/// [`CheckOptions::expect_every`] or [`CheckOptions::once_per`] nothing is
/// said about a job that has stopped running.
pub fn check(path: impl AsRef<Path>) -> Result<Health<LockReport>> {
    CheckOptions::new().check(path)
}
