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
    /// being told N), the set is judged as one job: each slot's verdicts
    /// (named `slot K: …`), silence on the set's latest success, and
    /// [`saturated_after`](Self::saturated_after).
    pub fn check(&self, path: impl AsRef<Path>) -> Result<Health<LockReport>> {
        let report = self.inspect_options().inspect_slots(path)?;
        let now = SystemTime::now();
        if report.slots.is_empty() {
            return Ok(self.judge(report, now));
        }
        let verdicts = super::slots::verdicts(self, &report, now);
        Ok(Health::new(verdicts, report, now))
    }
}
