//! Taking a lock: open, lock, check the file's identity, then write the owner
//! record when the file is ours to write.

use std::borrow::Cow;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Instant;

use crate::content::{Content, NoRecord};
use crate::error::Operation;
use crate::evict::{self, Eviction, Patience};
use crate::guard::LockGuard;
use crate::record::{self, LockDocument, Release, peek};
use crate::sys::{self, LockMode};
use crate::{Error, LockOptions, OwnerRecord, Result, Wait};

/// How a lock file was opened.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    ReadWrite,
    ReadOnly,
}

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
    let started = Instant::now();
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
    loop {
        let (file, id, access) = open_lock_file(&itself, path, opts, read_only || names_dir)?;
        if names_dir && !id.is_dir() {
            let not_a_dir = io::Error::from_raw_os_error(libc::ENOTDIR);
            return Err(Error::from_io(Operation::Open, path, not_a_dir));
        }
        if opts.evict_after.is_some() && mode == LockMode::Exclusive {
            eviction = lock_or_evict(opts, path, &file, &wait, started)?.or(eviction);
        } else {
            take_kernel_lock(path, file.as_fd(), mode, &wait, started, &|| {
                holder_record(&file, mode)
            })?;
        }
        // Re-check the inode: the path may have been unlinked (by reap, or a
        // release that removes) or replaced while we waited. A lock on a file
        // that no longer has this name excludes nobody. A directory is
        // checked the same way: one renamed away while we waited is not the
        // directory at this path.
        match sys::identity_at(&itself) {
            Ok(at_path) if at_path.same_file(&id) => {}
            Ok(_) => {
                // Let go of the old one explicitly: a child that another
                // thread forks meanwhile would hold it until its exec.
                let _ = sys::unlock(file.as_fd());
                continue;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let _ = sys::unlock(file.as_fd());
                continue;
            }
            Err(e) => return Err(unlocked(&file, Error::from_io(Operation::Stat, path, e))),
        }
        // A directory never takes a record, and a shared lock never writes
        // one (many hold it at once): neither needs to know what is inside.
        if id.is_dir() {
            return Ok(without_record(
                opts,
                path,
                file,
                NoRecord::Directory,
                started,
            ));
        }
        if mode == LockMode::Shared {
            return Ok(without_record(opts, path, file, NoRecord::Shared, started));
        }
        let mut small = [0u8; record::SMALL_READ];
        let previous = match record::read_content(&file, &mut small) {
            Ok(previous) => previous,
            Err(e) => return Err(unlocked(&file, Error::from_io(Operation::Read, path, e))),
        };
        // Our own records need no parse to be recognised; anything else is
        // classified before a byte is written.
        let foreign = peek(&previous).is_none() && Content::of(&previous) == Content::Foreign;
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
                let (doc, written_len) = match write_record(
                    owner(opts),
                    path,
                    &file,
                    &previous,
                    started,
                    eviction.take(),
                ) {
                    Ok(written) => written,
                    Err(e) => return Err(unlocked(&file, e)),
                };
                return Ok(LockGuard::new(
                    file,
                    path.to_path_buf(),
                    doc,
                    None,
                    written_len,
                    opts.remove_on_release,
                ));
            }
        };
        return Ok(without_record(opts, path, file, no_record, started));
    }
}

/// The guard of a lock whose file takes no record: who we are, written
/// nowhere.
fn without_record(
    opts: &LockOptions,
    path: &Path,
    file: File,
    reason: NoRecord,
    started: Instant,
) -> LockGuard {
    let doc = LockDocument::new(owner(opts), None, None);
    acquired(path, &doc.owner, Some(reason), None, started);
    LockGuard::new(
        file,
        path.to_path_buf(),
        doc,
        Some(reason),
        0,
        opts.remove_on_release,
    )
}

/// Emits `lock_acquired`: who took the lock, why it carries no record when
/// it does not, and the previous owner when that one died holding it.
pub(crate) fn acquired(
    path: &Path,
    owner: &OwnerRecord,
    no_record: Option<NoRecord>,
    previous_owner: Option<&OwnerRecord>,
    started: Instant,
) {
    tracing::info!(
        name: "lock_acquired",
        event = "lock_acquired",
        path = %path.display(),
        pid = owner.pid,
        token = %owner.token,
        job = owner.job.as_deref().unwrap_or(""),
        waited_ms = started.elapsed().as_millis() as u64,
        no_record = no_record.map(NoRecord::as_str),
        previous_owner_pid = previous_owner.map(|o| o.pid),
        previous_owner_host = previous_owner.map(|o| o.hostname.as_str()),
    );
}

/// No lock without a record is left behind by a failed acquire. Unlock
/// before closing: a child that another thread forked meanwhile shares the
/// descriptor until its exec, and closing alone would leave the lock held
/// until then.
fn unlocked(file: &File, e: Error) -> Error {
    let _ = sys::unlock(file.as_fd());
    e
}

