//! Evicting a hung holder, safely: the judgement whether a holder that broke
//! its own heartbeat promise may be stopped, and the procedure that stops it
//! and takes the lock ([`LockOptions::evict_after`]).
//!
//! A dead holder needs none of this: the kernel frees its lock. A live,
//! hung one keeps the lock forever, and this is for holders whose own
//! supervision cannot act: a library holder that promised an interval and
//! stopped beating, or a `lockfile run` whose wrapper is itself stuck or
//! stopped.
//!
//! # The procedure
//!
//! 1. **Judge the record.** From `inspect`: the file is not planted (its
//!    owner could write any record and any heartbeat), the lock is held,
//!    the file holds an unreleased record of ours, the record promises a heartbeat that is
//!    not a wrapper's, it was written on this host in this boot, and it
//!    carries the start time and PID namespace that, with the PID, name one
//!    process. Then the silence: longer than `evict_after`, and longer than
//!    the promise (for a `--watchdog` holder, the promise plus its
//!    kill-after, so that its own watchdog acts first). Until then a waiting
//!    acquire waits, and judges again when the promise would be broken.
//! 2. **Verify the owner.** Resolve its PID in our namespace, open a pidfd
//!    for it, check through `/proc` that the process has the recorded start
//!    time, then check that the pidfd's process still lives: so `/proc`
//!    described the pidfd's process, not one that reused the PID.
//! 3. **Find everyone to stop**, each verified the same way: the owner's
//!    descendants (by their parent links, read while the parent's pidfd is
//!    known to be alive), and every process that holds the kernel lock
//!    (from the kernel's lock table and every process's descriptors, read
//!    again through the pidfd's window). Every holder must be the owner or
//!    one of its descendants: a holder outside that tree refuses the
//!    eviction, even one that shares the owner's own open file, since a
//!    descriptor can be passed to any process (SCM_RIGHTS) or kept by a
//!    daemon that left the tree, and whoever wrote the record would aim our
//!    signals at it. The owner must run as one uid, real and effective, and
//!    every process to stop as that uid too; unless we are root, it must be
//!    ours, and as root the lock file must belong to it. This process must
//!    not be among them. Otherwise nothing is sent.
//! 4. **Last look.** The heartbeat must not have moved since the judgement.
//! 5. **Stop**, through the pidfds only: SIGTERM and SIGCONT to all, and to
//!    descendants forked meanwhile; SIGKILL to the survivors after
//!    kill-after (and to what they forked); wait for them to exit, then for
//!    the kernel lock.
//! 6. **Record.** The new holder's record keeps `evicted` (token, pid, job,
//!    silence), and the last run is the evicted run's, outcome `evicted`,
//!    its failures in a row counted on from the history it carried.
//!
//! Anything that fails the judgement leaves the acquire as it would be
//! without eviction, with the reason ([`EvictionRefused`](crate::error::EvictionRefused)) in its error.

// The steps live in the files below, and their dependencies run one way:
// `judge` plans from `targets`, `stop` carries the plan out and yields the
// `eviction`; this file only drives them, and waits between judgements.
mod eviction;
mod judge;
mod stop;
mod targets;

use std::fs::{File, TryLockError};
use std::io;
use std::os::fd::AsFd;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{EvictionRefused, Operation};
use crate::holder::Named;
use crate::record::{self, LockDocument};
use crate::sys;
use crate::{Error, LockOptions, Result};
pub(crate) use eviction::Eviction;
use judge::{DEFAULT_KILL_AFTER, Judgement, judge};
use stop::Stop;

/// How long past kill-after `try_acquire` waits for the lock of a holder it
/// stopped.
const TRY_GRACE: Duration = Duration::from_secs(1);

/// A holder that cannot be evicted for a reason other than the clock is
/// judged again every `evict_after` while waiting, within these bounds: it
/// may have been replaced by one that can.
const REJUDGE_AT_LEAST: Duration = Duration::from_secs(1);
const REJUDGE_AT_MOST: Duration = Duration::from_secs(60);

/// How often a holder that moved or vanished while being judged is judged
/// again at once before `try_acquire` gives up.
const SETTLE_ATTEMPTS: u32 = 3;

