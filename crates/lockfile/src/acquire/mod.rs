//! Taking a lock: open, lock, check the file's identity, then write the owner
//! record when the file is ours to write.
//!
//! Each step has a file of its own: [`open`] opens the file, [`kernel`] takes
//! the kernel lock, [`write`] writes the record. This file holds the entry
//! points and the one loop that runs the steps in order; [`unwritten`] is a
//! lock taken by that loop whose record is left for later (the async
//! waiter's, see `crate::waiter`).

mod kernel;
mod open;
mod probe;
mod slots;
mod unwritten;
mod write;

use std::borrow::Cow;
use std::io;
use std::os::fd::AsFd;
use std::path::Path;
use std::time::Instant;

use crate::content::{Content, NoRecord};
use crate::error::Operation;
use crate::guard::LockGuard;
use crate::holder::Named;
use crate::record::{self, MAX_RECORD_BYTES, peek};
use crate::sys::{self, LockMode};
use crate::{Error, LockOptions, Result, Wait};

pub(crate) use kernel::{holder_record, take_kernel_lock};
use kernel::{lock_or_evict, unlocked};
pub(crate) use open::may_not_write;
use open::{Access, At, check_kind, open_lock_file, pin_directory, refuse_planted};
#[cfg(feature = "tokio")]
pub(crate) use probe::{Probe, probe};
pub(crate) use unwritten::{Record, Taken, Unwritten};
pub(crate) use write::{acquired, check_record_fits, owner, write_record};
use write::{foreign_content, with_record, without_record};

// The entry points live here, beside the one path they all take, so that
// the acquire path runs one way: options → acquire → guard.
impl LockOptions {
    /// Takes the lock at `path`, waiting while someone else holds it: as
    /// long as it takes, or up to [`timeout`](LockOptions::timeout).
    ///
    /// The file is created when missing. Its directory is not.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`](crate::Error::Timeout) when the timeout passed; any
    /// other [`Error`](crate::Error) when the file cannot be opened, locked
    /// or written, for example [`Error::Symlink`](crate::Error::Symlink) or
    /// [`Error::DirectoryNotFound`](crate::Error::DirectoryNotFound).
    pub fn acquire(&self, path: impl AsRef<Path>) -> Result<LockGuard> {
        lock(self, path.as_ref(), Wait::up_to(self.timeout))
    }

    /// Takes the lock at `path` if nobody holds it, without waiting.
    ///
    /// # Errors
    ///
    /// [`Error::Contended`](crate::Error::Contended), carrying the holder's
    /// record, when someone holds the lock; any other
    /// [`Error`](crate::Error) when the file cannot be opened, locked or
    /// written.
    pub fn try_acquire(&self, path: impl AsRef<Path>) -> Result<LockGuard> {
        lock(self, path.as_ref(), Wait::No)
    }
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
}

fn lock(opts: &LockOptions, path: &Path, wait: Wait) -> Result<LockGuard> {
    match take(opts, path, wait, Record::Now)? {
        Taken::Guard(guard) => Ok(guard),
        Taken::Unwritten(unwritten) => unwritten.finish(),
    }
}

