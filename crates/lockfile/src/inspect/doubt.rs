//! The doubt protocol: never calling a held lock `stale` or `free`.
//!
//! The table is read once, before any file. A file it does not list, whose
//! record names a live local owner that never released it, is in doubt: the
//! owner may have taken the lock after the table was read, or the table,
//! read in pieces, may have skipped it. Such a file is looked at again once
//! every other file has been read, by the protocol below; every other file
//! is decided at once, so a scan of a steady directory pays nothing for it.
//!
//! 1. The table is read again, after the record (once for all the files in
//!    doubt). If it lists the lock, the lock is held.
//! 2. If that table came in pieces, the owner's descriptors say whether it
//!    holds the lock: exact, but a walk over all of them, so done at most
//!    once per process for the files read before it, and within a budget of
//!    descriptors per scan. Past the budget the file is `undecided`.
//! 3. The record is read again. Only if it did not change is the verdict of
//!    step 1 (and 2) about this record: an owner takes the lock before it
//!    writes its record, and marks the record released before it lets the
//!    lock go, so a record that stayed unreleased throughout was held
//!    throughout, if its owner is one of ours and alive. Then a table that
//!    does not list the lock means nobody held it: `stale`. A record that
//!    changed is examined anew (from step 1, up to [`LOOKS`] times in all;
//!    then it is `undecided`).

use std::collections::HashMap;
use std::fs::File;

use super::finding::{Finding, Undecided};
use super::liveness::Liveness;
use super::report::{LockReport, LockState};
use super::sample::{Sample, changed};
use crate::sys::{self, DescriptorWalk, KernelHold, KernelLocks, LockMode};

/// How many times a file in doubt is read before it is `undecided`: an
/// owner that takes and releases its lock in a loop changes its record
/// between two reads now and then, but not this many times in a row.
pub(super) const LOOKS: usize = 4;

/// The most process descriptors one scan walks in all. A walk of 19,000
/// descriptors costs a few times as much as reading 1,500 lock files, and
/// one is needed only when the table came in pieces: this allows one such
/// walk, however many processes the records in a directory name.
pub(crate) const WALK_BUDGET: usize = 24_576;

/// A file the table could not settle, with what its first look found.
pub(super) struct Doubt {
    /// Where its report goes among the scan's.
    pub(super) slot: usize,
    pub(super) file: File,
    pub(super) report: LockReport,
    pub(super) sample: Sample,
    pub(super) liveness: Option<Liveness>,
    /// Its content as read, to tell whether it changed since.
    pub(super) content: Vec<u8>,
    pub(super) read_at: u64,
    pub(super) looks: usize,
}

impl Doubt {
    /// A file whose state could not be told: what its record says, and why.
    pub(super) fn undecided(self, reason: Undecided) -> LockReport {
        let mut report = self.report;
        report.state = LockState::Undecided;
        report.content_error = self.sample.content_error;
        if let Some(doc) = self.sample.doc {
            report.released = doc.released;
            report.last_success = doc.last_success;
            report.last_run = doc.last_run.as_deref().cloned();
            report.last_claimed_tick = doc.last_claimed_tick.as_deref().cloned();
            report.owner = Some(doc.owner);
        }
        report.findings.push(Finding::Undecided { reason });
        report
    }
}

/// What a second look at a file in doubt decided.
pub(super) enum Reconsidered {
    /// The verdict of the first look stands, on this hold.
    Conclude(KernelHold),
    /// Its state cannot be told.
    Undecided(Undecided),
    /// Taken or released meanwhile: to be examined anew.
    Changed,
}

/// Steps 1 to 3 for one file in doubt, against the newest table `locks`.
pub(super) fn reconsider(
    d: &Doubt,
    locks: &KernelLocks,
    walks: &mut Walks,
    ticks: &mut u64,
) -> Reconsidered {
    let (dev, ino) = (d.sample.dev, d.sample.ino);
    let hold = locks.hold(&d.file, dev, ino);
    if let KernelHold::Held { .. } = hold {
        return Reconsidered::Conclude(hold);
    }
    let owner = d.sample.doc.as_ref().map(|doc| doc.owner.pid);
    if !locks.read_whole()
        && let (Some(Liveness::Alive), Some(pid)) = (&d.liveness, owner)
    {
        match walks.hold(pid, dev, ino, d.read_at, ticks) {
            Walked::Holds(h) => {
                return Reconsidered::Conclude(KernelHold::Held {
                    pids: vec![i64::from(pid)],
                    shared: h.mode == LockMode::Shared,
                });
            }
            Walked::OverBudget => {
                return Reconsidered::Undecided(Undecided::WalkBudget {
                    budget: WALK_BUDGET,
                });
            }
            // Another user's process: the table is all there is.
            Walked::DoesNotHold | Walked::Unreadable => {}
        }
    }
    if !changed(&d.file, &d.content) {
        return Reconsidered::Conclude(hold);
    }
    if d.looks >= LOOKS {
        return Reconsidered::Undecided(Undecided::KeptChanging { looks: d.looks });
    }
    Reconsidered::Changed
}

/// The descriptor walks of one scan: each process's descriptors are walked
/// once, and again only for a record read after that walk, within
/// [`WALK_BUDGET`] descriptors in all.
pub(super) struct Walks {
    left: usize,
    /// Each walked process, and when it was walked.
    done: HashMap<u32, (u64, DescriptorWalk)>,
}

/// What a process's descriptors say about one lock.
pub(super) enum Walked {
    Holds(sys::ProcessHold),
    DoesNotHold,
    OverBudget,
    Unreadable,
}

impl Walks {
    pub(super) fn new() -> Walks {
        Walks {
            left: WALK_BUDGET,
            done: HashMap::new(),
        }
    }

    /// How `pid` holds the lock on (dev, ino), from a walk made after tick
    /// `after` (a descriptor it opened since the walk is not seen).
    pub(super) fn hold(
        &mut self,
        pid: u32,
        dev: u64,
        ino: u64,
        after: u64,
        ticks: &mut u64,
    ) -> Walked {
        let fresh = self.done.get(&pid).is_some_and(|(at, _)| *at > after);
        if !fresh {
            *ticks += 1;
            let walk = sys::walk_descriptors(pid, &mut self.left);
            self.done.insert(pid, (*ticks, walk));
        }
        match self.done.get(&pid).map(|(_, walk)| walk) {
            Some(DescriptorWalk::Open(open)) => match open.hold(dev, ino) {
                Some(h) => Walked::Holds(h),
                None => Walked::DoesNotHold,
            },
            Some(DescriptorWalk::OverBudget) => Walked::OverBudget,
            Some(DescriptorWalk::Unreadable) | None => Walked::Unreadable,
        }
    }
}
