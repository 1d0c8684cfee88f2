//! `EvictionRefused`: why a holder was not evicted. Its own file, because
//! the contention errors carry it and the eviction procedure makes it: both
//! name it, neither imports the other.

use std::io;
use std::time::Duration;

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
    #[error("its record was written on host {host:?}, not this one")]
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
    #[error("a process that holds the lock could not be identified{}", match pid {
        Some(pid) => format!(" (pid {pid}: its descriptors are not ours to read)"),
        None => " (the kernel names none that is visible from here)".to_owned(),
    })]
    UnidentifiedHolder {
        /// Its PID, when the kernel's table names it.
        pid: Option<u32>,
    },
    /// A process that would be stopped belongs to another user, and this
    /// process is not root.
    #[error("pid {pid} belongs to another user ({}), and this process is not root", match uid {
        Some(uid) => format!("uid {uid}"),
        None => "uid unknown".to_owned(),
    })]
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
        match uids {
            Some((real, effective)) => format!("real uid {real}, effective uid {effective}"),
            None => "uids that cannot be read".to_owned(),
        },
        match owner {
            Some(uid) => format!("the owner's uid {uid}"),
            None => "the owner's one uid".to_owned(),
        }
    )]
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
    #[error("the holder was stopped, but the lock was still held when the wait ended ({})",
        if survivors.is_empty() {
            "another process took it first".to_owned()
        } else {
            let pids: Vec<String> = survivors.iter().map(|p| format!("pid {p}")).collect();
            format!("still alive: {}", pids.join(", "))
        }
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