/// Takes the exclusive lock on `file`, or, when it is held, judges its
/// holder and evicts it if it broke its own heartbeat promise (see
/// [`LockOptions::evict_after`]): eviction takes the wait over, judging
/// again between slices of it. `Some` when the lock was taken by evicting.
fn lock_or_evict(
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
    report_contention(path, &|| read_owner(file));
    let patience = match wait {
        Wait::No => Patience::Once,
        Wait::Until(deadline) => Patience::Until(*deadline),
        Wait::Forever => Patience::Forever,
    };
    evict::take(opts, path, file, patience, started)
}

/// Takes the kernel lock on the open file `fd` refers to, in `mode`, as
/// `wait` allows. `holder` reads the record to name in a contention error.
pub(crate) fn take_kernel_lock(
    path: &Path,
    fd: BorrowedFd<'_>,
    mode: LockMode,
    wait: &Wait,
    started: Instant,
    holder: &dyn Fn() -> Option<Box<OwnerRecord>>,
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
                Err(Error::Timeout {
                    path: path.to_path_buf(),
                    waited: started.elapsed(),
                    owner: holder(),
                    not_evicted: None,
                })
            }
        }
    }
}

/// The record of whoever holds the lock that a `mode` request on `file` did
/// not get, for the error. Shared holders keep no record: a record in a file
/// they hold is an earlier holder's, and naming it would blame the wrong
/// process.
pub(crate) fn holder_record(file: &File, mode: LockMode) -> Option<Box<OwnerRecord>> {
    if mode == LockMode::Exclusive && sys::held_shared(file) {
        return None;
    }
    read_owner(file)
}

/// Opens (creating if needed) the lock file without following a symlink and
/// without blocking on a FIFO, and refuses anything but a regular file (or a
/// directory, when the options allow a lock without a record).
///
/// The file is opened for reading and writing, so that a record can be
/// written, unless `read_only` asks otherwise or the lock is shared (which
/// writes nothing). A file that may not be written (its mode, a read-only
/// mount, a running executable) and a directory are opened read-only when
/// the options allow a lock without a record, as flock(1) opens every file.
fn open_lock_file(
    itself: &Path,
    path: &Path,
    opts: &LockOptions,
    read_only: bool,
) -> Result<(File, sys::Identity, Access)> {
    let open = |access: Access, create: bool| {
        sys::open_noatime(itself, |path, extra| {
            use rustix::fs::OFlags;
            // O_NONBLOCK: opening a FIFO must not hang.
            let mut flags = OFlags::NOFOLLOW
                | OFlags::NONBLOCK
                | OFlags::NOCTTY
                | OFlags::CLOEXEC
                | OFlags::from_bits_retain(extra as _);
            flags |= match access {
                Access::ReadWrite => OFlags::RDWR,
                Access::ReadOnly => OFlags::RDONLY,
            };
            if create {
                flags |= OFlags::CREATE;
            }
            let mode = rustix::fs::Mode::from_raw_mode(opts.mode as rustix::fs::RawMode);
            rustix::fs::open(path, flags, mode)
                .map(File::from)
                .map_err(io::Error::from)
        })
    };
    // Opening without creating: a file we may not write, or a directory
    // (Linux refuses O_CREAT on one). When that fails too (not even
    // readable, or missing and not creatable) the first refusal says why.
    let read_only_after = |first: io::Error| {
        open(Access::ReadOnly, false)
            .map(|file| (file, Access::ReadOnly))
            .map_err(|_| first)
    };
    let opened = if opts.shared && !read_only {
        // A shared lock writes nothing, so reading is all it needs; like
        // flock(1), it creates a missing file.
        match open(Access::ReadOnly, true) {
            Ok(file) => Ok((file, Access::ReadOnly)),
            Err(e) if may_not_write(&e) || is_a_directory(&e) => read_only_after(e),
            Err(e) => Err(e),
        }
    } else if read_only {
        open(Access::ReadOnly, false).map(|file| (file, Access::ReadOnly))
    } else {
        match open(Access::ReadWrite, true) {
            Ok(file) => Ok((file, Access::ReadWrite)),
            Err(e) if opts.record_optional && (may_not_write(&e) || is_a_directory(&e)) => {
                read_only_after(e)
            }
            Err(e) => Err(e),
        }
    };
    let (file, access) = opened.map_err(|e| Error::from_io(Operation::Open, path, e).explain())?;
    let id = sys::identity_of(&file).map_err(|e| Error::from_io(Operation::Stat, path, e))?;
    if id.is_dir() && opts.record_optional {
        return Ok((file, id, access));
    }
    if !id.is_regular() {
        return Err(Error::NotRegularFile {
            op: Operation::Open,
            path: path.to_path_buf(),
            kind: sys::file_kind(id.kind),
        });
    }
    Ok((file, id, access))
}

