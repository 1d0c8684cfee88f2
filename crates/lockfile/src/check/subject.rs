//! What a check judges: a lock file's report or a lease's.

use std::time::SystemTime;

use crate::LockReport;
use crate::history::LastRun;
use crate::inspect::Finding;
use crate::text;

/// A report a check can judge: the findings an inspection made and the run
/// history it read. [`LockReport`] is one; the lease crates implement it
/// for their reports.
pub trait Subject {
    /// How a check's line names it: `` `/run/lock/job.lock` `` or
    /// `` etcd lease `nightly` ``, escaped for a person.
    fn describe(&self) -> String;
    /// The inspection's findings, judged with the check's options.
    fn findings(&self) -> &[Finding];
    /// The last finished run, when one was recorded and believed.
    fn last_run(&self) -> Option<&LastRun>;
    /// The last recorded success, when one was believed.
    fn last_success(&self) -> Option<SystemTime>;
}

impl Subject for LockReport {
    fn describe(&self) -> String {
        format!("`{}`", text::path(&self.path))
    }

    fn findings(&self) -> &[Finding] {
        &self.findings
    }

    fn last_run(&self) -> Option<&LastRun> {
        self.last_run.as_ref()
    }

    fn last_success(&self) -> Option<SystemTime> {
        self.last_success
    }
}
