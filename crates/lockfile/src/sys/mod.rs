//! Platform calls. Everything `unsafe` in this crate lives under this module.
//!
//! `linux/` is the tested platform: it reads `/proc` to learn who holds a
//! kernel lock and uses a per-thread POSIX timer for bounded waits.
//! `other.rs` keeps other Unix systems compiling with documented fallbacks.
//! Both offer the same functions; the types they share, and what needs no
//! platform of its own, are defined here once, so the two cannot drift apart.

use std::borrow::Cow;
use std::fs::File;
use std::io;
use std::os::fd::BorrowedFd;
use std::time::SystemTime;

// `--cfg lockfile_fallback` builds the fallback on Linux too, so that CI
// compiles it: a fallback nobody builds stops compiling unnoticed.
#[cfg(all(target_os = "linux", not(lockfile_fallback)))]
mod linux;
#[cfg(all(target_os = "linux", not(lockfile_fallback)))]
pub(crate) use linux::*;

#[cfg(any(not(target_os = "linux"), lockfile_fallback))]
mod other;
#[cfg(any(not(target_os = "linux"), lockfile_fallback))]
pub(crate) use other::*;

mod process_identity;
pub(crate) use process_identity::{ProcessIdentity, process_identity};

/// Whether a process with this PID exists in our PID namespace. EPERM means it
/// exists but belongs to another user: alive. Tools that read EPERM as "dead"
/// have deleted live locks.
pub(crate) fn pid_exists(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    match rustix::process::test_kill_process(pid) {
        Ok(()) => true,
        Err(e) => e != rustix::io::Errno::SRCH,
    }
}

/// Our parent's PID in our PID namespace; `None` when it is not visible from
/// here (we are the first process of a PID namespace).
pub(crate) fn parent_pid() -> Option<u32> {
    rustix::process::getppid().map(|pid| pid.as_raw_nonzero().get().unsigned_abs())
}

/// `path` with any trailing `/` and `/.` taken off, so that opening it with
/// `O_NOFOLLOW` looks at the last component itself: the kernel follows a
/// symlink named as `link/` or `link/.` whatever the flags say.
pub(crate) fn without_trailing_slash(path: &std::path::Path) -> Cow<'_, std::path::Path> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    if bytes.ends_with(b"/") || bytes.ends_with(b"/.") {
        Cow::Owned(path.components().collect())
    } else {
        Cow::Borrowed(path)
    }
}

/// Opens `path` with `O_NOATIME` when allowed (we own the file, or hold
/// CAP_FOWNER), without it otherwise. Reading a lock file must not dirty its
/// inode: after every record write the access time is older than the
/// modification time, so without the flag each read would update it.
pub(crate) fn open_noatime(
    path: &std::path::Path,
    open: impl Fn(&std::path::Path, i32) -> io::Result<File>,
) -> io::Result<File> {
    match open(path, noatime_flag()) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => open(path, 0),
        other => other,
    }
}

