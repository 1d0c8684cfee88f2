//! Locking a descriptor that the process which started us keeps open, as
//! flock(1)'s descriptor form does (`exec 9>job.lock; flock -n 9`), and
//! unlocking it again (`flock -u 9`).
//!
//! The lock belongs to the open file description behind the descriptor, which
//! the shell shares with us: it stays held after we exit, until the shell
//! closes its descriptor or exits (or unlocks). So a record, when one can be
//! written at all, names the shell, and says that nobody will mark its
//! release.

use std::fs::File;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::acquire::{
    acquired, check_record_fits, holder_record, may_not_write, owner, take_kernel_lock,
    write_record,
};
use crate::content::{Content, NoRecord};
use crate::error::Operation;
use crate::holder::Named;
use crate::inspect::{Liveness, judge_owner};
use crate::record::{self, LockDocument, RELEASED_FLAG_OFFSET, RELEASED_TRUE, Release};
use crate::sys::{self, Identity, LockMode};
use crate::{Error, LockOptions, OwnerRecord, Result, Wait};

/// A lock taken on a descriptor that another process keeps open (flock(1)'s
/// `flock 9`), by [`LockOptions::try_acquire_descriptor`] or
/// [`LockOptions::acquire_descriptor`].
///
/// This is not a guard: the lock belongs to the open file behind the
/// descriptor, not to this value, and dropping it does nothing. Every process
/// that shares that open file holds the lock; the kernel drops it when the
/// last of them closes it, or when one of them unlocks it
/// ([`unlock_descriptor`]).
#[derive(Debug)]
pub struct DescriptorLock {
    fd: RawFd,
    path: PathBuf,
    mode: LockMode,
    record: Option<OwnerRecord>,
    no_record: Option<NoRecord>,
}

impl DescriptorLock {
    /// The descriptor number that was locked.
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// The locked file as the kernel names it (its path when opened, with
    /// ` (deleted)` once unlinked), or `/dev/fd/N` where it cannot tell.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the lock is shared ([`LockOptions::shared`]).
    pub fn is_shared(&self) -> bool {
        self.mode == LockMode::Shared
    }

    /// The record written into the file, which names the parent process as
    /// the owner and says [`Release::Unrecorded`]; `None` when none was
    /// written ([`no_record`](Self::no_record) says why).
    pub fn record(&self) -> Option<&OwnerRecord> {
        self.record.as_ref()
    }

    /// Why no record was written, or `None` when one was.
    pub fn no_record(&self) -> Option<NoRecord> {
        self.no_record
    }
}

impl LockOptions {
    /// Takes the lock on the open file behind `fd`, a descriptor that the
    /// process which started this one keeps open, waiting while someone else
    /// holds it: as long as it takes, or up to
    /// [`timeout`](LockOptions::timeout). This is flock(1)'s descriptor form,
    /// as in `( flock 9 || exit 1; ... ) 9>job.lock`; see
    /// [`try_acquire_descriptor`](Self::try_acquire_descriptor) for what is
    /// written.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] when the timeout passed; any other [`Error`] when
    /// the descriptor cannot be locked (it is not open, or its filesystem
    /// has no locks).
    pub fn acquire_descriptor(&self, fd: BorrowedFd<'_>) -> Result<DescriptorLock> {
        lock_descriptor(self, fd, Wait::up_to(self.timeout))
    }

