//! `reap`: clear the litter of dead owners, safely, and say what was seen.

use std::fmt;
use std::fs::TryLockError;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::error::Operation;
use crate::inspect::{Finding, InspectOptions, LockReport, LockState, open_for_inspect};
use crate::record::{self, LockDocument};
use crate::{DecodeError, Error, OwnerRecord, Result, sys};

/// Options for [`reap`]. A dry run unless [`remove`](ReapOptions::remove) is set.
///
/// ```
/// # fn main() -> Result<(), lockfile::Error> {
/// # let dir = tempfile::tempdir().unwrap();
/// let report = lockfile::reap(dir.path(), lockfile::ReapOptions::new().remove(true))?;
/// for entry in &report.entries {
///     println!("{}: {} ({})", entry.path.display(), entry.action, entry.reason);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct ReapOptions {
    remove: bool,
    older_than: Duration,
    include_foreign: bool,
}

impl ReapOptions {
    /// A dry run that keeps files from other hosts.
    pub fn new() -> ReapOptions {
        ReapOptions::default()
    }

    /// Actually remove `stale` and `debris` files.
    ///
    /// Default: false, report what would be removed.
    pub fn remove(&mut self, remove: bool) -> &mut Self {
        self.remove = remove;
        self
    }

    /// Keep files whose last change (modification time) is younger than this.
    ///
    /// Default: zero. The kernel lock already says whether anyone holds a
    /// file, so age is not needed to decide it is litter.
    pub fn older_than(&mut self, age: Duration) -> &mut Self {
        self.older_than = age;
        self
    }

    /// Also remove stale records written on other hosts.
    ///
    /// Default: false. Another host's process cannot be checked from here, and
    /// on a directory shared between hosts (NFS) the local kernel may not see
    /// that host's lock. Such files are kept and reported, never skipped.
    pub fn include_foreign(&mut self, include: bool) -> &mut Self {
        self.include_foreign = include;
        self
    }
}

/// What [`reap`] did with one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReapAction {
    /// A dry run would remove it.
    WouldRemove,
    /// Removed.
    Removed,
    /// Left in place; the reason says why.
    Kept,
}

impl fmt::Display for ReapAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReapAction::WouldRemove => "would_remove",
            ReapAction::Removed => "removed",
            ReapAction::Kept => "kept",
        })
    }
}

/// One file [`reap`] looked at.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct ReapEntry {
    /// The file.
    pub path: PathBuf,
    /// Its state when inspected, `None` when it could not be inspected.
    pub state: Option<LockState>,
    /// What was done.
    pub action: ReapAction,
    /// Why, in words.
    pub reason: String,
    /// The owner record the file held, if any.
    pub owner: Option<OwnerRecord>,
}

/// Everything [`reap`] saw: one entry per `*.lock` file, nothing skipped.
#[derive(Clone, Debug, Default, Serialize)]
#[non_exhaustive]
pub struct ReapReport {
    /// One entry per file, sorted by name.
    pub entries: Vec<ReapEntry>,
}

impl ReapReport {
    /// How many files were removed.
    pub fn removed(&self) -> usize {
        self.count(ReapAction::Removed)
    }

    /// How many files a dry run would remove.
    pub fn would_remove(&self) -> usize {
        self.count(ReapAction::WouldRemove)
    }

    fn count(&self, action: ReapAction) -> usize {
        self.entries.iter().filter(|e| e.action == action).count()
    }
}

