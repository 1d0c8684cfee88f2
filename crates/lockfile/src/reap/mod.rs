//! `reap`: clear the litter of dead owners, safely, and say what was seen.

use std::fmt;
use std::fs::{File, TryLockError};
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::content::Content;
use crate::error::Operation;
use crate::inspect::{
    Finding, InspectOptions, LockReport, LockState, open_dir, open_for_inspect_at,
};
use crate::record::{self, LockDocument};
use crate::{Error, OwnerRecord, Result, sys};

mod reason;
pub use reason::{ReapChange, ReapReason};

/// Options for [`reap`]. A dry run unless [`remove`](ReapOptions::remove) is set.
///
/// ```
/// # fn main() -> Result<(), lockfile::Error> {
/// # let dir = tempfile::tempdir().unwrap();
/// let report = lockfile::reap(dir.path(), lockfile::ReapOptions::new().remove(true))?;
/// for entry in &report.entries {
///     println!("{}: {} ({})", lockfile::text::path(&entry.path), entry.action, entry.reason);
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
#[non_exhaustive]
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

/// One file [`reap`] looked at. Serialises as `lockfile reap --json` prints
/// it: `path`, `state`, `action`, `reason` (the sentence), `reason_kind`
/// ([`ReapReason::kind`](crate::reap::ReapReason::kind)) and `owner`.
#[derive(Debug)]
#[non_exhaustive]
pub struct ReapEntry {
    /// The file: the directory given to [`reap`] joined with its name. What
    /// was removed is that name in that directory as `reap` opened it, at
    /// its start.
    pub path: PathBuf,
    /// Its state when inspected, `None` when it could not be inspected.
    pub state: Option<LockState>,
    /// What was done.
    pub action: ReapAction,
    /// Why.
    pub reason: ReapReason,
    /// The owner record the file held, if any.
    pub owner: Option<OwnerRecord>,
}

impl Serialize for ReapEntry {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct EntryJson<'a> {
            version: u32,
            #[serde(flatten)]
            path: crate::inspect::JsonPath<'a>,
            state: Option<LockState>,
            action: ReapAction,
            reason: String,
            reason_kind: &'static str,
            owner: Option<crate::json::OwnerJson<'a>>,
        }
        EntryJson {
            version: crate::json::VERSION,
            path: crate::inspect::JsonPath(&self.path),
            state: self.state,
            action: self.action,
            reason: self.reason.to_string(),
            reason_kind: self.reason.kind(),
            owner: self.owner.as_ref().map(crate::json::OwnerJson),
        }
        .serialize(s)
    }
}

/// Everything [`reap`] saw: one entry per `*.lock` file, nothing skipped.
#[derive(Debug, Default, Serialize)]
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
/// re-checks, while holding it, that the name still refers to the same file
/// (device and inode) with the same content; only then does it unlink.
///
/// `dir` is opened once, and every file is listed, opened, checked and
/// unlinked through that descriptor (`openat`, `unlinkat`, never following
/// a symlink in the last component), never by its full path: someone who
/// swaps a component of `dir` for a symlink to another directory meanwhile
/// cannot make `reap` remove a file there. An entry's path is `dir` joined
/// with the file's name, naming the file in the directory that was opened. A process that was waiting on
/// the removed file notices (every acquirer re-checks identity after
/// locking) and retries on a fresh file.
///
/// Kept, and reported with the reason:
/// - held and free files (a `free` file is a lock at rest);
/// - stale records from other hosts, unless
///   [`include_foreign`](ReapOptions::include_foreign);
/// - stale records that carry the job's last success or run history, which
///   silence and failure alarms need (the next acquire reuses the file
///   anyway);
/// - files whose content is someone else's ([`Content::Foreign`]);
/// - files changed more recently than [`older_than`](ReapOptions::older_than);
/// - symlinks and other non-regular files (never touched).
///
/// # Errors
///
/// [`Error::DirectoryNotFound`] or [`Error::PermissionDenied`] when `dir`
/// cannot be listed. Failures on single files are reported in their entries.
pub fn reap(dir: impl AsRef<Path>, opts: &ReapOptions) -> Result<ReapReport> {
    let dir = dir.as_ref();
    // Opened once: every file is listed, opened, checked and unlinked
    // through this descriptor, never by its path again. Whoever may rename
    // a component of `dir` (swap it for a symlink to someone else's
    // directory) then changes nothing but what this path named at this
    // moment; a file checked here is the file unlinked.
    let dir_fd = open_dir(dir)?;
    let reports = InspectOptions::new().inspect_open_dir(dir, &dir_fd)?;
    let entries = reports
        .into_iter()
        // The directory's own lock is not one of its files.
        .filter(|report| !matches!(report, Ok(r) if r.path == dir))
        .map(|report| match report {
            Ok(report) => reap_one(&dir_fd, report, opts),
            Err(e) => ReapEntry {
                path: e.path().to_path_buf(),
                state: None,
                action: ReapAction::Kept,
                reason: ReapReason::Failed(e),
                owner: None,
            },
        })
        .collect();
    Ok(ReapReport { entries })
}