    /// Takes the lock on the open file behind `fd` if nobody else holds it,
    /// without waiting: flock(1)'s `flock -n 9`.
    ///
    /// The lock is taken on the open file description that `fd` refers to,
    /// as flock(1) takes it. The shell that opened it (`exec 9>job.lock`)
    /// shares it, so the lock outlives this process: it is held until the
    /// shell, and every process that inherited the descriptor from it, has
    /// closed it, or until [`unlock_descriptor`](crate::descriptor::unlock_descriptor). With
    /// [`shared`](LockOptions::shared) the lock is shared. If the open file
    /// already holds the lock, this converts it to the mode asked for, as
    /// flock(2) does.
    ///
    /// # The record
    ///
    /// A record is written only when all of this holds, so that it is never
    /// written into a file that is not ours and always names a process that
    /// really holds the lock:
    ///
    /// 1. the lock is exclusive and the descriptor is a regular file's (a
    ///    directory gives [`NoRecord::Directory`](crate::inspect::NoRecord::Directory), a shared lock
    ///    [`NoRecord::Shared`](crate::inspect::NoRecord::Shared));
    /// 2. the file can be opened anew for reading and writing through
    ///    `/proc/self/fd/N`: a new open file description, so that the shell's
    ///    offset, its `O_APPEND` and its lock are left alone (a file this
    ///    process may not write gives [`NoRecord::ReadOnly`](crate::inspect::NoRecord::ReadOnly));
    /// 3. the parent process has the very same open file at the same
    ///    descriptor number, checked with kcmp(2) (`KCMP_FILE`), or, where
    ///    kcmp is not allowed (a container's seccomp profile), by the lock
    ///    its descriptor holds: only one open file can hold an exclusive
    ///    lock;
    /// 4. the file is empty or holds a record of ours (anything else gives
    ///    [`NoRecord::ForeignContent`](crate::inspect::NoRecord::ForeignContent), and the file is left byte for byte as
    ///    it is), and that record is not the unreleased record of another
    ///    holder that may be alive.
    ///
    /// The record names the parent process (its pid and start time), since
    /// it holds the lock after this process exits, and the job of the
    /// options. Nobody keeps a heartbeat for it, so it promises none, and
    /// nobody marks its release: it says [`Release::Unrecorded`](crate::record::Release::Unrecorded), and
    /// `inspect` calls the file `free` (not `stale`) once nobody holds it.
    /// Otherwise ([`NoRecord::Descriptor`](crate::inspect::NoRecord::Descriptor)) the lock is taken all the same,
    /// and nothing is written. [`record_optional`](LockOptions::record_optional)
    /// plays no part: a descriptor's file is the caller's choice.
    ///
    /// The parent is the process that started this one. Run this straight
    /// from the shell that keeps the descriptor: under a wrapper that forks
    /// (`timeout 5 ...`) the parent is the wrapper, which shares the open file
    /// too, so the record names it, and `inspect` reports that owner dead
    /// once it has exited while the shell still holds the lock. A wrapper
    /// that execs (`env`, `nice`) changes nothing.
    ///
    /// The file's identity is not re-checked against a path, as a path-based
    /// acquire does: the lock is on whatever the descriptor refers to.
    ///
    /// A shell redirection `9>file` truncates the file each time it runs,
    /// also when another holder's record is in it; `9>>file` or `9<>file`
    /// leave it alone.
    ///
    /// # Errors
    ///
    /// [`Error::Contended`] when someone else holds the lock, carrying their
    /// record when the file holds one; any other [`Error`] when the
    /// descriptor cannot be locked.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::os::fd::AsFd;
    /// # fn main() -> Result<(), lockfile::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("job.lock");
    /// let file = std::fs::File::create(&path).unwrap();
    /// let lock = lockfile::LockOptions::new().try_acquire_descriptor(file.as_fd())?;
    /// // Our parent does not share this open file: the lock is taken, and
    /// // nothing is written.
    /// assert_eq!(lock.no_record(), Some(lockfile::inspect::NoRecord::Descriptor));
    /// assert!(lockfile::LockGuard::try_acquire(&path).unwrap_err().is_contended());
    /// lockfile::descriptor::unlock_descriptor(file.as_fd())?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn try_acquire_descriptor(&self, fd: BorrowedFd<'_>) -> Result<DescriptorLock> {
        lock_descriptor(self, fd, Wait::No)
    }
}

/// Drops the lock held by the open file behind `fd` (flock(1)'s `flock -u
/// 9`), for every process that shares that open file, and marks the file's
/// record released when it is the record that
/// [`try_acquire_descriptor`](LockOptions::try_acquire_descriptor) wrote for
/// the parent process.
///
/// Returns the record marked released, if any. A record is marked only when
/// all of this holds, so that no other holder's record is ever touched:
///
/// - this descriptor's open file holds the lock exclusively (its
///   `/proc/self/fdinfo` says so): then nobody else can have written a
///   record since, and the mark is made before the lock is dropped, so that
///   nobody can have taken the lock and written their own in between;
/// - the parent process shares that open file (as checked when locking);
/// - the record is unreleased, says [`Release::Unrecorded`], and names the
///   parent process: its pid, start time, boot and PID namespace, on this
///   host.
///
/// The run's token cannot serve here: the process that wrote the record has
/// exited, and nobody else knows it. Everything else (a shared lock, no
/// lock, a record of another owner, or a platform without `/proc`) only
/// unlocks. Unlocking an open file that holds no lock does nothing, as in
/// flock(1).
///
/// # Errors
///
/// [`Error`] with [`Operation::Write`] when the record cannot be marked (the
/// lock is dropped all the same), or [`Operation::Lock`] when the
/// descriptor cannot be unlocked (it is not open).
pub fn unlock_descriptor(fd: BorrowedFd<'_>) -> Result<Option<OwnerRecord>> {
    let path = name_of(fd);
    let marked = mark_released(fd, &path);
    sys::unlock(fd).map_err(|e| Error::from_io(Operation::Lock, &path, e))?;
    let marked = marked?;
    if let Some(owner) = &marked {
        tracing::info!(
            name: "lock_released",
            event = "lock_released",
            path = %crate::text::path(&path),
            token = %owner.token,
            held_ms = owner.age(std::time::SystemTime::now()).as_millis() as u64,
        );
    }
    Ok(marked)
}