/// How long an acquire may wait, as eviction sees it.
pub(crate) enum Patience {
    /// `try_acquire`: judge once; an eviction then waits at most kill-after + 1 s.
    Once,
    /// Wait, and judge again, until the deadline.
    Until(Instant),
    /// Wait, and judge again, as long as it takes.
    Forever,
}

/// Takes the lock on `file`, which someone holds, as `patience` allows,
/// evicting the holder when it may be. `Ok(None)`: the lock came free by
/// itself; `Ok(Some)`: it was taken from an evicted holder.
///
/// # Errors
///
/// [`Error::Contended`] or [`Error::Timeout`] carrying why the holder was
/// not evicted; [`Error::Io`] when the lock cannot be waited for.
pub(crate) fn take(
    opts: &LockOptions,
    path: &Path,
    file: &File,
    patience: Patience,
    started: Instant,
) -> Result<Option<Eviction>> {
    let evict_after = opts.evict_after.unwrap_or_default();
    let kill_after = opts.kill_after.unwrap_or(DEFAULT_KILL_AFTER);
    let rejudge = evict_after.clamp(REJUDGE_AT_LEAST, REJUDGE_AT_MOST);
    let lock_err = |e: io::Error| Error::from_io(Operation::Lock, path, e);
    let mut unsettled = 0;
    loop {
        let judged_at = Instant::now();
        // The reason not to evict (yet), and when to judge again.
        let (reason, again) = match judge(evict_after, path, file) {
            Judgement::Evict(plan) => {
                let bound = match patience {
                    Patience::Once => judged_at.checked_add(kill_after.saturating_add(TRY_GRACE)),
                    Patience::Until(deadline) => Some(deadline),
                    Patience::Forever => None,
                };
                match plan.stop_and_take(path, file, kill_after, bound) {
                    Ok(eviction) => return Ok(Some(eviction)),
                    Err(Stop::Lock(e)) => return Err(lock_err(e)),
                    // Someone else may hold it now: judge them, at once.
                    Err(Stop::NotTaken(reason)) => (reason, judged_at),
                }
            }
            Judgement::Refused(reason, None) => (reason, judged_at + rejudge),
            Judgement::Refused(reason, Some(again)) => (reason, again),
            Judgement::Moving(reason) => {
                // Released, or beaten, while we judged.
                match file.try_lock() {
                    Ok(()) => return Ok(None),
                    Err(TryLockError::Error(e)) => return Err(lock_err(e)),
                    Err(TryLockError::WouldBlock) => {}
                }
                unsettled += 1;
                if unsettled < SETTLE_ATTEMPTS {
                    continue;
                }
                (reason, judged_at + rejudge)
            }
        };
        unsettled = 0;
        let until = match patience {
            Patience::Once => {
                return match file.try_lock() {
                    Ok(()) => Ok(None),
                    Err(TryLockError::WouldBlock) => {
                        Err(refusal(path, file, started, reason, false))
                    }
                    Err(TryLockError::Error(e)) => Err(lock_err(e)),
                };
            }
            Patience::Until(deadline) => again.min(deadline),
            Patience::Forever => again,
        };
        if sys::lock_until(file.as_fd(), sys::LockMode::Exclusive, until).map_err(lock_err)? {
            return Ok(None);
        }
        if let Patience::Until(deadline) = patience
            && Instant::now() >= deadline
        {
            return Err(refusal(path, file, started, reason, true));
        }
    }
}

/// The contention error, carrying why the holder was not evicted.
fn refusal(
    path: &Path,
    file: &File,
    started: Instant,
    reason: EvictionRefused,
    timed_out: bool,
) -> Error {
    let mut small = record::SmallRead::new();
    let owner = record::read_content(file, &mut small)
        .ok()
        .and_then(|content| LockDocument::decode(&content).ok())
        .map(|doc| Box::new(doc.owner));
    let Named { owner, holders } = Named::new(file, owner);
    let not_evicted = Some(Box::new(reason));
    if timed_out {
        Error::Timeout {
            path: path.to_path_buf(),
            waited: started.elapsed(),
            owner,
            holders,
            not_evicted,
        }
    } else {
        Error::Contended {
            path: path.to_path_buf(),
            owner,
            holders,
            not_evicted,
        }
    }
}
