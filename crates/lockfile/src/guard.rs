//! `LockGuard`: a held kernel lock plus the owner record written through it.

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::content::NoRecord;
use crate::error::Operation;
use crate::history::{LastRun, Outcome, RunEnd};
use crate::record::LockDocument;
use crate::record_file;
use crate::{Error, Evicted, Holder, OwnerRecord, Result, sys};

/// A held lock. Dropping it releases the lock; [`release`](LockGuard::release)
/// does the same and reports errors.
///
/// The kernel holds the lock for as long as this guard's open file (or a
/// descriptor inherited from it) exists, and releases it when the process
/// dies, for any reason. Nothing on disk has to be cleaned up for the next
/// run to proceed.
#[derive(Debug)]
#[must_use = "if unused the lock is released immediately"]
pub struct LockGuard {
    file: File,
    path: PathBuf,
    doc: LockDocument,
    /// Why the file holds no record of ours, when it holds none: then this
    /// guard never writes a byte into it, nor sets its times.
    no_record: Option<NoRecord>,
    /// How long the file is: the length of the document last written.
    written_len: usize,
    remove_on_release: bool,
    /// With removal on release: the lock file's directory, pinned when the
    /// file was opened by its name in it. The release unlinks that name
    /// there, never by the path, which may lead elsewhere by then.
    pinned_dir: Option<OwnedFd>,
    /// Set once the descriptor was shared with children
    /// ([`LockGuard::share_with_children`]): from then on this process only
    /// ever closes its descriptor, never unlocks it.
    shared: bool,
    /// Set once the guard has released (or disowned) the lock, so that
    /// dropping it afterwards does nothing.
    done: bool,
    /// A slot waiter's inotify descriptor, its watch ended: closed after
    /// the file (this field comes last), since its close waits out a grace
    /// period of the kernel's that the wait should not have spent.
    retired_watch: Option<OwnedFd>,
}

impl LockGuard {
    pub(crate) fn new(
        file: File,
        path: PathBuf,
        doc: LockDocument,
        no_record: Option<NoRecord>,
        written_len: usize,
        remove_on_release: bool,
    ) -> LockGuard {
        LockGuard {
            file,
            path,
            doc,
            no_record,
            written_len,
            remove_on_release,
            pinned_dir: None,
            shared: false,
            done: false,
            retired_watch: None,
        }
    }

    /// Gives the guard a slot waiter's ended inotify watch, to close last.
    pub(crate) fn keep_retired_watch(&mut self, watch: Option<OwnedFd>) {
        self.retired_watch = watch;
    }

    /// Gives the guard the directory its file was opened in, for a removal
    /// on release. Without one, the release removes nothing.
    pub(crate) fn with_pinned_dir(mut self, dir: Option<OwnedFd>) -> LockGuard {
        self.pinned_dir = dir;
        self
    }

    /// The owner record written when the lock was taken.
    ///
    /// When the file holds no record ([`no_record`](Self::no_record) says
    /// why), this is who the guard is (its token identifies the run), but it
    /// was not written anywhere.
    pub fn record(&self) -> &OwnerRecord {
        &self.doc.owner
    }

    /// Why the lock file carries no record of ours, or `None` when it does.
    ///
    /// Only a shared lock ([`shared`](crate::LockOptions::shared)) or one
    /// taken with [`record_optional`](crate::LockOptions::record_optional)
    /// can lack one. Such a guard never writes into the file:
    /// [`heartbeat`](Self::heartbeat) and
    /// [`record_success`](Self::record_success) do nothing, and release
    /// only unlocks (it never removes the file).
    pub fn no_record(&self) -> Option<NoRecord> {
        self.no_record
    }

    /// The lock file's modification time: the last heartbeat, record write,
    /// or `touch` by anyone who may write the file.
    ///
    /// # Errors
    ///
    /// [`Error`] with [`Operation::Stat`](crate::error::Operation::Stat) when the file cannot be stat'ed.
    pub fn modified(&self) -> Result<SystemTime> {
        self.file
            .metadata()
            .and_then(|m| m.modified())
            .map_err(|e| Error::from_io(Operation::Stat, &self.path, e))
    }

