//! `inspect`: who holds a lock, since when, and is it still beating.
//!
//! Inspecting never takes the lock. On Linux the kernel's holder comes from
//! `/proc/locks`, so a concurrent `try_acquire` is never made to fail.

mod doubt;
mod finding;
mod health;
mod json_path;
mod known;
mod liveness;
mod open;
mod options;
mod report;
mod rules;
mod sample;
mod scan;
mod slots;

use std::io;
use std::path::Path;

pub use finding::{Described, Finding, Severity, Status, TimeField, Undecided};
pub use health::Unhealthy;
pub use json_path::JsonPath;
pub use known::known_findings;
pub(crate) use liveness::{Liveness, judge_owner};
pub(crate) use open::{open_dir, open_for_inspect_at};
pub use options::{BelievedHistory, InspectOptions};
pub use report::{LockReport, LockState};

// What a report is made of, described where it is defined.
pub use crate::content::{Content, NoRecord};
pub use crate::holder::Holder;

use crate::Result;
use open::{lock_files, open_error, open_one};
use scan::Scan;

impl InspectOptions {
    /// Inspects one lock file with these options. See [`inspect`].
    ///
    /// # Errors
    ///
    /// As [`inspect`].
    pub fn inspect(&self, path: impl AsRef<Path>) -> Result<LockReport> {
        let path = path.as_ref();
        let mut scan = Scan::new(self, path)?;
        let file = open_one(path)?;
        let mut reports = [scan.report(0, path.to_path_buf(), file)];
        scan.settle(&mut reports);
        let [report] = reports;
        report
    }

    /// Inspects every `*.lock` file in a directory with these options. See
    /// [`inspect_dir`].
    ///
    /// # Errors
    ///
    /// As [`inspect_dir`].
    pub fn inspect_dir(&self, dir: impl AsRef<Path>) -> Result<Vec<Result<LockReport>>> {
        let dir = dir.as_ref();
        let dir_fd = open_dir(dir)?;
        // A set of slots is one entry (see `crate::slot`); reap, which
        // calls the listing below, judges each slot's file as a lock file.
        Ok(slots::gather(self.inspect_open_dir(dir, &dir_fd)?))
    }

    /// [`inspect_dir`](Self::inspect_dir) of the directory `dir_fd`, opened
    /// from `dir` by the caller: its reports name its files `dir/NAME`.
    pub(crate) fn inspect_open_dir(
        &self,
        dir: &Path,
        dir_fd: &std::fs::File,
    ) -> Result<Vec<Result<LockReport>>> {
        let mut scan = Scan::new(self, dir)?;
        // The directory its files were opened from, for the planted rule.
        if let Ok(meta) = dir_fd.metadata() {
            scan.in_dir(crate::trust::DirFacts::of(&meta));
        }
        let entries = lock_files(dir, dir_fd)?;
        let mut reports = Vec::with_capacity(entries.len() + 1);
        match scan.own_lock(dir, dir_fd) {
            Ok(Some(report)) => reports.push(Ok(report)),
            Ok(None) => {}
            Err(e) => reports.push(Err(e)),
        }
        for entry in entries {
            let opened = open_for_inspect_at(dir_fd, entry.name());
            let path = entry.path;
            let slot = reports.len();
            let report = match opened {
                Ok(file) => scan.report(slot, path, Some(file)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => scan.report(slot, path, None),
                Err(e) => Err(open_error(&path, e)),
            };
            reports.push(report);
        }
        // The files in doubt are looked at again once all were read: one
        // more read of the table serves them all.
        scan.settle(&mut reports);
        Ok(reports)
    }
}

/// Inspects one lock file with default [`InspectOptions`], without taking the
/// lock.
///
/// A directory at the path is reported as a lock of its own, as flock(1)
/// takes one on a directory: [`LockState::Held`] (with its holders) or
/// [`LockState::Free`], [`no_record`](LockReport::no_record)
/// [`NoRecord::Directory`], and no content. To
/// inspect the lock files *in* a directory, use [`inspect_dir`].
///
/// # Errors
///
/// [`Error::Symlink`](crate::Error::Symlink) or
/// [`Error::NotRegularFile`](crate::Error::NotRegularFile) when a symlink
/// or something other than a regular file or a directory (a FIFO, a
/// device) sits at the path; [`Error::PermissionDenied`](crate::Error::PermissionDenied) when it
/// cannot be read; [`Error::Io`](crate::Error::Io) when `/proc/locks` cannot be read. A missing
/// file is not an error: its state is [`LockState::Absent`].
///
/// # Examples
///
/// ```
/// # fn main() -> Result<(), lockfile::Error> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("job.lock");
/// let guard = lockfile::LockGuard::try_acquire(&path)?;
/// let report = lockfile::inspect(&path)?;
/// assert_eq!(report.state, lockfile::LockState::Held);
/// assert_eq!(report.owner.unwrap().token, guard.record().token);
/// assert_eq!(report.holders[0].pid, std::process::id());
/// # Ok(())
/// # }
/// ```
pub fn inspect(path: impl AsRef<Path>) -> Result<LockReport> {
    InspectOptions::new().inspect(path)
}

/// Inspects every `*.lock` file in `dir` (sorted by name) with default
/// [`InspectOptions`]. One entry per file: a file that cannot be inspected (a
/// symlink, a FIFO, an unreadable file) gets its own error, and the scan goes
/// on. A `*.lock` entry that is a directory is reported as a directory's lock
/// (see [`inspect`]).
///
/// When someone holds the lock of `dir` itself (`flock DIR cmd`), the first
/// entry reports that lock: its path is `dir`, its state
/// [`LockState::Held`], its holders named, and its
/// [`no_record`](LockReport::no_record)
/// [`NoRecord::Directory`]. A directory nobody
/// holds locked adds no entry, so the listing stays that of its lock files.
/// That entry carries no silence finding
/// ([`expect_every`](InspectOptions::expect_every)): it is shown so that the
/// lock is never invisible, not as one of the lock files the alarm watches.
/// [`reap()`](crate::reap()) leaves the directory alone.
///
/// The kernel's lock table is read once for the whole directory, and once
/// more when a file is in doubt (a record naming a live owner on a lock the
/// table does not list); no lock is taken. A process's descriptors are
/// walked at most once for the files read before the walk, and a scan walks
/// a bounded number of descriptors in all: a file that would need more is
/// [`LockState::Undecided`], never `stale` or `free`.
///
/// # Errors
///
/// [`Error::DirectoryNotFound`](crate::Error::DirectoryNotFound) or [`Error::PermissionDenied`](crate::Error::PermissionDenied) when the
/// directory cannot be listed.
pub fn inspect_dir(dir: impl AsRef<Path>) -> Result<Vec<Result<LockReport>>> {
    InspectOptions::new().inspect_dir(dir)
}
