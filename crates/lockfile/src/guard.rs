//! `LockGuard`: a held kernel lock plus the owner record written through it.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use crate::error::Operation;
use crate::record::{LockDocument, RELEASED_FLAG_OFFSET, RELEASED_TRUE, peek};
use crate::{Error, Holder, LockOptions, OwnerRecord, Result, sys};

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
    remove_on_release: bool,
    /// Set once the descriptor was shared with children
    /// ([`LockGuard::share_with_children`]): from then on this process only
    /// ever closes its descriptor, never unlocks it.
    shared: bool,
    /// Set once the guard has released (or disowned) the lock, so that
    /// dropping it afterwards does nothing.
    done: bool,
}

pub(crate) enum Wait {
    No,
    Forever,
    Until(Instant),
}

impl LockGuard {
    /// Takes the lock at `path`, waiting as long as it takes. Same as
    /// `LockOptions::new().acquire(path)`.
    ///
    /// # Errors
    ///
    /// An [`Error`] when the file cannot be opened, locked or written.
    ///
    /// # Examples
    ///
    /// ```
    /// # fn main() -> Result<(), lockfile::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("job.lock");
    /// let guard = lockfile::LockGuard::acquire(&path)?;
    /// // ... the work ...
    /// guard.release()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn acquire(path: impl AsRef<Path>) -> Result<LockGuard> {
        LockOptions::new().acquire(path)
    }

    /// Takes the lock at `path` if nobody holds it, without waiting. Same as
    /// `LockOptions::new().try_acquire(path)`.
    ///
    /// # Errors
    ///
    /// [`Error::Contended`] with the holder's record when someone holds the
    /// lock (see [`Error::is_contended`]); any other [`Error`] when the file
    /// cannot be opened, locked or written.
    ///
    /// # Examples
    ///
    /// ```
    /// # fn main() -> Result<(), lockfile::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("job.lock");
    /// match lockfile::LockGuard::try_acquire(&path) {
    ///     Ok(guard) => { /* run the job */ guard.release()?; }
    ///     Err(e) if e.is_contended() => eprintln!("skipped: {e}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn try_acquire(path: impl AsRef<Path>) -> Result<LockGuard> {
        LockOptions::new().try_acquire(path)
    }

    /// The owner record written when the lock was taken.
    pub fn record(&self) -> &OwnerRecord {
        &self.doc.owner
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
    /// [`heartbeat_interval`](LockOptions::heartbeat_interval). `inspect`
    /// reports a held lock whose heartbeat went quiet as `heartbeat_silent`:
    /// a hung owner.
    ///
    /// # Errors
    ///
    /// [`Error`] with [`Operation::Heartbeat`] when the time cannot be set.
    pub fn heartbeat(&self) -> Result<()> {
        sys::touch(&self.file, SystemTime::now())
            .map_err(|e| Error::from_io(Operation::Heartbeat, &self.path, e))?;
        tracing::trace!(name: "heartbeat", event = "heartbeat", path = %self.path.display());
        Ok(())
    }

    /// Records a successful run in the lock file, for silence alarms
    /// (`inspect` with `expect_every`, `lockfile check`). The time is kept by
    /// later holders until one of them records a newer success.
    ///
    /// # Errors
    ///
    /// [`Error`] with [`Operation::Write`] when the record cannot be written.
    pub fn record_success(&mut self) -> Result<()> {
        self.doc.last_success = Some(crate::record::now());
        let mut buf = Vec::new();
        self.doc.encode_into(&mut buf);
        self.file
            .write_all_at(&buf, 0)
            .map_err(|e| Error::from_io(Operation::Write, &self.path, e))
    }

    /// Releases the lock: marks the record released, unlocks, closes.
    ///
    /// The record stays in the file (the last owner remains visible to
    /// `inspect`) unless [`remove_on_release`](LockOptions::remove_on_release)
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
    /// [`Error`] with [`Operation::Stat`] when the lock file cannot be stat'ed.
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
    /// [`Error`] with [`Operation::Lock`] when the descriptor cannot be
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
        let marked = self
            .file
            .write_all_at(RELEASED_TRUE, RELEASED_FLAG_OFFSET as u64)
            .map_err(|e| Error::from_io(Operation::Write, &self.path, e));
        let removed = if self.remove_on_release && !self.shared {
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
            path = %self.path.display(),
            token = %self.doc.owner.token,
            held_ms = self.doc.owner.age(SystemTime::now()).as_millis() as u64,
        );
        marked.and(removed).and(unlocked)
    }

    /// Unlinks the lock file, but only if the path still names our file.
    fn remove_while_locked(&self) -> Result<()> {
        let ours = sys::identity_of(&self.file)
            .map_err(|e| Error::from_io(Operation::Stat, &self.path, e))?;
        match sys::identity_at(&self.path) {
            Ok(at_path) if at_path.same_file(&ours) => std::fs::remove_file(&self.path)
                .map_err(|e| Error::from_io(Operation::Remove, &self.path, e)),
            _ => Ok(()),
        }
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

/// Opens (creating if needed) the lock file without following a symlink and
/// without blocking on a FIFO, and refuses anything but a regular file.
fn open_lock_file(path: &Path, mode: u32) -> Result<(File, sys::Identity)> {
    let file = sys::open_noatime(path, |path, extra| {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .mode(mode)
            // std adds O_CLOEXEC. O_NONBLOCK: opening a FIFO must not hang.
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | extra)
            .open(path)
    })
    .map_err(|e| Error::from_io(Operation::Open, path, e))?;
    let id = sys::identity_of(&file).map_err(|e| Error::from_io(Operation::Stat, path, e))?;
    if !id.is_regular() {
        return Err(Error::NotRegularFile {
            op: Operation::Open,
            path: path.to_path_buf(),
            kind: sys::file_kind(id.kind),
        });
    }
    Ok((file, id))
}