    /// Which slot of how many this guard holds, when it was taken as one of
    /// N ([`LockOptions::acquire_slot`](crate::LockOptions::acquire_slot)).
    pub fn slot(&self) -> Option<crate::record::Slot> {
        self.doc.owner.slot
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The last success recorded in this lock file, by this holder or an
    /// earlier one.
    pub fn last_success(&self) -> Option<SystemTime> {
        self.doc.last_success
    }

    /// Proves the holder is still working: sets the lock file's modification
    /// time to now. One syscall, no allocation.
    ///
    /// Call it between units of work, at least as often as the promised
    /// [`heartbeat_interval`](crate::LockOptions::heartbeat_interval). `inspect`
    /// reports a held lock whose heartbeat went quiet as `heartbeat_silent`:
    /// a hung owner.
    ///
    /// A guard without a record ([`no_record`](Self::no_record)) leaves the
    /// file's times alone: the file is not ours.
    ///
    /// # Errors
    ///
    /// [`Error`] with [`Operation::Heartbeat`](crate::error::Operation::Heartbeat) when the time cannot be set.
    pub fn heartbeat(&self) -> Result<()> {
        if self.no_record.is_some() {
            return Ok(());
        }
        sys::touch(&self.file, SystemTime::now())
            .map_err(|e| Error::from_io(Operation::Heartbeat, &self.path, e))?;
        tracing::trace!(name: "heartbeat", event = "heartbeat", path = %crate::text::path(&self.path));
        Ok(())
    }

    /// Records a successful run in the lock file, for silence alarms
    /// (`inspect` with `expect_every`, `lockfile check`): the last success,
    /// and the last run (`last_run`: succeeded, started when the lock was
    /// taken, with no exit status, since the run is this process's own
    /// work), as [`record_outcome`](Self::record_outcome) records them. Both
    /// are kept by later holders until one of them records a newer run.
    ///
    /// A guard without a record ([`no_record`](Self::no_record)) has nowhere
    /// to keep it: the call writes nothing.
    ///
    /// # Errors
    ///
    /// [`Error`] with [`Operation::Write`](crate::error::Operation::Write) when the record cannot be written.
    pub fn record_success(&mut self) -> Result<()> {
        self.record_outcome(RunEnd {
            outcome: Outcome::Succeeded,
            exit_code: None,
            signal: None,
            started_at: self.doc.owner.acquired_at,
        })
    }

    /// Records how this run ended, for `inspect` (`last_run`) and
    /// `lockfile check`: the outcome, exit status or signal, and the count
    /// of failures in a row. Like the last success, it is kept by later
    /// holders until a later run records its own. A success also records the
    /// last success, as [`record_success`](Self::record_success) does.
    ///
    /// A guard without a record ([`no_record`](Self::no_record)) has nowhere
    /// to keep it: the call writes nothing.
    ///
    /// # Errors
    ///
    /// [`Error`] with [`Operation::Write`](crate::error::Operation::Write) when the record cannot be written.
    pub fn record_outcome(&mut self, end: RunEnd) -> Result<()> {
        if self.no_record.is_some() {
            return Ok(());
        }
        let mut run = LastRun::finished(self.doc.last_run.as_deref(), end);
        if let Some(claim) = self.claim() {
            run.tick = Some(claim.tick);
            run.token = Some(claim.token.clone());
        }
        if end.outcome == Outcome::Succeeded {
            self.doc.last_success = Some(run.finished_at);
        }
        self.doc.last_run = Some(Box::new(run));
        self.write_document()
    }

    /// The hung run this acquire evicted to take the lock, when it did (see
    /// [`LockOptions::evict_after`](crate::LockOptions::evict_after)): also
    /// kept in the record, as [`OwnerRecord::evicted`].
    pub fn evicted(&self) -> Option<&Evicted> {
        self.doc.owner.evicted.as_deref()
    }

    /// This run's claim on its tick, when it made one
    /// ([`LockOptions::claim_tick`](crate::LockOptions::claim_tick)).
    pub fn claim(&self) -> Option<&crate::Claim> {
        self.doc
            .last_claimed_tick
            .as_deref()
            .filter(|c| c.token == self.doc.owner.token.to_string())
    }

    /// The last finished run recorded in this lock file, by this holder or
    /// an earlier one.
    pub fn last_run(&self) -> Option<&LastRun> {
        self.doc.last_run.as_deref()
    }

    /// Writes the guard's document over the file's. The acquire left room
    /// for the history, so only a record that grew by other means is ever
    /// refused.
    fn write_document(&mut self) -> Result<()> {
        match record_file::write_document(&self.file, &self.path, &self.doc, self.written_len)? {
            Ok(len) => {
                self.written_len = len;
                Ok(())
            }
            Err(size) => {
                let job_len = self.doc.owner.job.as_deref().map_or(0, str::len);
                Err(record_file::too_large(&self.path, size, job_len))
            }
        }
    }

    /// Releases the lock: marks the record released, unlocks, closes.
    ///
    /// The record stays in the file (the last owner remains visible to
    /// `inspect`) unless [`remove_on_release`](crate::LockOptions::remove_on_release)
    /// was set.
    ///
    /// # Errors
    ///
    /// [`Error`] when the record cannot be marked or the file cannot be
    /// removed or unlocked. The lock is released in every case: the file is
    /// closed when this returns.
    pub fn release(mut self) -> Result<()> {
        self.release_inner()
    }

    /// The other processes that hold this lock through a descriptor inherited
    /// from this one: children given it across `exec`, or forked after the
    /// lock was taken. They keep the lock held after this process lets go of
    /// it, unless it is released explicitly.
    ///
    /// This walks every process's descriptors under `/proc` (milliseconds on a
    /// busy host): call it at the end of a run, not in a loop. Always empty on
    /// platforms without `/proc`.
    ///
    /// # Errors
    ///
    /// [`Error`] with [`Operation::Stat`](crate::error::Operation::Stat) when the lock file cannot be stat'ed.
    pub fn inheritors(&self) -> Result<Vec<Holder>> {
        let id = sys::identity_of(&self.file)
            .map_err(|e| Error::from_io(Operation::Stat, &self.path, e))?;
        let me = std::process::id();
        Ok(sys::processes_holding(id.dev, id.ino)
            .into_iter()
            .filter(|&pid| pid != me)
            .map(Holder::from_pid)
            .collect())
    }

    /// A duplicate of the locked descriptor without close-on-exec, for a
    /// child to inherit: the child, and everything it starts, then holds the
    /// lock as long as it lives, even if this process dies first. This is
    /// how `lockfile run` hands the lock to its command, as flock(1) does.
    ///
    /// From then on this guard never unlocks, because an unlock would take
    /// the lock from every process that shares it: [`release`](Self::release)
    /// marks the record released and closes this process's descriptor (the
    /// kernel releases the lock once the last child closes its own), and
    /// dropping the guard without a release only closes it, leaving the record
    /// unreleased (a `stale` file once the children are gone). Removal on
    /// release is skipped: unlinking a file that children still hold locked
    /// would let a newcomer lock a fresh file beside them.
    ///
    /// Close the returned descriptor once the child is spawned.
    ///
    /// # Errors
    ///
    /// [`Error`] with [`Operation::Lock`](crate::error::Operation::Lock) when the descriptor cannot be
    /// duplicated (the process is out of descriptors).
    pub fn share_with_children(&mut self) -> Result<OwnedFd> {
        let fd = rustix::io::dup(&self.file)
            .map_err(|e| Error::from_io(Operation::Lock, &self.path, e.into()))?;
        self.shared = true;
        Ok(fd)
    }

    /// Closes this process's descriptor without unlocking and without marking
    /// the record released.
    ///
    /// Processes that inherited the descriptor (children that were given it
    /// across `exec`) keep holding the lock; `inspect` names them. If none
    /// did, the kernel releases the lock now and `inspect` reports the file
    /// `stale`, as after a crash. (In a multi-threaded program that spawns
    /// processes, a child that another thread is forking at that moment
    /// shares the descriptor until its `exec`, and the lock with it.)
    pub fn disown(mut self) {
        self.done = true;
    }

    fn release_inner(&mut self) -> Result<()> {
        self.done = true;
        let recorded = self.no_record.is_none();
        let marked = if recorded {
            record_file::mark_released(&self.file, &self.path)
        } else {
            Ok(())
        };
        // A file that is not ours is never removed.
        let removed = if self.remove_on_release && !self.shared && recorded {
            self.remove_while_locked()
        } else {
            Ok(())
        };
        // Unlock explicitly rather than only closing: a child that another
        // thread forked meanwhile shares the descriptor until its exec, and
        // release means release. Unless the lock was shared on purpose.
        let unlocked = if self.shared {
            Ok(())
        } else {
            self.file
                .unlock()
                .map_err(|e| Error::from_io(Operation::Lock, &self.path, e))
        };
        tracing::info!(
            name: "lock_released",
            event = "lock_released",
            path = %crate::text::path(&self.path),
            token = %self.doc.owner.token,
            held_ms = self.doc.owner.age(SystemTime::now()).as_millis() as u64,
        );
        marked.and(removed).and(unlocked)
    }

    /// Unlinks the lock file from the directory it was opened in, but only
    /// while its name there still refers to our file, and only by its last
    /// name: an acquirer that waited on a file with one name left trusts its
    /// link count (the crate's protocol, step 3). Through the pinned
    /// directory, never the path: a component of the path swapped for a
    /// symlink meanwhile must not make the release unlink someone else's
    /// file of the same name.
    fn remove_while_locked(&self) -> Result<()> {
        let ours = sys::identity_of(&self.file)
            .map_err(|e| Error::from_io(Operation::Stat, &self.path, e))?;
        if ours.links > 1 {
            return Ok(());
        }
        let (Some(dir), Some(name)) = (&self.pinned_dir, self.path.file_name()) else {
            return Ok(());
        };
        sys::unlink_if_same(dir.as_fd(), Path::new(name), &ours)
            .map(drop)
            .map_err(|e| Error::from_io(Operation::Remove, &self.path, e))
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        // A shared lock dropped without a release (a panic, an early return)
        // may still be held by children: close, and claim nothing.
        if !self.done
            && !self.shared
            && let Err(e) = self.release_inner()
        {
            tracing::warn!(name: "release_failed", event = "release_failed", error = %e);
        }
    }
}

impl AsFd for LockGuard {
    /// The locked file. A child that inherits this descriptor shares the lock.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl AsRawFd for LockGuard {
    fn as_raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}