/// Removes the `stale` and `debris` `*.lock` files in `dir` that nobody holds,
/// and reports every file it looked at.
///
/// To remove a file, `reap` takes its lock for the moment it takes to
/// re-check and unlink it: a `try_acquire` of that file in the same instant
/// reports contention, naming the dead owner of the stale record. Reap while
/// the jobs are not starting (at boot, from a timer of its own) if that
/// matters.
///
/// Never removes a held lock. Each removal re-takes the file's lock and
/// re-checks, while holding it, that the path still names the same file with
/// the same content; only then does it unlink. A process that was waiting on
/// the removed file notices (every acquirer re-checks identity after
/// locking) and retries on a fresh file.
///
/// Kept, and reported with the reason:
/// - held and free files (a `free` file is a lock at rest);
/// - stale records from other hosts, unless
///   [`include_foreign`](ReapOptions::include_foreign);
/// - stale records that carry the job's last success, which silence alarms
///   need (the next acquire reuses the file anyway);
/// - files changed more recently than [`older_than`](ReapOptions::older_than);
/// - symlinks and other non-regular files (never touched).
///
/// # Errors
///
/// [`Error::DirectoryNotFound`] or [`Error::PermissionDenied`] when `dir`
/// cannot be listed. Failures on single files are reported in their entries.
pub fn reap(dir: impl AsRef<Path>, opts: &ReapOptions) -> Result<ReapReport> {
    let dir = dir.as_ref();
    let reports = InspectOptions::new().inspect_dir(dir)?;
    let entries = reports
        .into_iter()
        // The directory's own lock is not one of its files.
        .filter(|report| !matches!(report, Ok(r) if r.path == dir))
        .map(|report| match report {
            Ok(report) => reap_one(report, opts),
            Err(e) => ReapEntry {
                path: e.path().to_path_buf(),
                state: None,
                action: ReapAction::Kept,
                reason: e.to_string(),
                owner: None,
            },
        })
        .collect();
    Ok(ReapReport { entries })
}

fn reap_one(report: LockReport, opts: &ReapOptions) -> ReapEntry {
    let (action, reason) = decide(&report, opts);
    let (action, reason) = match action {
        ReapAction::WouldRemove if opts.remove => match remove_if_unchanged(&report) {
            Ok(()) => {
                tracing::info!(
                    name: "stale_lock_removed",
                    event = "stale_lock_removed",
                    path = %report.path.display(),
                    state = report.state.as_str(),
                    stale_pid = report.owner.as_ref().map(|o| o.pid),
                    reason = %reason,
                );
                (ReapAction::Removed, reason)
            }
            Err(why) => (ReapAction::Kept, why),
        },
        other => (other, reason),
    };
    ReapEntry {
        path: report.path,
        state: Some(report.state),
        action,
        reason,
        owner: report.owner,
    }
}

/// The decision from the inspection alone; removal re-checks under the lock.
fn decide(report: &LockReport, opts: &ReapOptions) -> (ReapAction, String) {
    let kept = |reason: String| (ReapAction::Kept, reason);
    let owner = report.owner.as_ref();
    match report.state {
        LockState::Absent => return kept("removed by someone else meanwhile".to_owned()),
        LockState::Free => {
            return kept("free: released cleanly; a lock at rest is left alone".to_owned());
        }
        LockState::Held => {
            let by = match report.holders.first() {
                Some(h) => h.to_string(),
                None => "a process not visible from here".to_owned(),
            };
            return kept(format!("held by {by}"));
        }
        LockState::Stale | LockState::Debris => {}
    }
    if report.content_error == Some(DecodeError::Foreign) {
        return kept(
            "not a lockfile record (it does not start like one): another tool's file, left alone"
                .to_owned(),
        );
    }
    if let Some(owner) = owner
        && !owner.is_local()
        && !opts.include_foreign
    {
        return kept(format!(
            "stale record from host {:?}: its owner cannot be checked from here (include foreign records to remove it)",
            owner.hostname
        ));
    }
    if let Some(t) = report.last_success {
        return kept(format!(
            "stale, but it carries the job's last success ({}), which the silence alarm needs; the next acquire reuses the file",
            crate::rfc3339::display(t)
        ));
    }
    if let Some(run) = &report.last_run {
        return kept(format!(
            "stale, but it carries the job's run history (last run {}, {} failure(s) in a row), which `check` needs; the next acquire reuses the file",
            run.outcome, run.consecutive_failures
        ));
    }
    let changed_ago = report
        .modified
        .map(|m| SystemTime::now().duration_since(m).unwrap_or_default());
    if let Some(age) = changed_ago
        && age < opts.older_than
    {
        return kept(format!(
            "changed {} ago, more recently than the {} threshold",
            humantime::format_duration(Duration::from_secs(age.as_secs())),
            humantime::format_duration(opts.older_than)
        ));
    }
    let reason = match (report.state, owner) {
        (LockState::Stale, Some(owner)) => {
            let dead = report
                .findings
                .iter()
                .find(|f| matches!(f, Finding::OwnerDead { .. }))
                .map(|f| format!(": {f}"))
                .unwrap_or_default();
            format!("stale: {owner} never released it and nobody holds it{dead}")
        }
        _ => format!(
            "debris: nobody holds it and {}",
            report
                .content_error
                .as_ref()
                .map_or_else(|| "it holds no record".to_owned(), ToString::to_string)
        ),
    };
    (ReapAction::WouldRemove, reason)
}