/// Whether opening for writing failed only because writing is not allowed.
pub(crate) fn may_not_write(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EACCES | libc::EPERM | libc::EROFS | libc::ETXTBSY)
    )
}

/// Whether an open failed because the path is a directory, which may not be
/// opened for writing or with `O_CREAT`.
fn is_a_directory(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EISDIR)
}

fn foreign_content(path: &Path, file: &File, content: &[u8]) -> Error {
    const PREVIEW: usize = 32;
    let size = file.metadata().map_or(content.len() as u64, |m| m.len());
    let shown = &content[..content.len().min(PREVIEW)];
    let mut preview = shown.escape_ascii().to_string();
    if content.len() > PREVIEW {
        preview.push('…');
    }
    Error::ForeignContent {
        path: path.to_path_buf(),
        size,
        preview,
    }
}

/// Reads the owner record of a lock someone else holds, for the error.
/// Records are 512 bytes: a small stack buffer serves, and only a full one
/// (a long job name, or debris) costs a larger read.
fn read_owner(file: &File) -> Option<Box<OwnerRecord>> {
    let mut small = [0u8; record::SMALL_READ];
    let content = record::read_content(file, &mut small).ok()?;
    LockDocument::decode(&content)
        .ok()
        .map(|doc| Box::new(doc.owner))
}

/// Emits `lock_contended` before a wait, reading the holder's record only
/// when someone listens.
fn report_contention(path: &Path, holder: &dyn Fn() -> Option<Box<OwnerRecord>>) {
    if tracing::enabled!(tracing::Level::INFO) {
        let _ = contended(path, holder());
    }
}

fn contended(path: &Path, owner: Option<Box<OwnerRecord>>) -> Error {
    if let Some(o) = &owner {
        tracing::info!(
            name: "lock_contended",
            event = "lock_contended",
            path = %path.display(),
            holder_pid = o.pid,
            holder_host = %o.hostname,
            holder_age_s = o.age(std::time::SystemTime::now()).as_secs(),
        );
    } else {
        tracing::info!(name: "lock_contended", event = "lock_contended", path = %path.display());
    }
    Error::Contended {
        path: path.to_path_buf(),
        owner,
        not_evicted: None,
    }
}

/// This process's record, with the promises the options make.
pub(crate) fn owner(opts: &LockOptions) -> OwnerRecord {
    let mut owner = OwnerRecord::current(opts.job.as_deref(), opts.heartbeat_interval);
    owner.heartbeat_source = opts.heartbeat_source;
    owner.max_runtime_ms = opts.max_runtime.map(crate::record::millis);
    owner.kill_after_ms = opts.kill_after.map(crate::record::millis);
    owner.release = opts.release;
    owner
}

/// Writes `owner`'s record over the previous one of ours, carrying its
/// history (last success, last run) along, or, after an eviction, the
/// evicted run's end. Returns it and its length.
pub(crate) fn write_record(
    owner: OwnerRecord,
    path: &Path,
    file: &File,
    previous: &[u8],
    started: Instant,
    eviction: Option<Eviction>,
) -> Result<(LockDocument, usize)> {
    let write_err = |e: io::Error| Error::from_io(Operation::Write, path, e);
    // Parse the previous document only when it has something to carry (a
    // success) or to report (an owner that died holding the lock); the
    // common case, our own released record without a success, costs no
    // parse. A document that does not parse carries nothing: a torn record
    // must not hand a "success" to the silence alarm.
    let previous_doc = peek(previous)
        .filter(|p| p.has_history || !p.released)
        .and_then(|_| LockDocument::decode(previous).ok());
    let last_success = previous_doc.as_ref().and_then(|doc| doc.last_success);
    let last_run = previous_doc.as_ref().and_then(|doc| doc.last_run.clone());
    // A record whose release was never going to be marked tells of no death.
    let dead_owner = previous_doc
        .filter(|doc| !doc.released && doc.owner.release == Release::Recorded)
        .map(|doc| doc.owner);
    let mut doc = LockDocument::new(owner, last_success, last_run);
    if let Some(eviction) = eviction {
        eviction.record_into(&mut doc);
    }
    let mut buf = Vec::with_capacity(512);
    doc.encode_into(&mut buf);
    file.write_all_at(&buf, 0).map_err(write_err)?;
    // The previous content might be longer (a larger record, or a torn
    // one): cut it off.
    if previous.len() > buf.len() {
        file.set_len(buf.len() as u64).map_err(write_err)?;
    }
    acquired(path, &doc.owner, None, dead_owner.as_ref(), started);
    Ok((doc, buf.len()))
}