fn reap_one(dir: &File, report: LockReport, opts: &ReapOptions) -> ReapEntry {
    let (action, reason) = decide(&report, opts);
    let (action, reason) = match action {
        ReapAction::WouldRemove if opts.remove => match remove_if_unchanged(dir, &report) {
            Ok(()) => {
                tracing::info!(
                    name: "stale_lock_removed",
                    event = "stale_lock_removed",
                    path = %crate::text::path(&report.path),
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
fn decide(report: &LockReport, opts: &ReapOptions) -> (ReapAction, ReapReason) {
    let kept = |reason: ReapReason| (ReapAction::Kept, reason);
    let owner = report.owner.as_ref();
    match report.state {
        LockState::Absent => return kept(ReapReason::Vanished),
        LockState::Free => return kept(ReapReason::Free),
        LockState::Held => return kept(ReapReason::Held(report.holders.first().cloned())),
        LockState::Undecided => {
            let why = report.findings.iter().find_map(|f| match f {
                Finding::Undecided { reason } => Some(*reason),
                _ => None,
            });
            return kept(ReapReason::Undecided(why));
        }
        LockState::Stale | LockState::Debris => {}
    }
    if report.content == Some(Content::Foreign) {
        return kept(ReapReason::ForeignContent);
    }
    if let Some(owner) = owner
        && !owner.is_local()
        && !opts.include_foreign
    {
        return kept(ReapReason::ForeignHost(owner.hostname.to_string()));
    }
    if let Some(t) = report.last_success {
        return kept(ReapReason::CarriesLastSuccess(t));
    }
    if let Some(run) = &report.last_run {
        return kept(ReapReason::CarriesRunHistory {
            outcome: run.outcome,
            consecutive_failures: run.consecutive_failures,
        });
    }
    let changed_ago = report
        .modified
        .map(|m| SystemTime::now().duration_since(m).unwrap_or_default());
    if let Some(ago) = changed_ago
        && ago < opts.older_than
    {
        return kept(ReapReason::RecentlyChanged {
            ago,
            threshold: opts.older_than,
        });
    }
    let reason = match (report.state, owner) {
        (LockState::Stale, Some(owner)) => ReapReason::Stale {
            owner: Box::new(owner.clone()),
            dead: report
                .findings
                .iter()
                .find(|f| matches!(f, Finding::OwnerDead { .. }))
                .cloned(),
        },
        _ => ReapReason::Torn(report.content_error.clone()),
    };
    (ReapAction::WouldRemove, reason)
}

/// Takes the file's lock, re-checks under it that the path still names the
/// inspected file, that its content is still the litter we saw, and that no
/// other tool holds a POSIX lock on it; then unlinks. Two reapers, or a reaper
/// and a new holder, cannot both act on one file: whoever does not get the
/// lock leaves it alone.
///
/// Everything goes through `dir`, the directory as the reap opened it: the
/// file is opened by its name there (never through a symlink), and
/// unlinked there only while that name still refers to the file checked.
fn remove_if_unchanged(dir: &File, report: &LockReport) -> std::result::Result<(), ReapReason> {
    let path = &report.path;
    let changed = |change: ReapChange| Err(ReapReason::Changed(change));
    let failed = |op: Operation, e: std::io::Error| ReapReason::Failed(Error::from_io(op, path, e));
    // The report names the file `dir/NAME`, as the listing built it.
    let name = Path::new(path.file_name().ok_or_else(|| {
        failed(
            Operation::Remove,
            std::io::Error::from_raw_os_error(libc::EINVAL),
        )
    })?);
    let file = match open_for_inspect_at(dir, name) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return changed(ReapChange::Vanished);
        }
        Err(e) => return Err(failed(Operation::Remove, e)),
    };
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return changed(ReapChange::Locked),
        Err(TryLockError::Error(e)) => return Err(failed(Operation::Lock, e)),
    }
    let (Ok(ours), Ok(id), Ok(now_at_name)) = (
        file.metadata(),
        sys::identity_of(&file),
        sys::identity_in(dir, name),
    ) else {
        return changed(ReapChange::Vanished);
    };
    if !ours.file_type().is_file() || !id.same_file(&now_at_name) {
        return changed(ReapChange::Replaced);
    }
    if ours.nlink() > 1 {
        return Err(ReapReason::HardLinked {
            links: ours.nlink(),
        });
    }
    if ours.len() != report.size || ours.modified().ok() != report.modified {
        return changed(ReapChange::Modified);
    }
    // flock and POSIX locks do not conflict on Linux: a file that another
    // tool locks with fcntl or lockf is in use, whatever it holds.
    let lockers = sys::KernelLocks::snapshot()
        .map(|locks| locks.other_lockers(&file, ours.dev(), ours.ino()))
        .map_err(|e| failed(Operation::Read, e))?;
    if !lockers.is_empty() {
        return changed(ReapChange::PosixLocked(lockers));
    }
    let mut small = record::SmallRead::new();
    let content =
        record::read_content(&file, &mut small).map_err(|e| failed(Operation::Read, e))?;
    // Judged by the size of the file now locked, not only by the bytes read:
    // a file longer than any record is someone else's, whatever it begins
    // with.
    let decoded = LockDocument::decode_file(&content, ours.len());
    let still_litter = match (report.state, &decoded) {
        (LockState::Stale, Ok(doc)) => {
            !doc.released && Some(&doc.owner.token) == report.owner.as_ref().map(|o| &o.token)
        }
        (LockState::Debris, Err(_)) => Content::from_decoded(&decoded) == Content::Torn,
        _ => false,
    };
    if !still_litter {
        return changed(ReapChange::Content);
    }
    // The last look before the unlink, still under the lock: the name must
    // still refer to the file just checked.
    match sys::unlink_if_same(dir.as_fd(), name, &id) {
        Ok(true) => {}
        Ok(false) => return changed(ReapChange::Replaced),
        Err(e) => return Err(failed(Operation::Remove, e)),
    }
    // Closing `file` releases the lock on the now nameless inode; anyone who
    // was waiting on it re-checks the path and starts over on a fresh file.
    Ok(())
}
