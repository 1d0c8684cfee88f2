//! Taking the kernel lock itself, as the wait allows, and naming the holder
//! when it is contended.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;
use std::time::Instant;

use crate::error::Operation;
use crate::evict::{self, Eviction, Patience};
use crate::holder::Named;
use crate::inspect::{Liveness, judge_owner};
use crate::record::{self, LockDocument, Release};
use crate::sys::{self, LockMode};
use crate::{Error, LockOptions, OwnerRecord, Result, Wait};

/// No lock without a record is left behind by a failed acquire. Unlock
/// before closing: a child that another thread forked meanwhile shares the
/// descriptor until its exec, and closing alone would leave the lock held
/// until then.
pub(super) fn unlocked(file: &File, e: Error) -> Error {
    let _ = sys::unlock(file.as_fd());
    e
}

/// Takes the exclusive lock on `file`, or, when it is held, judges its
/// holder and evicts it if it broke its own heartbeat promise (see
/// [`LockOptions::evict_after`]): eviction takes the wait over, judging
/// again between slices of it. `Some` when the lock was taken by evicting.
pub(super) fn lock_or_evict(
    opts: &LockOptions,
    path: &Path,
    file: &File,
    wait: &Wait,
    started: Instant,
) -> Result<Option<Eviction>> {
    let lock_err = |e: io::Error| Error::from_io(Operation::Lock, path, e);
    if sys::try_lock(file.as_fd(), LockMode::Exclusive).map_err(lock_err)? {
        return Ok(None);
    }
    report_contention(path, &|| Named::new(file, read_owner(file)));
    let patience = match wait {
        Wait::No => Patience::Once,
        Wait::Until(deadline) => Patience::Until(*deadline),
        Wait::Forever => Patience::Forever,
    };
    evict::take(opts, path, file, patience, started)
}

/// Takes the kernel lock on the open file `fd` refers to, in `mode`, as
/// `wait` allows. `holder` names the holder in a contention error.
pub(crate) fn take_kernel_lock(
    path: &Path,
    fd: BorrowedFd<'_>,
    mode: LockMode,
    wait: &Wait,
    started: Instant,
    holder: &dyn Fn() -> Named,
) -> Result<()> {
    let lock_err = |e: io::Error| Error::from_io(Operation::Lock, path, e);
    if sys::try_lock(fd, mode).map_err(lock_err)? {
        return Ok(());
    }
    match wait {
        Wait::No => Err(contended(path, holder())),
        Wait::Forever => {
            report_contention(path, holder);
            sys::lock(fd, mode).map_err(lock_err)
        }
        Wait::Until(deadline) => {
            report_contention(path, holder);
            if sys::lock_until(fd, mode, *deadline).map_err(lock_err)? {
                Ok(())
            } else {
                let Named { owner, holders } = holder();
                Err(Error::Timeout {
                    path: path.to_path_buf(),
                    waited: started.elapsed(),
                    owner,
                    holders,
                    not_evicted: None,
                })
            }
        }
    }
}

/// The record of whoever holds the lock that a `mode` request on `file` did
/// not get, for the error.
///
/// Only an unreleased record can name the holder: a released one is an
/// earlier holder's, under someone who wrote none (a shared holder,
/// flock(1)). Shared holders keep no record, so an unreleased record under
/// them is a dead owner's, or one whose release was never going to be
/// marked; only for such a record is the kernel's lock table read, since
/// that costs as much as the table is long, on every skipped run.
pub(crate) fn holder_record(file: &File, mode: LockMode) -> Option<Box<OwnerRecord>> {
    let doc = read_document(file)?;
    if doc.released {
        return None;
    }
    let owner = doc.owner;
    if mode == LockMode::Exclusive {
        let me = sys::process_identity();
        let maybe_litter = owner.release == Release::Unrecorded
            || (owner.hostname == me.hostname
                && matches!(judge_owner(&owner, &me), Liveness::Dead(_)));
        if maybe_litter && sys::held_shared(file) {
            return None;
        }
    }
    Some(Box::new(owner))
}

/// Reads the owner record of a lock someone else holds, for the error.
/// Records are 512 bytes: a small stack buffer serves, and only a full one
/// (a long job name, or debris) costs a larger read.
fn read_owner(file: &File) -> Option<Box<OwnerRecord>> {
    read_document(file).map(|doc| Box::new(doc.owner))
}

fn read_document(file: &File) -> Option<LockDocument> {
    let mut small = record::SmallRead::new();
    let content = record::read_content(file, &mut small).ok()?;
    LockDocument::decode(&content).ok()
}

/// Emits `lock_contended` before a wait, reading the holder's record only
/// when someone listens.
fn report_contention(path: &Path, holder: &dyn Fn() -> Named) {
    if tracing::enabled!(tracing::Level::INFO) {
        let _ = contended(path, holder());
    }
}

fn contended(path: &Path, Named { owner, holders }: Named) -> Error {
    match (&owner, holders.first()) {
        (Some(o), _) => tracing::info!(
            name: "lock_contended",
            event = "lock_contended",
            path = %crate::text::path(path),
            holder_pid = o.pid,
            holder_host = &*o.hostname,
            holder_age_s = o.age(std::time::SystemTime::now()).as_secs(),
        ),
        // No record: the kernel's holder, on this host.
        (None, Some(h)) => tracing::info!(
            name: "lock_contended",
            event = "lock_contended",
            path = %crate::text::path(path),
            holder_pid = h.pid,
        ),
        (None, None) => {
            tracing::info!(name: "lock_contended", event = "lock_contended", path = %crate::text::path(path));
        }
    }
    Error::Contended {
        path: path.to_path_buf(),
        owner,
        holders,
        not_evicted: None,
    }
}