/// Refreshes the file's modification time to `now`, the heartbeat. One
/// syscall, no allocation. An explicit time rather than `UTIME_NOW`, because
/// the kernel's coarse clock would round it to a few milliseconds.
pub(crate) fn touch(file: &File, now: SystemTime) -> io::Result<()> {
    let since_epoch = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let both = |ts: rustix::fs::Timespec| rustix::fs::Timestamps {
        last_access: ts,
        last_modification: ts,
    };
    let explicit = rustix::fs::Timespec {
        tv_sec: i64::try_from(since_epoch.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: since_epoch.subsec_nanos().into(),
    };
    let kernel_now = rustix::fs::Timespec {
        tv_sec: 0,
        tv_nsec: rustix::fs::UTIME_NOW,
    };
    match rustix::fs::futimens(file, &both(explicit)) {
        // Setting explicit times takes owning the file; "now" takes only
        // write access, which a holder of a lock shared between users has.
        Err(rustix::io::Errno::PERM) => rustix::fs::futimens(file, &both(kernel_now)),
        other => other,
    }
    .map_err(io::Error::from)
}

/// Reads up to `buf.len()` bytes from the start of a regular file and returns
/// how many it got. Bounded by the buffer, never the file. A short read of a
/// regular file means end of file, so the usual case is one `pread`.
pub(crate) fn read_prefix(file: &File, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: the same bytes seen as possibly uninitialised, which they are
    // not; `read_prefix_uninit` only ever writes initialised bytes (pread's).
    let buf = unsafe { &mut *(std::ptr::from_mut(buf) as *mut [std::mem::MaybeUninit<u8>]) };
    read_prefix_uninit(file, buf).map(|read| read.len())
}

/// [`read_prefix`] into a buffer that need not be initialised; returns the
/// bytes read.
pub(crate) fn read_prefix_uninit<'a>(
    file: &File,
    buf: &'a mut [std::mem::MaybeUninit<u8>],
) -> io::Result<&'a mut [u8]> {
    let mut filled = 0;
    while filled < buf.len() {
        match rustix::io::pread(file, &mut buf[filled..], filled as u64) {
            Ok(([], _)) => break,
            Ok((read, _)) => {
                let n = read.len();
                filled += n;
                if filled < buf.len() {
                    break;
                }
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) => break,
            Err(e) => return Err(e.into()),
        }
    }
    // SAFETY: pread initialised the first `filled` bytes, one read after
    // another from the start.
    Ok(unsafe { &mut *(std::ptr::from_mut(&mut buf[..filled]) as *mut [u8]) })
}

/// Unlinks `name` from the open directory `dir`, but only while it still
/// names the file `expected` (the one checked under its lock): never through
/// a symlink, and never in another directory than the one `dir` pinned,
/// whatever its path names now.
///
/// What the check cannot exclude is whoever may write `dir` renaming another
/// file over `name` between the look and the unlink: only they can, and only
/// in that directory, which is theirs to change anyway.
pub(crate) fn unlink_if_same(
    dir: BorrowedFd<'_>,
    name: &std::path::Path,
    expected: &Identity,
) -> io::Result<bool> {
    match identity_in(dir, name) {
        Ok(now) if now.same_file(expected) => {}
        Ok(_) => return Ok(false),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    }
    rustix::fs::unlinkat(dir, name, rustix::fs::AtFlags::empty())?;
    Ok(true)
}

/// The kind of a file that is not a regular file, for error messages.
pub(crate) fn file_kind(kind: rustix::fs::FileType) -> &'static str {
    use rustix::fs::FileType;
    match kind {
        FileType::Directory => "directory",
        FileType::Symlink => "symbolic link",
        FileType::Fifo => "FIFO",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::RegularFile => "regular file",
        _ => "special file",
    }
}

/// What `/proc/PID/stat` tells of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcStat {
    /// It has exited, or is exiting: a zombie its parent has not reaped yet
    /// (state Z or X), or a process past the point where the kernel closed
    /// its files (flag PF_EXITING), whose locks are gone.
    pub(crate) exited: bool,
    /// Field 4: the parent's PID (0 when the parent is outside our PID
    /// namespace).
    pub(crate) parent: u32,
    /// Field 22: the start time in clock ticks since boot.
    pub(crate) start_time: u64,
}

/// Whether the kernel lock on a file is held, and by whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KernelHold {
    Free,
    /// Held. The PIDs are the processes that took the lock, as the kernel
    /// recorded them; a non-positive PID is one not visible from here. For a
    /// lock the table left out, they are the processes holding it.
    Held {
        pids: Vec<i64>,
        /// Held shared (`LOCK_SH`) by all of them, as far as the platform
        /// tells; an exclusive lock has one holding open file.
        shared: bool,
    },
}

/// The two kinds of `flock(2)` lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LockMode {
    /// `LOCK_EX`: one open file holds it, and nobody else.
    Exclusive,
    /// `LOCK_SH`: any number of open files hold it together.
    Shared,
}

