//! What a check judges: a lock file's report or a lease's.

use std::time::{Duration, SystemTime};

use crate::history::LastRun;
use crate::inspect::Finding;
use crate::text;
use crate::{LockReport, OwnerRecord};

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

    /// Its other slots, when it is slot 0 of a set (see [`crate::slot`]),
    /// in slot order, for [`CheckOptions::judge_set`](super::CheckOptions::judge_set).
    /// None by default.
    fn slots(&self) -> &[Self]
    where
        Self: Sized,
    {
        &[]
    }

    /// Which slot of a set it is, as its record says (or its name, where
    /// a free one keeps no record). `None` by default.
    fn slot(&self) -> Option<crate::record::Slot> {
        None
    }

    /// When it is held: how long, and the holder's record when it wrote
    /// one. `None` by default.
    fn held(&self) -> Option<(Duration, Option<&OwnerRecord>)> {
        None
    }

    /// A copy without its slots, to judge one slot alone. By default a
    /// copy.
    fn alone(&self) -> Self
    where
        Self: Sized + Clone,
    {
        self.clone()
    }
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

    fn slots(&self) -> &[LockReport] {
        &self.slots
    }

    fn slot(&self) -> Option<crate::record::Slot> {
        self.owner.as_ref()?.slot
    }

    fn held(&self) -> Option<(Duration, Option<&OwnerRecord>)> {
        (self.state == crate::LockState::Held)
            .then(|| (self.age.unwrap_or_default(), self.owner.as_ref()))
    }

    fn alone(&self) -> LockReport {
        let mut one = self.clone();
        one.slots = Vec::new();
        one
    }
}