/// What a descriptor's file is called in messages and in
/// [`DescriptorLock::path`](crate::descriptor::DescriptorLock::path).
fn name_of(fd: BorrowedFd<'_>) -> PathBuf {
    sys::descriptor_path(fd).unwrap_or_else(|| PathBuf::from(format!("/dev/fd/{}", fd.as_raw_fd())))
}

fn lock_descriptor(opts: &LockOptions, fd: BorrowedFd<'_>, wait: Wait) -> Result<DescriptorLock> {
    let started = Instant::now();
    let mode = opts.lock_mode();
    let path = name_of(fd);
    check_record_fits(opts, &path)?;
    let id = sys::identity_of(fd).map_err(|e| Error::from_io(Operation::Stat, &path, e))?;
    // The descriptor may be open for writing only (`9>file`): the holder's
    // record, for the error, is read through an open file of our own.
    take_kernel_lock(&path, fd, mode, &wait, started, &|| {
        sys::reopen(fd, false)
            .map(|file| Named::new(&file, holder_record(&file, mode)))
            .unwrap_or_default()
    })?;
    let outcome = if id.is_dir() {
        Err(NoRecord::Directory)
    } else if mode == LockMode::Shared {
        Err(NoRecord::Shared)
    } else {
        record_for_parent(opts, fd, &id, &path, started)
    };
    let (record, no_record) = match outcome {
        Ok(record) => (Some(record), None),
        Err(why) => {
            acquired(&path, &owner(opts), Some(why), None, started);
            (None, Some(why))
        }
    };
    Ok(DescriptorLock {
        fd: fd.as_raw_fd(),
        path,
        mode,
        record,
        no_record,
    })
}

/// The parent process, which keeps the descriptor open: its PID and start
/// time, when it is visible and its start time known.
fn parent() -> Option<(u32, u64)> {
    let pid = sys::parent_pid()?;
    let stat = sys::process_stat(pid)?;
    (!stat.exited).then_some((pid, stat.start_time))
}

