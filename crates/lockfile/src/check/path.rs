//! A check of a lock file by its path: a plain lock file, or a set of
//! slots judged as one job.

use std::path::Path;
use std::time::SystemTime;

use super::{CheckOptions, Health};
use crate::{LockReport, Result};

impl CheckOptions {
    /// Inspects the lock file at `path` and judges it now. An error is a
    /// file that could not be inspected: a check says `UNKNOWN` for it.
    ///
    /// When the file is slot 0 of a set ([`crate::slot`]; found without
    /// being told N), the set is judged as one job:
    /// [`judge_set`](Self::judge_set).
    pub fn check(&self, path: impl AsRef<Path>) -> Result<Health<LockReport>> {
        let report = self.inspect_options().inspect_slots(path)?;
        Ok(self.judge_set(report, SystemTime::now()))
    }
}