/// Takes the lock at `path` as `wait` allows: steps 1 to 5, or, with
/// [`Record::Deferred`], steps 1 to 4, the record left to
/// [`Unwritten::finish`].
pub(crate) fn take(opts: &LockOptions, path: &Path, wait: Wait, record: Record) -> Result<Taken> {
    let started = Instant::now();
    // A lock whose file takes no record: a guard at once, or the lock for
    // later (nothing is written either way).
    let without = |file, reason| match record {
        Record::Now => Taken::Guard(without_record(opts, path, file, reason, started)),
        Record::Deferred => {
            Taken::Unwritten(Unwritten::without_record(file, path, opts, reason, started))
        }
    };
    check_record_fits(opts, path)?;
    let mode = opts.lock_mode();
    // What is opened and re-checked: the last component itself, never what a
    // symlink named `link/` points to.
    let itself = sys::without_trailing_slash(path);
    // And `dir/` names a directory, as the kernel reads it: nothing is
    // created for it, and a file there is not it.
    let names_dir = matches!(itself, Cow::Owned(_));
    // Set once the file turned out to hold someone else's content: it is then
    // locked through a read-only descriptor, since Linux refuses to execute a
    // file that anyone holds open for writing (a script that locks itself).
    let mut read_only = false;
    // Set once the lock was taken by evicting a hung holder, for the record.
    let mut eviction = None;
    // A lock file that its release removes is opened by its name in its
    // directory, pinned now: the release unlinks it there, and nowhere else
    // a swapped path component might lead. Others need no pin, and cost no
    // extra open.
    let pinned = if opts.remove_on_release && !names_dir {
        pin_directory(&itself, path)?
    } else {
        None
    };
    let at = match &pinned {
        Some((dir, name)) => At {
            dir: dir.as_fd(),
            name: Path::new(name),
        },
        None => At {
            dir: rustix::fs::CWD,
            name: &itself,
        },
    };
    loop {
        let (file, access) = open_lock_file(at, &itself, path, opts, read_only || names_dir)?;
        // Step 2. Uncontended, one stat after the lock serves both the check
        // of the file's kind and the check of its name. Contended, the kind
        // is checked before the wait, so that nothing waits on a FIFO or a
        // device it would refuse anyway.
        let lock_err = |e: io::Error| Error::from_io(Operation::Lock, path, e);
        if !sys::try_lock(file.as_fd(), mode).map_err(lock_err)? {
            let id =
                sys::identity_of(&file).map_err(|e| Error::from_io(Operation::Stat, path, e))?;
            check_kind(path, opts, names_dir, &id)?;
            // Before the wait: its owner could hold it forever.
            refuse_planted(path, &itself, &id)?;
            if opts.evict_after.is_some() && mode == LockMode::Exclusive {
                eviction = lock_or_evict(opts, path, &file, &wait, started)?.or(eviction);
            } else {
                take_kernel_lock(path, file.as_fd(), mode, &wait, started, &|| {
                    Named::new(&file, holder_record(&file, mode))
                })?;
            }
        }
        // Step 3.
        let id = match sys::identity_of(&file) {
            Ok(id) => id,
            Err(e) => return Err(unlocked(&file, Error::from_io(Operation::Stat, path, e))),
        };
        if let Err(e) =
            check_kind(path, opts, names_dir, &id).and_then(|()| refuse_planted(path, &itself, &id))
        {
            return Err(unlocked(&file, e));
        }
        match still_named(at, &id) {
            Ok(true) => {}
            Ok(false) => {
                // Let go of the old one explicitly: a child that another
                // thread forks meanwhile would hold it until its exec.
                let _ = sys::unlock(file.as_fd());
                continue;
            }
            Err(e) => return Err(unlocked(&file, Error::from_io(Operation::Stat, path, e))),
        }
        // A directory never takes a record, and a shared lock never writes
        // one (many hold it at once): neither needs to know what is inside.
        if id.is_dir() {
            return Ok(without(file, NoRecord::Directory));
        }
        if mode == LockMode::Shared {
            return Ok(without(file, NoRecord::Shared));
        }
        let mut small = record::SmallRead::new();
        let previous = match record::read_content(&file, &mut small) {
            Ok(previous) => previous,
            Err(e) => return Err(unlocked(&file, Error::from_io(Operation::Read, path, e))),
        };
        // A file longer than any record is someone else's whatever its first
        // bytes are (zeros, blank lines): only a whole file may be judged
        // empty or torn, and the read is bounded. Of the rest, our own
        // records need no parse to be recognised; anything else is
        // classified before a byte is written.
        let foreign = id.size > MAX_RECORD_BYTES as u64
            || previous.len() > MAX_RECORD_BYTES
            || (peek(&previous).is_none() && Content::of(&previous) == Content::Foreign);
        let no_record = match (foreign, access) {
            (true, _) if !opts.record_optional => {
                return Err(unlocked(&file, foreign_content(path, &file, &previous)));
            }
            (true, Access::ReadWrite) => {
                // Let go and lock it again read-only. Someone may take it in
                // between: then it is theirs, as if they had come first.
                let _ = sys::unlock(file.as_fd());
                read_only = true;
                continue;
            }
            (false, Access::ReadOnly) if read_only => {
                // No longer foreign (emptied meanwhile): ours to write after all.
                let _ = sys::unlock(file.as_fd());
                read_only = false;
                continue;
            }
            (true, Access::ReadOnly) => NoRecord::ForeignContent,
            (false, Access::ReadOnly) => NoRecord::ReadOnly,
            (false, Access::ReadWrite) => {
                let pinned = pinned.map(|(dir, _)| dir);
                let eviction = eviction.take();
                return Ok(match record {
                    Record::Now => Taken::Guard(with_record(
                        opts, path, file, &previous, started, eviction, pinned,
                    )?),
                    Record::Deferred => Taken::Unwritten(Unwritten::with_record(
                        file, path, opts, &previous, eviction, pinned, started,
                    )),
                });
            }
        };
        return Ok(without(file, no_record));
    }
}

/// Whether the path still names the locked file (step 3): it may have been
/// unlinked (by reap, or a release that removes) or replaced while we
/// waited, and a lock on a file that no longer has this name excludes
/// nobody.
///
/// Both leave the locked file without a name, which its link count already
/// says, so a file with one link needs no stat of the path. A file with more
/// names (hard links, and every directory) may have lost just this one: the
/// path is compared. What the link count cannot see is a rename of the file
/// itself (`mv job.lock old.lock`): nothing in this crate renames a lock
/// file, and an operator who moves one that is held breaks exclusion
/// against its holder whatever a newcomer checks (see the protocol).
fn still_named(at: At<'_>, id: &sys::Identity) -> io::Result<bool> {
    match id.links {
        0 => Ok(false),
        1 if !id.is_dir() => Ok(true),
        _ => match at.identity() {
            Ok(at_path) => Ok(at_path.same_file(id)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        },
    }
}