/// Writes the record that names the parent as the holder of the exclusive
/// lock just taken through `fd`, when that is safe (see
/// `LockOptions::try_acquire_descriptor`), or says why not.
fn record_for_parent(
    opts: &LockOptions,
    fd: BorrowedFd<'_>,
    id: &Identity,
    path: &Path,
    started: Instant,
) -> std::result::Result<OwnerRecord, NoRecord> {
    if !id.is_regular() {
        return Err(NoRecord::Descriptor);
    }
    // A new open file description: the shell's offset, flags and lock stay
    // as they are. One we may only read still tells whether the content is
    // ours.
    let (file, writable) = match sys::reopen(fd, true) {
        Ok(file) => (file, true),
        Err(e) if may_not_write(&e) => match sys::reopen(fd, false) {
            Ok(file) => (file, false),
            Err(_) => return Err(NoRecord::ReadOnly),
        },
        Err(_) => return Err(NoRecord::Descriptor),
    };
    let size = match sys::identity_of(&file) {
        Ok(again) if again.same_file(id) => again.size,
        _ => return Err(NoRecord::Descriptor),
    };
    let mut small = record::SmallRead::new();
    let previous = record::read_content(&file, &mut small).map_err(|_| NoRecord::Descriptor)?;
    let decoded = LockDocument::decode_file(&previous, size);
    if Content::from_decoded(&decoded) == Content::Foreign {
        return Err(NoRecord::ForeignContent);
    }
    if !writable {
        return Err(NoRecord::ReadOnly);
    }
    // An unlinked file's record would be read by nobody.
    if !file.metadata().is_ok_and(|m| m.nlink() > 0) {
        return Err(NoRecord::Descriptor);
    }
    if decoded.is_ok_and(|doc| !may_overwrite(&doc)) {
        return Err(NoRecord::Descriptor);
    }
    let (ppid, parent_start) = parent().ok_or(NoRecord::Descriptor)?;
    if !sys::shares_locked_file(ppid, fd.as_raw_fd(), fd, LockMode::Exclusive, id) {
        return Err(NoRecord::Descriptor);
    }
    // Had the parent died meanwhile, we would have been handed to another:
    // its PID (and so its start time) could already belong to someone else.
    if sys::parent_pid() != Some(ppid) {
        return Err(NoRecord::Descriptor);
    }
    let mut record = owner(opts);
    record.pid = ppid;
    record.start_time = Some(parent_start);
    // Nobody is left to beat, or to mark the release.
    record.heartbeat_interval_ms = None;
    record.heartbeat_source = None;
    record.release = Release::Unrecorded;
    match write_record(record, path, &file, &previous, started, None, None) {
        Ok((doc, _)) => Ok(doc.owner),
        Err(e) => {
            // The lock is the point; the record only tells who holds it.
            // Nothing the write left behind is foreign: a torn record of ours
            // at worst.
            tracing::warn!(name: "record_failed", event = "record_failed", error = %e);
            Err(NoRecord::Descriptor)
        }
    }
}

/// Whether a record found in a file whose lock we now hold through a shared
/// descriptor may be written over. A released record, or one whose release
/// nobody was to mark, may. So may an unreleased one whose owner is dead. One
/// whose owner may live is that owner's: it can only be holding this lock
/// through the same open file (a descriptor it handed down), and its record
/// stays.
fn may_overwrite(doc: &LockDocument) -> bool {
    if doc.released || doc.owner.release == Release::Unrecorded {
        return true;
    }
    let me = sys::process_identity();
    doc.owner.hostname == me.hostname && matches!(judge_owner(&doc.owner, &me), Liveness::Dead(_))
}

/// Marks the record released when `unlock_descriptor` may (see there);
/// returns the record marked.
fn mark_released(fd: BorrowedFd<'_>, path: &Path) -> Result<Option<OwnerRecord>> {
    let Ok(id) = sys::identity_of(fd) else {
        return Ok(None);
    };
    if !id.is_regular()
        || sys::descriptor_lock(None, fd.as_raw_fd(), id.ino) != Some(LockMode::Exclusive)
    {
        return Ok(None);
    }
    let Some((ppid, parent_start)) = parent() else {
        return Ok(None);
    };
    if !sys::shares_locked_file(ppid, fd.as_raw_fd(), fd, LockMode::Exclusive, &id) {
        return Ok(None);
    }
    let Ok(file) = sys::reopen(fd, true) else {
        return Ok(None);
    };
    if !sys::identity_of(&file).is_ok_and(|again| again.same_file(&id)) {
        return Ok(None);
    }
    let doc = match read_document(&file) {
        Some(doc) if names_parent(&doc, ppid, parent_start) => doc,
        _ => return Ok(None),
    };
    if sys::parent_pid() != Some(ppid) {
        return Ok(None);
    }
    file.write_all_at(RELEASED_TRUE, RELEASED_FLAG_OFFSET as u64)
        .map_err(|e| Error::from_io(Operation::Write, path, e))?;
    Ok(Some(doc.owner))
}

fn read_document(file: &File) -> Option<LockDocument> {
    let mut small = record::SmallRead::new();
    let content = record::read_content(file, &mut small).ok()?;
    LockDocument::decode(&content).ok()
}

/// Whether `doc` is an unreleased descriptor record naming the parent
/// process `ppid`, started at `start`, on this host, boot and PID namespace.
fn names_parent(doc: &LockDocument, ppid: u32, start: u64) -> bool {
    let me = sys::process_identity();
    let owner = &doc.owner;
    !doc.released
        && owner.release == Release::Unrecorded
        && owner.pid == ppid
        && owner.start_time == Some(start)
        && owner.hostname == me.hostname
        && owner.boot_id == me.boot_id
        && owner.pid_namespace == me.pid_namespace
}
