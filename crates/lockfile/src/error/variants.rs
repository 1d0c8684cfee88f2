//! The variants of the crate's error, and of the refusal to evict that a
//! contention error carries: one file, since each type holds the other
//! (a refusal to evict may come of an error inspecting the holder).

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use super::operation::Operation;
use super::wording;
use crate::{Holder, OwnerRecord, text};

/// Everything that can go wrong while locking, inspecting or reaping.
///
/// Contention is its own variant, [`Error::Contended`], never a generic I/O
/// error: test for it with [`Error::is_contended`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Someone else holds the lock. `owner` is their record when it could
    /// be read; otherwise `holders` names the processes the kernel shows.
    #[error("`{}` is locked by {}", text::path(path), wording::holder(owner.as_deref(), holders, not_evicted.as_deref().map(ToString::to_string)))]
    #[non_exhaustive]
    Contended {
        /// The lock file.
        path: PathBuf,
        /// The holder's owner record, when the file held a readable one.
        /// `None` when the holders hold the lock shared: they keep no record,
        /// and one left in the file is an earlier holder's.
        owner: Option<Box<OwnerRecord>>,
        /// The kernel's holders, as [`inspect`](crate::inspect()) lists them,
        /// when no record names one (flock(1), shared holders); else empty.
        holders: Vec<Holder>,
        /// Why the holder was not evicted, when
        /// [`LockOptions::evict_after`](crate::LockOptions::evict_after) asked.
        not_evicted: Option<Box<EvictionRefused>>,
    },
    /// A bounded wait ended before the lock came free.
    #[error("gave up waiting for `{}` after {}: it is locked by {}", text::path(path), humantime::format_duration(*waited), wording::holder(owner.as_deref(), holders, not_evicted.as_deref().map(ToString::to_string)))]
    #[non_exhaustive]
    Timeout {
        /// The lock file.
        path: PathBuf,
        /// How long the call waited.
        waited: Duration,
        /// The holder's owner record at the moment the wait ended, when
        /// readable (`None` against shared holders, as for `Contended`).
        owner: Option<Box<OwnerRecord>>,
        /// The kernel's holders when no record names one, as for `Contended`.
        holders: Vec<Holder>,
        /// Why the holder was not evicted, when
        /// [`LockOptions::evict_after`](crate::LockOptions::evict_after) asked:
        /// the last judgement of the wait.
        not_evicted: Option<Box<EvictionRefused>>,
    },
    /// The directory that should contain the lock file does not exist.
    #[error(
        "cannot {op} `{}`: the directory `{}` does not exist (create it, or choose an existing lock directory)",
        text::path(path),
        text::path(dir)
    )]
    DirectoryNotFound {
        /// The failed operation.
        op: Operation,
        /// The lock file.
        path: PathBuf,
        /// The missing directory.
        dir: PathBuf,
        /// The error the kernel returned (ENOENT).
        source: io::Error,
    },
    /// A component of the path that should be a directory is a file
    /// (`/etc/passwd/x.lock`): ENOTDIR.
    #[error(
        "cannot {op} `{}`: `{}` is not a directory (a lock file's directory must be one)",
        text::path(path),
        text::path(not_dir)
    )]
    NotADirectory {
        /// The failed operation.
        op: Operation,
        /// The lock file, or the directory asked for.
        path: PathBuf,
        /// The first component of `path` that is not a directory, as far as
        /// a look after the failure tells (its parent when none could be
        /// found: the path changed meanwhile).
        not_dir: PathBuf,
        /// The error the kernel returned (ENOTDIR).
        source: io::Error,
    },
    /// The operating system refused access.
    #[error(
        "cannot {op} `{}`: permission denied for euid {euid}: {hint}",
        text::path(path)
    )]
    PermissionDenied {
        /// The failed operation.
        op: Operation,
        /// The path that was refused.
        path: PathBuf,
        /// The effective user id of this process.
        euid: u32,
        /// What is in the way and what to do about it.
        hint: String,
        /// The error the kernel returned (EACCES, EPERM), when it was one.
        source: Option<io::Error>,
    },
    /// The lock file lives on a read-only filesystem.
    #[error(
        "cannot {op} `{}`: the filesystem is read-only (put lock files on a writable filesystem)",
        text::path(path)
    )]
    ReadOnlyFilesystem {
        /// The failed operation.
        op: Operation,
        /// The lock file.
        path: PathBuf,
        /// The error the kernel returned (EROFS).
        source: io::Error,
    },
    /// The filesystem is full (or out of inodes, or over quota).
    #[error("cannot {op} `{}`: no space left on the filesystem", text::path(path))]
    NoSpace {
        /// The failed operation.
        op: Operation,
        /// The lock file.
        path: PathBuf,
        /// The error the kernel returned (ENOSPC, EDQUOT).
        source: io::Error,
    },
    /// The filesystem does not support `flock` (some NFS and FUSE mounts).
    #[error(
        "cannot {op} `{}`: the filesystem does not support advisory locks ({source}); use a local filesystem, or a lease (lockfile-etcd) across hosts",
        text::path(path)
    )]
    LockUnsupported {
        /// The failed operation.
        op: Operation,
        /// The lock file.
        path: PathBuf,
        /// The error the kernel returned (ENOLCK, EOPNOTSUPP, ...).
        source: io::Error,
    },
    /// A symbolic link sits at the lock path. It is refused, never followed, so
    /// the file it points to is never written or truncated.
    #[error(
        "refusing to {op} `{}`: it is a symbolic link; a lock file must be a regular file",
        text::path(path)
    )]
    Symlink {
        /// The failed operation.
        op: Operation,
        /// The lock path.
        path: PathBuf,
        /// The error the kernel returned (ELOOP).
        source: io::Error,
    },
    /// Something other than a regular file sits at the lock path.
    #[error(
        "refusing to {op} `{}`: it is a {kind}, not a regular file",
        text::path(path)
    )]
    NotRegularFile {
        /// The failed operation.
        op: Operation,
        /// The lock path.
        path: PathBuf,
        /// What was found: "directory", "FIFO", "character device", ...
        kind: &'static str,
    },
    /// The lock file holds content that is not ours (a script, data, another
    /// tool's lock file), and the lock was to carry a record. Nothing was
    /// written; [`crate::LockOptions::record_optional`] locks it without one.
    #[error(
        "refusing to write an owner record into `{}`: it holds {size} bytes that are not one of ours (beginning \"{preview}\"); lock it without a record (LockOptions::record_optional), or use a lock file of its own",
        text::path(path)
    )]
    ForeignContent {
        /// The lock file.
        path: PathBuf,
        /// The file's size in bytes.
        size: u64,
        /// Its first bytes, escaped for printing.
        preview: String,
    },
    /// The lock file is planted: in a sticky directory that others may
    /// write, owned by neither our euid nor the directory's owner (the
    /// `fs.protected_regular` rule), so its owner can unlink or rewrite it
    /// while held and a lock on it excludes nobody. Nothing was locked.
    #[error(
        "refusing to lock `{}`: it is owned by uid {owner_uid}, in a sticky directory that others may write and that uid {dir_owner_uid} owns, so its owner can unlink or rewrite it at will and a lock on it excludes nobody (the fs.protected_regular rule); use a lock directory only trusted users may write",
        text::path(path)
    )]
    PlantedFile {
        /// The lock file.
        path: PathBuf,
        /// Its owner.
        owner_uid: u32,
        /// The owner of its directory.
        dir_owner_uid: u32,
    },
    /// The record would be longer than any record may be (64 KiB): only a
    /// very long job name gets there. Refused before the file is opened.
    #[error(
        "refusing to {op} `{}`: the record would take {size} bytes, more than the {max} an owner record may; shorten the job name ({job_len} bytes)",
        text::path(path)
    )]
    RecordTooLarge {
        /// What was refused: [`Operation::Write`] of the record.
        op: Operation,
        /// The lock file.
        path: PathBuf,
        /// How long the record would be, at least.
        size: usize,
        /// The longest an owner record may be.
        max: usize,
        /// The job name's length in bytes.
        job_len: usize,
    },
    /// A beat for a run whose record is no longer in the lock file: the run
    /// ended, or another run holds the lock now. Nothing was changed.
    #[error(
        "refusing to beat `{}` for run {token}: {}; a process left behind by an earlier run must not keep a later run's lock alive",
        text::path(path),
        match found {
            Some(other) => format!("its record belongs to run {other}"),
            None => "it holds no unreleased record".to_owned(),
        }
    )]
    NotOurRun {
        /// The lock file.
        path: PathBuf,
        /// The run that asked to beat.
        token: uuid::Uuid,
        /// The run whose record the file holds, if an unreleased one.
        found: Option<uuid::Uuid>,
    },
    /// The run's tick (`LockOptions::claim_tick`) was used up by a run that
    /// finished: this run must not start. Not a failure: a skip.
    #[error(
        "tick {} of `{}` already ran{} ({})",
        crate::rfc3339::display(*tick),
        text::path(path),
        claim.as_ref().map(|c| format!(" on host {}", crate::text::quoted(&c.host))).unwrap_or_default(),
        run.outcome
    )]
    TickUsed {
        /// The lock file.
        path: PathBuf,
        /// The tick.
        tick: std::time::SystemTime,
        /// The run that used it up.
        run: Box<crate::LastRun>,
        /// Its claim, naming the host and pid that ran it, when kept.
        claim: Option<Box<crate::Claim>>,
    },
    /// The lock came later than half a period after the run's tick
    /// (`LockOptions::claim_tick`): the run belongs to no tick any more.
    #[error(
        "the lock on `{}` came too late for tick {}: more than half a period after it",
        text::path(path),
        crate::rfc3339::display(*tick)
    )]
    TooLate {
        /// The lock file.
        path: PathBuf,
        /// The tick it was too late for.
        tick: std::time::SystemTime,
    },
    /// Every one of N slots is held ([`crate::LockOptions::try_acquire_slot`]),
    /// or a bounded wait for any of them ended.
    #[error("{}", wording::slots_held(path, *count, holders, *waited))]
    #[non_exhaustive]
    SlotsHeld {
        /// The lock file: slot 0.
        path: PathBuf,
        /// How many slots were asked for.
        count: u16,
        /// How long the call waited, when it waited.
        waited: Option<Duration>,
        /// Each slot's holder, in slot order.
        holders: Vec<crate::slot::SlotHolder>,
    },
    /// Any other I/O failure.
    #[error("cannot {op} `{}`: {source}", text::path(path))]
    Io {
        /// The failed operation.
        op: Operation,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
}

