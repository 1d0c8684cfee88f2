//! Why `reap` kept or removed a file: a reason for every file, as a type, so
//! that callers match on it rather than on prose.

use std::fmt;
use std::time::{Duration, SystemTime};

use crate::{DecodeError, Error, Finding, Holder, Outcome, OwnerRecord, Undecided};

/// Why [`reap()`](crate::reap()) did what it did with one file. Its `Display` is
/// the sentence `lockfile reap` prints; [`kind`](ReapReason::kind) names the
/// variant for JSON.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReapReason {
    /// The file disappeared between the listing and the look.
    Vanished,
    /// Nobody holds it and its record was released: a lock at rest.
    Free,
    /// Someone holds it; `None` when the holder is not visible from here.
    Held(Option<Holder>),
    /// Inspect could not tell whether it is held (why, when it said): only
    /// litter is removed, and this may not be litter.
    Undecided(Option<Undecided>),
    /// Its content is someone else's.
    ForeignContent,
    /// A stale record from another host, whose owner cannot be checked here.
    ForeignHost(String),
    /// Stale, but it carries the job's last success, which silence alarms
    /// need.
    CarriesLastSuccess(SystemTime),
    /// Stale, but it carries the job's run history, which `check` needs.
    CarriesRunHistory {
        /// How the last run ended.
        outcome: Outcome,
        /// Its failures in a row.
        consecutive_failures: u32,
    },
    /// Changed more recently than the `older_than` threshold.
    RecentlyChanged {
        /// How long ago it changed.
        ago: Duration,
        /// The threshold.
        threshold: Duration,
    },
    /// A dead owner's record: removable.
    Stale {
        /// The owner that never released it.
        owner: Box<OwnerRecord>,
        /// Why it is dead, when known.
        dead: Option<Finding>,
    },
    /// A torn record of ours that nobody holds: removable.
    Torn(Option<DecodeError>),
    /// Litter, but the file has other names (hard links): removing this one
    /// would leave the lock on a file that lives on under another name, and
    /// an acquirer that was waiting on it could not tell (see the crate's
    /// protocol, step 3). Found by the re-check under the lock.
    HardLinked {
        /// How many names the file has.
        links: u64,
    },
    /// Removal was attempted, and the re-check under the lock found a reason
    /// to keep the file after all.
    Changed(ReapChange),
    /// The file could not be inspected, or removing it failed.
    Failed(Error),
}

/// What the re-check under the lock found changed since the inspection.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReapChange {
    /// Someone took the lock meanwhile.
    Locked,
    /// The file vanished meanwhile.
    Vanished,
    /// The path names another file now.
    Replaced,
    /// Its size or modification time changed.
    Modified,
    /// Another tool holds a POSIX (`fcntl`, `lockf`) lock on it.
    PosixLocked(Vec<i64>),
    /// Its content is no longer the litter that was inspected.
    Content,
}

impl ReapReason {
    /// A stable name for the variant: `vanished`, `free`, `held`, `undecided`,
    /// `foreign_content`, `foreign_host`, `carries_last_success`,
    /// `carries_run_history`, `recently_changed`, `stale`, `torn`,
    /// `hard_linked`, `changed` or `failed`.
    pub fn kind(&self) -> &'static str {
        match self {
            ReapReason::Vanished => "vanished",
            ReapReason::Free => "free",
            ReapReason::Held(_) => "held",
            ReapReason::Undecided(_) => "undecided",
            ReapReason::ForeignContent => "foreign_content",
            ReapReason::ForeignHost(_) => "foreign_host",
            ReapReason::CarriesLastSuccess(_) => "carries_last_success",
            ReapReason::CarriesRunHistory { .. } => "carries_run_history",
            ReapReason::RecentlyChanged { .. } => "recently_changed",
            ReapReason::Stale { .. } => "stale",
            ReapReason::Torn(_) => "torn",
            ReapReason::HardLinked { .. } => "hard_linked",
            ReapReason::Changed(_) => "changed",
            ReapReason::Failed(_) => "failed",
        }
    }
}

impl fmt::Display for ReapReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = |d: &Duration| humantime::format_duration(Duration::from_secs(d.as_secs()));
        match self {
            ReapReason::Vanished => f.write_str("removed by someone else meanwhile"),
            ReapReason::Free => f.write_str("free: released cleanly; a lock at rest is left alone"),
            ReapReason::Held(Some(h)) => write!(f, "held by {h}"),
            ReapReason::Held(None) => f.write_str("held by a process not visible from here"),
            ReapReason::Undecided(Some(why)) => {
                write!(f, "could not tell whether it is held ({why}), left alone")
            }
            ReapReason::Undecided(None) => {
                f.write_str("could not tell whether it is held, left alone")
            }
            ReapReason::ForeignContent => f.write_str(
                "not a lockfile record: someone else's content (another tool's file), left alone",
            ),
            ReapReason::ForeignHost(host) => write!(
                f,
                "stale record from host {}: its owner cannot be checked from here (include foreign records to remove it)",
                crate::text::quoted(host)
            ),
            ReapReason::CarriesLastSuccess(t) => write!(
                f,
                "stale, but it carries the job's last success ({}), which the silence alarm needs; the next acquire reuses the file",
                crate::rfc3339::display(*t)
            ),
            ReapReason::CarriesRunHistory {
                outcome,
                consecutive_failures,
            } => write!(
                f,
                "stale, but it carries the job's run history (last run {outcome}, {consecutive_failures} failure(s) in a row), which `check` needs; the next acquire reuses the file"
            ),
            ReapReason::RecentlyChanged { ago, threshold } => write!(
                f,
                "changed {} ago, more recently than the {} threshold",
                d(ago),
                humantime::format_duration(*threshold)
            ),
            ReapReason::Stale { owner, dead } => {
                write!(f, "stale: {owner} never released it and nobody holds it")?;
                match dead {
                    Some(dead) => write!(f, ": {dead}"),
                    None => Ok(()),
                }
            }
            ReapReason::Torn(why) => match why {
                Some(why) => write!(f, "debris: nobody holds it and {why}"),
                None => f.write_str("debris: nobody holds it and it holds no record"),
            },
            ReapReason::HardLinked { links } => write!(
                f,
                "not removed: the file has {links} names (hard links), and a lock file is only ever removed by its last name"
            ),
            ReapReason::Changed(change) => {
                f.write_str("not removed: ")?;
                match change {
                    ReapChange::Locked => f.write_str("someone took the lock meanwhile"),
                    ReapChange::Vanished => f.write_str("the file vanished meanwhile"),
                    ReapChange::Replaced => f.write_str("the path names another file now"),
                    ReapChange::Modified => f.write_str("it changed meanwhile"),
                    ReapChange::PosixLocked(pids) => {
                        write!(f, "another tool holds a POSIX lock on it (pid {pids:?})")
                    }
                    ReapChange::Content => f.write_str("its content changed meanwhile"),
                }
            }
            ReapReason::Failed(e) => write!(f, "not removed: {e}"),
        }
    }
}
