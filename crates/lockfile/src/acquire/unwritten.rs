//! A lock taken whose owner record is not written yet.
//!
//! The async waiter's helper thread (`crate::waiter`) takes locks for
//! futures that may be dropped before they are polled again, and a run that
//! never started must leave no record behind. So it stops short of step 5:
//! the record is written by whoever finishes the acquire (the future's
//! poll, the moment the run starts). Dropped instead, the lock is let go,
//! and nothing was written.

use std::fs::File;
use std::os::fd::{AsFd as _, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::write::{with_record, without_record};
use crate::content::NoRecord;
use crate::evict::Eviction;
use crate::guard::LockGuard;
use crate::{LockOptions, Result, sys};

/// What an attempt that took the lock hands on: a guard, or, when asked to
/// leave the record for later, the lock alone.
#[derive(Debug)]
pub(crate) enum Taken {
    Guard(LockGuard),
    Unwritten(Unwritten),
}

/// When an attempt that takes the lock writes the owner record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Record {
    /// At once: the attempt returns a guard.
    Now,
    /// Never: it returns an [`Unwritten`], whose [`finish`](Unwritten::finish)
    /// writes it. Only the async waiter asks for it.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    Deferred,
}

/// A held kernel lock, its file checked (steps 1 to 4 of the protocol),
/// without its record. Dropping it unlocks and closes the file.
#[derive(Debug)]
pub(crate) struct Unwritten {
    /// `Some` until [`finish`](Unwritten::finish) hands it to the guard.
    file: Option<File>,
    path: PathBuf,
    opts: LockOptions,
    /// Why the file takes no record, when it takes none: finishing then
    /// writes nothing.
    no_record: Option<NoRecord>,
    /// The file's content when the lock was taken, ours: the record is
    /// written over it (step 5), its history carried on.
    previous: Vec<u8>,
    /// The run evicted to take the lock, for the record.
    eviction: Option<Eviction>,
    /// The directory pinned for a removal on release.
    pinned: Option<OwnedFd>,
    started: Instant,
}

#[cfg(feature = "tokio")]
impl Taken {
    /// The same lock, as taken by an acquire that began at `started` (a
    /// wait that another thread made attempts for): what `lock_acquired`
    /// reports as the time waited.
    pub(crate) fn waited_since(self, started: Instant) -> Taken {
        match self {
            Taken::Unwritten(mut unwritten) => {
                unwritten.started = started;
                Taken::Unwritten(unwritten)
            }
            guard @ Taken::Guard(_) => guard,
        }
    }
}

impl Unwritten {
    pub(super) fn with_record(
        file: File,
        path: &Path,
        opts: &LockOptions,
        previous: &[u8],
        eviction: Option<Eviction>,
        pinned: Option<OwnedFd>,
        started: Instant,
    ) -> Unwritten {
        Unwritten {
            file: Some(file),
            path: path.to_path_buf(),
            opts: opts.clone(),
            no_record: None,
            previous: previous.to_vec(),
            eviction,
            pinned,
            started,
        }
    }

    pub(super) fn without_record(
        file: File,
        path: &Path,
        opts: &LockOptions,
        reason: NoRecord,
        started: Instant,
    ) -> Unwritten {
        Unwritten {
            file: Some(file),
            path: path.to_path_buf(),
            opts: opts.clone(),
            no_record: Some(reason),
            previous: Vec::new(),
            eviction: None,
            pinned: None,
            started,
        }
    }

    /// Writes the record (when the file takes one) and returns the guard:
    /// the acquire's last step, as the blocking acquire takes it.
    ///
    /// # Errors
    ///
    /// As the acquire's: the record cannot be written, or the run's tick
    /// was used up. The lock is let go then.
    pub(crate) fn finish(mut self) -> Result<LockGuard> {
        let file = self
            .file
            .take()
            .expect("an unwritten lock is finished once");
        match self.no_record {
            Some(reason) => Ok(without_record(
                &self.opts,
                &self.path,
                file,
                reason,
                self.started,
            )),
            None => with_record(
                &self.opts,
                &self.path,
                file,
                &self.previous,
                self.started,
                self.eviction.take(),
                self.pinned.take(),
            ),
        }
    }
}

impl Drop for Unwritten {
    fn drop(&mut self) {
        // Unlock before closing: a child that another thread forked
        // meanwhile shares the descriptor until its exec.
        if let Some(file) = &self.file {
            let _ = sys::unlock(file.as_fd());
        }
    }
}