/// Why an acquire with [`LockOptions::evict_after`](crate::LockOptions::evict_after)
/// did not evict the holder. Carried by [`Error::Contended`](crate::Error::Contended)
/// and [`Error::Timeout`](crate::Error::Timeout); see
/// [`Error::not_evicted`](crate::Error::not_evicted).
///
/// Each message reads after "not evicted: ".
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvictionRefused {
    /// This platform or kernel cannot stop a process without a race with
    /// PID reuse: eviction needs pidfds (Linux 5.3 or later).
    #[error("{why}")]
    Unsupported {
        /// What is missing.
        why: &'static str,
    },
    /// The file holds no owner record of ours: flock(1), another tool, or a
    /// holder that keeps no record there
    /// ([`LockReport::no_record`](crate::LockReport::no_record)). Nothing
    /// says what it promised, or who it is.
    #[error(
        "the file holds no owner record of ours (flock(1) or another tool?), so nothing says what its holder promised"
    )]
    NoRecord,
    /// The record says its owner released the lock: whoever holds it now
    /// wrote no record.
    #[error("the record says its owner released the lock; whoever holds it now wrote no record")]
    Released,
    /// The heartbeat is kept by a wrapper on the job's behalf (`lockfile
    /// run` without `--watchdog`): it proves only that the wrapper lives,
    /// so its silence is no sign of a hung job.
    #[error(
        "its heartbeat is kept by a wrapper (lockfile run without --watchdog), which proves only that the wrapper lives"
    )]
    WrapperHeartbeat,
    /// The record promises no heartbeat interval: a holder that never said
    /// how often it beats cannot be caught breaking its word.
    #[error("its record promises no heartbeat interval")]
    NoPromise,
    /// The heartbeat has not been silent for longer than both the eviction
    /// threshold and the holder's own promise (plus its kill-after, for a
    /// holder with a watchdog).
    #[error(
        "its heartbeat has been silent for {}, not longer than {}",
        humantime::format_duration(Duration::from_millis(silent.as_millis() as u64)),
        humantime::format_duration(*threshold)
    )]
    NotSilentLongEnough {
        /// Time since the last heartbeat.
        silent: Duration,
        /// What it must exceed: the larger of `evict_after` and the promise.
        threshold: Duration,
    },
    /// The record was written on another host: its PID means nothing here.
    #[error(
        "its record was written on host {}, not this one",
        crate::text::quoted(host)
    )]
    OtherHost {
        /// The host the record names.
        host: String,
    },
    /// The record was written in another boot: its PID and start time mean
    /// nothing now.
    #[error("its record was written in another boot (boot id {recorded}, now {current})")]
    OtherBoot {
        /// The boot id in the record.
        recorded: String,
        /// This boot's id.
        current: String,
    },
    /// The record lacks a fact that, with the PID, identifies one process:
    /// its boot id, start time or PID namespace.
    #[error("its record carries no {missing}, and a PID alone identifies no process")]
    Unidentifiable {
        /// `boot id`, `start time` or `PID namespace`.
        missing: &'static str,
    },
    /// The owner lives in a PID namespace that cannot be resolved from here.
    #[error("its owner's PID namespace (inode {pid_namespace}) cannot be resolved from here")]
    OtherPidNamespace {
        /// The namespace's inode, from the record.
        pid_namespace: u64,
    },
    /// The recorded owner is gone (it exited, or is exiting).
    #[error("its owner, pid {pid}, is gone")]
    OwnerGone {
        /// The owner's PID.
        pid: u32,
    },
    /// The recorded PID belongs to another process now: its start time is
    /// not the owner's. That process is never signalled.
    #[error(
        "pid {pid} now belongs to another process (started at tick {found}, the owner at tick {recorded})"
    )]
    PidReused {
        /// The PID.
        pid: u32,
        /// The owner's start time, from the record.
        recorded: u64,
        /// The live process's start time.
        found: u64,
    },
    /// A process holds the lock that is neither the recorded owner nor one
    /// of its descendants. Sharing the owner's open file proves nothing: a
    /// descriptor can be passed to any process (SCM_RIGHTS) or outlive the
    /// run in a daemon that left its tree, and such a process is never
    /// stopped for the record's sake.
    #[error(
        "pid {pid} holds the lock but is neither its recorded owner nor one of the owner's descendants"
    )]
    UnrelatedHolder {
        /// The holder's PID.
        pid: u32,
    },
    /// A process that holds the kernel lock could not be identified: it is
    /// outside our PID namespace, or its descriptors are not ours to read.
    #[error("a process that holds the lock could not be identified ({})", wording::unidentified(*pid))]
    UnidentifiedHolder {
        /// Its PID, when the kernel's table names it.
        pid: Option<u32>,
    },
    /// A process that would be stopped belongs to another user, and this
    /// process is not root.
    #[error("pid {pid} belongs to another user ({}), and this process is not root", wording::uid(*uid))]
    OtherUser {
        /// The process's PID.
        pid: u32,
        /// Its real or effective uid, whichever is not ours, when readable.
        uid: Option<u32>,
    },
    /// A process that would be stopped does not run as the owner's uid,
    /// both real and effective (or the owner itself runs as two uids, or
    /// its uids could not be read). Root is no exception: a tree of mixed
    /// users is not one run's to stop.
    #[error("pid {pid} runs as {}, and every process to stop must run as {}, real and effective",
        wording::uids(*uids), wording::owner_uid(*owner))]
    MixedUids {
        /// The process's PID.
        pid: u32,
        /// Its real and effective uids, when readable.
        uids: Option<(u32, u32)>,
        /// The owner's uid, when it runs as one.
        owner: Option<u32>,
    },
    /// As root: the lock file belongs to another uid than the one its
    /// recorded owner runs as. Whoever owns the file wrote the record, and
    /// its say-so does not aim root's signals at another user's processes.
    #[error("the lock file belongs to uid {file_uid}, but its owner runs as uid {owner_uid}")]
    FileOfAnotherUser {
        /// The lock file's owner (`st_uid`).
        file_uid: u32,
        /// The uid the recorded owner runs as.
        owner_uid: u32,
    },
    /// The lock file is planted (see
    /// [`Finding::PlantedFile`](crate::inspect::Finding::PlantedFile)): its owner
    /// writes its record and sets its heartbeat at will, so neither says
    /// anything about a holder.
    #[error(
        "the lock file is planted (owned by uid {owner_uid} in a shared sticky directory), so nothing in it is trusted"
    )]
    PlantedFile {
        /// The file's owner.
        owner_uid: u32,
    },
    /// This process would be among those stopped: the holder is this
    /// process or one of its ancestors.
    #[error(
        "this process would be among those stopped (the holder is this process or an ancestor)"
    )]
    WouldStopItself,
    /// The heartbeat moved while the holder was being judged: it is alive
    /// after all.
    #[error("its heartbeat moved while it was being judged")]
    Resumed,
    /// The path no longer names the file whose lock is being waited for.
    #[error("the path no longer names the file whose lock was being waited for")]
    Replaced,
    /// The holder was stopped, but the lock was still held when the wait
    /// ended: by survivors (a process in uninterruptible sleep can outlive
    /// SIGKILL for long), or by someone who took it first.
    #[error(
        "the holder was stopped, but the lock was still held when the wait ended ({})",
        wording::survivors(survivors)
    )]
    StillHeld {
        /// The stopped processes still alive then.
        survivors: Vec<u32>,
    },
    /// Looking at the lock failed.
    #[error("cannot inspect the lock: {0}")]
    Inspect(#[source] Box<crate::Error>),
    /// A system call on a process failed.
    #[error("cannot {what} pid {pid}: {source}")]
    Failed {
        /// What was being done.
        what: &'static str,
        /// The process.
        pid: u32,
        /// The error.
        #[source]
        source: io::Error,
    },
}