/// Takes the file's lock, re-checks under it that the path still names the
/// inspected file, that its content is still the litter we saw, and that no
/// other tool holds a POSIX lock on it; then unlinks. Two reapers, or a reaper
/// and a new holder, cannot both act on one file: whoever does not get the
/// lock leaves it alone.
fn remove_if_unchanged(report: &LockReport) -> std::result::Result<(), String> {
    let path = &report.path;
    let kept = |why: &str| Err(format!("not removed: {why}"));
    let file = match open_for_inspect(path) {
        Ok(f) => f,
        Err(e) => {
            return Err(format!(
                "not removed: {}",
                Error::from_io(Operation::Remove, path, e)
            ));
        }
    };
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return kept("someone took the lock meanwhile"),
        Err(TryLockError::Error(e)) => {
            return Err(Error::from_io(Operation::Lock, path, e).to_string());
        }
    }
    let (Ok(ours), Ok(now_at_path)) = (file.metadata(), std::fs::symlink_metadata(path)) else {
        return kept("the file vanished meanwhile");
    };
    if !ours.file_type().is_file()
        || ours.dev() != now_at_path.dev()
        || ours.ino() != now_at_path.ino()
    {
        return kept("the path names another file now");
    }
    if ours.len() != report.size || ours.modified().ok() != report.modified {
        return kept("it changed meanwhile");
    }
    // flock and POSIX locks do not conflict on Linux: a file that another
    // tool locks with fcntl or lockf is in use, whatever it holds.
    let lockers = sys::KernelLocks::snapshot()
        .map(|locks| locks.other_lockers(&file, ours.dev(), ours.ino()))
        .map_err(|e| format!("not removed: cannot read the kernel lock table: {e}"))?;
    if !lockers.is_empty() {
        return kept(&format!(
            "another tool holds a POSIX lock on it (pid {lockers:?})"
        ));
    }
    let mut small = [0u8; record::SMALL_READ];
    let content = record::read_content(&file, &mut small).map_err(|e| e.to_string())?;
    let still_litter = match (report.state, LockDocument::decode(&content)) {
        (LockState::Stale, Ok(doc)) => {
            !doc.released && Some(&doc.owner.token) == report.owner.as_ref().map(|o| &o.token)
        }
        (LockState::Debris, Err(e)) => e != DecodeError::Foreign && e != DecodeError::Empty,
        _ => false,
    };
    if !still_litter {
        return kept("its content changed meanwhile");
    }
    std::fs::remove_file(path).map_err(|e| {
        format!(
            "not removed: {}",
            Error::from_io(Operation::Remove, path, e)
        )
    })?;
    // Closing `file` releases the lock on the now nameless inode; anyone who
    // was waiting on it re-checks the path and starts over on a fresh file.
    Ok(())
}