impl LockMode {
    fn operation(self, wait: bool) -> rustix::fs::FlockOperation {
        use rustix::fs::FlockOperation as Op;
        match (self, wait) {
            (LockMode::Exclusive, true) => Op::LockExclusive,
            (LockMode::Exclusive, false) => Op::NonBlockingLockExclusive,
            (LockMode::Shared, true) => Op::LockShared,
            (LockMode::Shared, false) => Op::NonBlockingLockShared,
        }
    }
}

/// Takes the lock on the open file `fd` refers to if nobody holds it in a
/// conflicting way: `Ok(false)` when someone does. On an open file that
/// already holds the lock, this converts it to `mode`, as flock(2) does.
pub(crate) fn try_lock(fd: BorrowedFd<'_>, mode: LockMode) -> io::Result<bool> {
    match rustix::fs::flock(fd, mode.operation(false)) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Waits in the kernel for the lock, however long it takes.
pub(crate) fn lock(fd: BorrowedFd<'_>, mode: LockMode) -> io::Result<()> {
    loop {
        match rustix::fs::flock(fd, mode.operation(true)) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Drops the lock of the open file `fd` refers to, for every descriptor that
/// shares that open file.
pub(crate) fn unlock(fd: BorrowedFd<'_>) -> io::Result<()> {
    rustix::fs::flock(fd, rustix::fs::FlockOperation::Unlock).map_err(io::Error::from)
}

/// How a process holds a lock: through a descriptor open for writing, or
/// only read-only ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HoldAccess {
    // Only /proc tells; the fallback never knows.
    #[cfg_attr(any(not(target_os = "linux"), lockfile_fallback), allow(dead_code))]
    Writable,
    ReadOnly,
}

/// How one process holds the lock on a file, from its own descriptors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
// Only /proc tells; the fallback never builds one.
#[cfg_attr(any(not(target_os = "linux"), lockfile_fallback), allow(dead_code))]
pub(crate) struct ProcessHold {
    /// Whether a descriptor that holds it is open for writing.
    pub(crate) access: HoldAccess,
    pub(crate) mode: LockMode,
}

/// What the lock's hot path needs to know of a file: which one it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Identity {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) kind: rustix::fs::FileType,
    /// How many names the file has: 0 once it was unlinked or renamed over.
    pub(crate) links: u64,
    /// Its owner: a file in a shared sticky directory may be planted.
    pub(crate) uid: u32,
    /// Its length in bytes: a regular file longer than any record of ours
    /// is someone else's, whatever its first bytes say.
    pub(crate) size: u64,
}

impl Identity {
    pub(crate) fn is_regular(&self) -> bool {
        self.kind == rustix::fs::FileType::RegularFile
    }

    pub(crate) fn is_dir(&self) -> bool {
        self.kind == rustix::fs::FileType::Directory
    }

    pub(crate) fn same_file(&self, other: &Identity) -> bool {
        self.dev == other.dev && self.ino == other.ino
    }
}

/// The filesystems where a kernel lock may not cross hosts, or may not exist.
pub(crate) fn network_filesystem(file: &File) -> Option<&'static str> {
    filesystem_type(file).and_then(|magic| {
        Some(match magic {
            0x6969 => "nfs",
            0x517B => "smb",
            0xFF53_4D42 => "cifs",
            0xFE53_4D42 => "smb2",
            0x6573_5546 => "fuse",
            0x00C3_6400 => "ceph",
            0x0102_1997 => "9p",
            0x6B41_4653 => "afs",
            0x0116_1970 => "gfs2",
            0x7461_636F => "ocfs2",
            0x0BD0_0BD0 => "lustre",
            _ => return None,
        })
    })
}

/// The fallback bounded wait: try, then sleep with exponential backoff
/// (1 ms doubling to 50 ms), never past the deadline. Used where the kernel
/// wait cannot be interrupted (no POSIX per-thread timers, or the wake signal
/// is taken by the application).
pub(crate) fn poll_until(
    fd: BorrowedFd<'_>,
    mode: LockMode,
    deadline: std::time::Instant,
) -> io::Result<bool> {
    use std::time::{Duration, Instant};
    let mut pause = Duration::from_millis(1);
    loop {
        if try_lock(fd, mode)? {
            return Ok(true);
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(false);
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}