/// Reads the owner record of a lock someone else holds, for the error.
/// Records are 512 bytes: a small stack buffer serves, and only a full one
/// (a long job name, or debris) costs a larger read.
fn read_owner(file: &File) -> Option<Box<OwnerRecord>> {
    let mut small = [0u8; sys::SMALL_READ];
    let content = sys::read_content(file, &mut small).ok()?;
    LockDocument::decode(&content)
        .ok()
        .map(|doc| Box::new(doc.owner))
}

/// Emits `lock_contended` before a wait, reading the holder's record only
/// when someone listens.
fn report_contention(path: &Path, file: &File) {
    if tracing::enabled!(tracing::Level::INFO) {
        let _ = contended(path, file);
    }
}

fn contended(path: &Path, file: &File) -> Error {
    let owner = read_owner(file);
    if let Some(o) = &owner {
        tracing::info!(
            name: "lock_contended",
            event = "lock_contended",
            path = %path.display(),
            holder_pid = o.pid,
            holder_host = %o.hostname,
            holder_age_s = o.age(SystemTime::now()).as_secs(),
        );
    } else {
        tracing::info!(name: "lock_contended", event = "lock_contended", path = %path.display());
    }
    Error::Contended {
        path: path.to_path_buf(),
        owner,
    }
}

pub(crate) fn lock(opts: &LockOptions, path: &Path, wait: Wait) -> Result<LockGuard> {
    let started = Instant::now();
    loop {
        let (file, id) = open_lock_file(path, opts.mode)?;
        let lock_err = |e: io::Error| Error::from_io(Operation::Lock, path, e);
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::Error(e)) => return Err(lock_err(e)),
            Err(TryLockError::WouldBlock) => match wait {
                Wait::No => return Err(contended(path, &file)),
                Wait::Forever => {
                    report_contention(path, &file);
                    loop {
                        match file.lock() {
                            Ok(()) => break,
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                            Err(e) => return Err(lock_err(e)),
                        }
                    }
                }
                Wait::Until(deadline) => {
                    report_contention(path, &file);
                    if !sys::lock_until(&file, deadline).map_err(lock_err)? {
                        return Err(Error::Timeout {
                            path: path.to_path_buf(),
                            waited: started.elapsed(),
                            owner: read_owner(&file),
                        });
                    }
                }
            },
        }
        // Re-check the inode: the path may have been unlinked (by reap, or a
        // release that removes) or replaced while we waited. A lock on a file
        // that no longer has this name excludes nobody.
        match sys::identity_at(path) {
            Ok(at_path) if at_path.same_file(&id) => {}
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::from_io(Operation::Stat, path, e)),
        }
        return match write_record(opts, path, &file, started) {
            Ok(doc) => Ok(LockGuard {
                file,
                path: path.to_path_buf(),
                doc,
                remove_on_release: opts.remove_on_release,
                shared: false,
                done: false,
            }),
            Err(e) => {
                // No lock without a record is left behind by a failed
                // acquire. Unlock before closing: a child that another thread
                // forked meanwhile shares the descriptor until its exec, and
                // closing alone would leave the lock held until then.
                let _ = file.unlock();
                Err(e)
            }
        };
    }
}

/// Writes our record over the previous one, carrying its last success along.
fn write_record(
    opts: &LockOptions,
    path: &Path,
    file: &File,
    started: Instant,
) -> Result<LockDocument> {
    let write_err = |e: io::Error| Error::from_io(Operation::Write, path, e);
    let mut small = [0u8; sys::SMALL_READ];
    let previous = sys::read_content(file, &mut small)
        .map_err(|e| Error::from_io(Operation::Read, path, e))?;
    let previous = &previous[..];
    // Parse the previous document only when it has something to carry (a
    // success) or to report (an owner that died holding the lock); the
    // common case, our own released record without a success, costs no
    // parse. A document that does not parse carries nothing: debris must not
    // hand a "success" to the silence alarm.
    let previous_doc = peek(previous)
        .filter(|p| p.has_success || !p.released)
        .and_then(|_| LockDocument::decode(previous).ok());
    let last_success = previous_doc.as_ref().and_then(|doc| doc.last_success);
    let dead_owner = previous_doc
        .filter(|doc| !doc.released)
        .map(|doc| doc.owner);
    let owner = OwnerRecord::current(opts.job.as_deref(), opts.heartbeat_interval);
    let doc = LockDocument::new(owner, last_success);
    let mut buf = Vec::with_capacity(512);
    doc.encode_into(&mut buf);
    file.write_all_at(&buf, 0).map_err(write_err)?;
    // The previous content might be longer (a larger record, or debris): cut
    // it off.
    if previous.len() > buf.len() {
        file.set_len(buf.len() as u64).map_err(write_err)?;
    }
    tracing::info!(
        name: "lock_acquired",
        event = "lock_acquired",
        path = %path.display(),
        pid = doc.owner.pid,
        token = %doc.owner.token,
        job = doc.owner.job.as_deref().unwrap_or(""),
        waited_ms = started.elapsed().as_millis() as u64,
        previous_owner_pid = dead_owner.as_ref().map(|o| o.pid),
        previous_owner_host = dead_owner.as_ref().map(|o| o.hostname.as_str()),
    );
    Ok(doc)
}
