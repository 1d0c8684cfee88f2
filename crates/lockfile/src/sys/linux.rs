//! Linux: `/proc` for identities and lock holders, a POSIX timer for bounded waits.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use rustix::fs::FlockOperation;

/// Reads a small `/proc` file (a few hundred bytes) in as few `read` calls as
/// it takes, where `read_to_string` would start with a 32-byte probe and
/// grow: a process's first lock reads several such files. Bytes, because a
/// command name need not be UTF-8.
fn read_proc(path: &str) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut file = File::open(path).ok()?;
    let mut buf = [0u8; 4096];
    let mut text = Vec::new();
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Some(text),
            Ok(n) => text.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

pub(super) fn boot_id() -> Option<String> {
    let id = read_proc("/proc/sys/kernel/random/boot_id")?;
    Some(String::from_utf8_lossy(&id).trim().to_owned()).filter(|id| !id.is_empty())
}

/// The inode of a process's PID namespace: ours when `pid` is `None`.
pub(crate) fn pid_namespace(pid: Option<u32>) -> Option<u64> {
    let path = match pid {
        None => "/proc/self/ns/pid".to_owned(),
        Some(pid) => format!("/proc/{pid}/ns/pid"),
    };
    std::fs::metadata(path).ok().map(|m| m.ino())
}

/// What `/proc/PID/stat` tells of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcStat {
    /// It has exited, or is exiting: a zombie its parent has not reaped yet
    /// (state Z or X), or a process past the point where the kernel closed
    /// its files (flag PF_EXITING), whose locks are gone.
    pub(crate) exited: bool,
    /// Field 22: the start time in clock ticks since boot.
    pub(crate) start_time: u64,
}

pub(crate) fn process_stat(pid: u32) -> Option<ProcStat> {
    stat_from(&format!("/proc/{pid}/stat"))
}

/// Our own start time. Through `/proc/self`, because inside a PID namespace
/// whose `/proc` is the host's, `/proc/<our pid>` names another process.
pub(super) fn own_start_time() -> Option<u64> {
    stat_from("/proc/self/stat").map(|s| s.start_time)
}

fn stat_from(path: &str) -> Option<ProcStat> {
    let stat = read_proc(path)?;
    // The command name (field 2) may hold spaces, parentheses and bytes that
    // are not UTF-8; the fields after it start behind the last ')', with the
    // state (field 3), and are ASCII.
    const PF_EXITING: u64 = 0x4;
    let after_comm = &stat[stat.iter().rposition(|&b| b == b')')? + 1..];
    let after_comm = std::str::from_utf8(after_comm).ok()?;
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    let state = fields.first()?;
    let flags: u64 = fields.get(6)?.parse().ok()?;
    Some(ProcStat {
        exited: matches!(*state, "Z" | "X") || flags & PF_EXITING != 0,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

/// The PID a process has inside its own (innermost) PID namespace, from the
/// `NSpid:` line of `/proc/PID/status`.
pub(crate) fn innermost_pid(pid: u32) -> Option<u32> {
    let status = read_proc(&format!("/proc/{pid}/status"))?;
    let status = String::from_utf8_lossy(&status);
    let line = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    line.split_whitespace().last()?.parse().ok()
}

/// The short command name of a process (`/proc/PID/comm`).
pub(crate) fn command_name(pid: u32) -> Option<String> {
    let comm = read_proc(&format!("/proc/{pid}/comm"))?;
    Some(String::from_utf8_lossy(&comm).trim_end().to_owned())
}

pub(super) fn noatime_flag() -> i32 {
    libc::O_NOATIME
}

/// The identity of an open file, from statx(2) asked for the type and inode
/// only. Not for the times: on filesystems with fine-grained timestamps
/// (Linux 6.13+), a query of the times makes the next write to the file take
/// a fine-grained timestamp and log its inode, which the lock's hot path
/// would pay for on every record write.
pub(crate) fn identity_of(file: &File) -> io::Result<super::Identity> {
    identity(rustix::fs::statx(
        file,
        "",
        rustix::fs::AtFlags::EMPTY_PATH,
        rustix::fs::StatxFlags::TYPE | rustix::fs::StatxFlags::INO,
    ))
}

/// The identity of what `path` names, without following a symlink.
pub(crate) fn identity_at(path: &std::path::Path) -> io::Result<super::Identity> {
    identity(rustix::fs::statx(
        rustix::fs::CWD,
        path,
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        rustix::fs::StatxFlags::TYPE | rustix::fs::StatxFlags::INO,
    ))
}

fn identity(statx: rustix::io::Result<rustix::fs::Statx>) -> io::Result<super::Identity> {
    let st = statx?;
    Ok(super::Identity {
        dev: rustix::fs::makedev(st.stx_dev_major, st.stx_dev_minor),
        ino: st.stx_ino,
        kind: rustix::fs::FileType::from_raw_mode(st.stx_mode.into()),
    })
}

pub(super) fn filesystem_type(file: &File) -> Option<u64> {
    rustix::fs::fstatfs(file).ok().map(|s| s.f_type as u64)
}

/// One lock as `/proc/locks` (and the `lock:` lines of `/proc/PID/fdinfo/FD`)
/// print it.
#[derive(Debug, PartialEq, Eq)]
struct LockLine {
    /// A `flock` lock; otherwise a POSIX (`fcntl`, `lockf`) or OFD lock,
    /// which does not conflict with `flock` on Linux but marks a file that
    /// another tool uses.
    flock: bool,
    /// The PID that took the lock, translated into our namespace; zero or
    /// negative when that process is not visible from here.
    pid: i64,
    /// The device of the filesystem (the superblock's, which on btrfs is not
    /// the one `stat` reports).
    dev: u64,
    ino: u64,
}

/// Parses `2: FLOCK  ADVISORY  WRITE 1831 fe:00:10010694 0 EOF`. Waiters
/// (`2: -> FLOCK ...`) hold nothing and are skipped.
fn parse_lock_line(line: &str) -> Option<LockLine> {
    let mut fields = line.split_whitespace();
    fields.next()?; // "N:"
    let kind = fields.next()?;
    if kind == "->" {
        return None;
    }
    fields.next()?; // ADVISORY or MANDATORY
    fields.next()?; // READ or WRITE: either blocks an exclusive lock
    let pid = fields.next()?.parse().ok()?;
    let mut dev_ino = fields.next()?.split(':');
    let major = u32::from_str_radix(dev_ino.next()?, 16).ok()?;
    let minor = u32::from_str_radix(dev_ino.next()?, 16).ok()?;
    let ino = dev_ino.next()?.parse().ok()?;
    Some(LockLine {
        flock: kind == "FLOCK",
        pid,
        dev: rustix::fs::makedev(major, minor),
        ino,
    })
}

/// A snapshot of the kernel's lock table, read from `/proc/locks` once and
/// shared by every file of a directory scan. Reading it takes no lock, so it
/// never makes a concurrent `try_acquire` fail.
#[derive(Debug, Default)]
pub(crate) struct KernelLocks {
    /// `flock` holders by (superblock device, inode).
    held: HashMap<(u64, u64), Vec<i64>>,
    /// Holders of POSIX and OFD locks, by (superblock device, inode).
    others: HashMap<(u64, u64), Vec<i64>>,
    /// Every inode in the table: a file whose inode is not here is not
    /// locked, without asking which device the table would call it.
    inodes: std::collections::HashSet<u64>,
    /// The superblock device of each mount seen, from `/proc/self/mountinfo`.
    mounts: std::sync::OnceLock<HashMap<u64, u64>>,
    /// Whether the table leaves out locks whose taker is gone: it does in
    /// any PID namespace but the first (a container's), and shows them there
    /// only in the descriptors that still hold them.
    hides_orphaned_locks: bool,
    /// Who has which file open, read on first need when the table hides
    /// orphaned locks.
    open_files: std::sync::OnceLock<OpenFiles>,
}

/// The inode of the first PID namespace, the kernel's `PROC_PID_INIT_INO`.
const INIT_PID_NAMESPACE: u64 = 0xEFFF_FFFC;

/// Whether the kernel lock on a file is held, and by whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KernelHold {
    Free,
    /// Held. The PIDs are the processes that took the lock, as the kernel
    /// recorded them; a non-positive PID is one not visible from here. For a
    /// lock the table left out, they are the processes holding it.
    Held(Vec<i64>),
}

impl KernelLocks {
    /// # Errors
    ///
    /// When `/proc/locks` cannot be read (no `/proc` mounted).
    pub(crate) fn snapshot() -> io::Result<KernelLocks> {
        let mut locks = KernelLocks {
            hides_orphaned_locks: super::process_identity()
                .pid_namespace
                .is_some_and(|ns| ns != INIT_PID_NAMESPACE),
            ..KernelLocks::default()
        };
        let (table, consistent) = read_lock_table()?;
        locks.add(&table);
        if !consistent {
            // Read in pieces, the table may have skipped a lock that was held
            // all along; it would have to be skipped twice to be missed.
            locks.add(&read_lock_table()?.0);
        }
        Ok(locks)
    }

    fn add(&mut self, table: &[u8]) {
        for lock in String::from_utf8_lossy(table)
            .lines()
            .filter_map(parse_lock_line)
        {
            let map = if lock.flock {
                &mut self.held
            } else {
                &mut self.others
            };
            let pids = map.entry((lock.dev, lock.ino)).or_default();
            if !pids.contains(&lock.pid) {
                pids.push(lock.pid);
            }
            self.inodes.insert(lock.ino);
        }
    }

    /// Who holds the `flock` lock on `file` (whose `stat` says dev, ino).
    pub(crate) fn hold(&self, file: &File, dev: u64, ino: u64) -> KernelHold {
        let listed = self
            .inodes
            .contains(&ino)
            .then(|| self.held.get(&(self.table_device(file, dev), ino)))
            .flatten();
        match listed {
            Some(pids) => KernelHold::Held(pids.clone()),
            // In a container the kernel prints no line for a lock whose
            // taker exited while a child it started still holds it (the
            // taker's PID no longer translates into this namespace). Only
            // the descriptors tell; walking them costs a scan of every
            // process, done once per snapshot and short in a container.
            None if self.hides_orphaned_locks => {
                let open = self.open_files.get_or_init(open_files);
                let holders: Vec<i64> = holding_among(open, dev, ino)
                    .into_iter()
                    .map(i64::from)
                    .collect();
                if holders.is_empty() {
                    KernelHold::Free
                } else {
                    KernelHold::Held(holders)
                }
            }
            None => KernelHold::Free,
        }
    }

    /// Who holds POSIX or OFD locks on `file`: another tool's locks.
    pub(crate) fn other_lockers(&self, file: &File, dev: u64, ino: u64) -> Vec<i64> {
        if !self.inodes.contains(&ino) {
            return Vec::new();
        }
        self.others
            .get(&(self.table_device(file, dev), ino))
            .cloned()
            .unwrap_or_default()
    }

    /// The device number the lock table prints for `file`: its filesystem's
    /// superblock device, from the mount it lives on. `stat` reports another
    /// number on some filesystems (btrfs gives every subvolume its own), and
    /// a lock compared against that one would never be found.
    fn table_device(&self, file: &File, stat_dev: u64) -> u64 {
        let mount = rustix::fs::statx(
            file,
            "",
            rustix::fs::AtFlags::EMPTY_PATH,
            rustix::fs::StatxFlags::MNT_ID,
        )
        .ok()
        .filter(|st| st.stx_mask & rustix::fs::StatxFlags::MNT_ID.bits() != 0)
        .map(|st| st.stx_mnt_id);
        let mounts = self.mounts.get_or_init(read_mounts);
        mount
            .and_then(|id| mounts.get(&id).copied())
            .unwrap_or(stat_dev)
    }
}

/// Mount id to superblock device, from `/proc/self/mountinfo`:
/// `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw`.
fn read_mounts() -> HashMap<u64, u64> {
    let Some(text) = read_proc("/proc/self/mountinfo") else {
        return HashMap::new();
    };
    String::from_utf8_lossy(&text)
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let id = fields.next()?.parse().ok()?;
            fields.next()?;
            let (major, minor) = fields.next()?.split_once(':')?;
            Some((
                id,
                rustix::fs::makedev(major.parse().ok()?, minor.parse().ok()?),
            ))
        })
        .collect()
}

/// Reads `/proc/locks` whole; the flag says whether one `read(2)` got it all.
///
/// The kernel builds the table while holding the lock list's lock, but only
/// for one `read` call, which returns at most a page. The next call resumes
/// by entry index in a list that may have changed meanwhile: when a lock
/// listed earlier is released in between, every later entry moves up one
/// index and one is skipped. A table read in one call is consistent.
fn read_lock_table() -> io::Result<(Vec<u8>, bool)> {
    use std::io::Read;
    let mut file = File::open("/proc/locks")?;
    let mut table = Vec::new();
    // At least a page per read; std's read_to_end would start with 32 bytes.
    let mut chunk = [0u8; 16 * 1024];
    let mut reads = 0;
    loop {
        match file.read(&mut chunk) {
            Ok(0) => return Ok((table, reads <= 1)),
            Ok(n) => {
                table.extend_from_slice(&chunk[..n]);
                reads += 1;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Every process that has a descriptor holding the `flock` lock on (dev, ino).
///
/// `/proc/locks` names only the process that took a lock. When it has exited
/// but a child inherited the descriptor (a daemon started by a cron job),
/// the lock is still held and only `/proc/PID/fdinfo` shows by whom. This walks
/// every process's descriptors, so it is only used when the recorded taker is
/// gone. Processes we may not look into are skipped.
pub(crate) fn processes_holding(dev: u64, ino: u64) -> Vec<u32> {
    holding_among(&open_files(), dev, ino)
}

/// Which process has each regular file open, by (stat device, inode).
type OpenFiles = HashMap<(u64, u64), Vec<u32>>;

/// Every process's open regular files, from `/proc/PID/fd`. Processes we may
/// not look into are skipped.
fn open_files() -> OpenFiles {
    let mut open = OpenFiles::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return open;
    };
    for pid in procs
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
    {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            // stat() follows the magic link to the open file itself.
            if let Ok(m) = std::fs::metadata(fd.path())
                && m.is_file()
            {
                let pids = open.entry((m.dev(), m.ino())).or_default();
                if !pids.contains(&pid) {
                    pids.push(pid);
                }
            }
        }
    }
    open
}

/// The processes among those with (dev, ino) open that hold its lock.
fn holding_among(open: &OpenFiles, dev: u64, ino: u64) -> Vec<u32> {
    open.get(&(dev, ino))
        .into_iter()
        .flatten()
        .copied()
        .filter(|&pid| process_holds(pid, dev, ino))
        .collect()
}

/// Whether process `pid` holds the `flock` lock on (dev, ino) through one of
/// its descriptors, read from `/proc/PID/fdinfo`: exact, and lock-free.
pub(crate) fn process_holds(pid: u32, dev: u64, ino: u64) -> bool {
    process_hold_access(pid, dev, ino).is_some()
}

/// How process `pid` holds the `flock` lock on (dev, ino): `None` when it
/// holds none (or its descriptors are not ours to read), otherwise whether
/// any descriptor that holds it is open for writing. A holder that opened the
/// file read-only, as flock(1) does, cannot have written a record.
pub(crate) fn process_hold_access(pid: u32, dev: u64, ino: u64) -> Option<super::HoldAccess> {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    let mut found = None;
    for fd in fds.flatten() {
        // stat() follows the magic link to the open file itself.
        let same_file =
            std::fs::metadata(fd.path()).is_ok_and(|m| m.dev() == dev && m.ino() == ino);
        if !same_file {
            continue;
        }
        let Some(info) = read_proc(&format!(
            "/proc/{pid}/fdinfo/{}",
            fd.file_name().to_string_lossy()
        )) else {
            continue;
        };
        let info = String::from_utf8_lossy(&info);
        // The fd is our file (stat matched), so its lock lines are about it;
        // their device is the superblock's, not stat's.
        let holds = info
            .lines()
            .filter_map(|l| l.strip_prefix("lock:"))
            .filter_map(parse_lock_line)
            .any(|l| l.flock && l.ino == ino);
        if !holds {
            continue;
        }
        let writable = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .and_then(|flags| u32::from_str_radix(flags.trim(), 8).ok())
            .is_none_or(|flags| flags & libc::O_ACCMODE as u32 != libc::O_RDONLY as u32);
        if writable {
            return Some(super::HoldAccess::Writable);
        }
        found = Some(super::HoldAccess::ReadOnly);
    }
    found
}

/// The signal that wakes a bounded wait. A real-time signal, because those
/// are the least likely to be in use by the application.
fn wake_signal() -> libc::c_int {
    libc::SIGRTMAX() - 3
}

extern "C" fn wake_handler(_: libc::c_int) {}

/// Makes sure `wake_signal()` runs our no-op handler, installing it when the
/// signal has its default disposition. Returns false when the application
/// uses the signal itself: bounded waits then fall back to polling.
fn wake_signal_ready() -> bool {
    let sig = wake_signal();
    let handler = wake_handler as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: a zeroed sigaction is a valid "no handler, empty mask" value,
    // and sigaction only reads `new` and writes `old`, both live locals.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
            return false;
        }
        if old.sa_sigaction == handler {
            return true;
        }
        if old.sa_sigaction != libc::SIG_DFL {
            return false;
        }
        let mut new: libc::sigaction = std::mem::zeroed();
        new.sa_sigaction = handler;
        // No SA_RESTART: the whole point is that flock(2) returns EINTR.
        new.sa_flags = 0;
        libc::sigemptyset(&mut new.sa_mask);
        libc::sigaction(sig, &new, std::ptr::null_mut()) == 0
    }
}

/// A POSIX timer that sends `wake_signal()` to the calling thread at a deadline
/// and every millisecond after it, with the signal unblocked in this thread.
/// The repeats close the race where the first signal lands just before the
/// thread enters flock(2).
struct WakeTimer {
    timer: libc::timer_t,
    old_mask: libc::sigset_t,
}

impl WakeTimer {
    fn arm(after: Duration) -> io::Result<WakeTimer> {
        let sig = wake_signal();
        // SAFETY: every pointer handed to libc points at a live local or
        // field; the sigevent is fully initialised (zeroed, then filled in).
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            let mut old_mask: libc::sigset_t = std::mem::zeroed();
            let rc = libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, &mut old_mask);
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
            let mut sev: libc::sigevent = std::mem::zeroed();
            sev.sigev_notify = libc::SIGEV_THREAD_ID;
            sev.sigev_signo = sig;
            sev.sigev_notify_thread_id = rustix::thread::gettid().as_raw_nonzero().get();
            let mut timer: libc::timer_t = std::ptr::null_mut();
            if libc::timer_create(libc::CLOCK_MONOTONIC, &mut sev, &mut timer) != 0 {
                let err = io::Error::last_os_error();
                libc::pthread_sigmask(libc::SIG_SETMASK, &old_mask, std::ptr::null_mut());
                return Err(err);
            }
            let wake = WakeTimer { timer, old_mask };
            let after = after.max(Duration::from_nanos(1));
            let spec = libc::itimerspec {
                it_value: libc::timespec {
                    tv_sec: after.as_secs().try_into().unwrap_or(libc::time_t::MAX),
                    tv_nsec: after.subsec_nanos().into(),
                },
                it_interval: libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 1_000_000,
                },
            };
            if libc::timer_settime(wake.timer, 0, &spec, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(wake)
        }
    }
}

impl Drop for WakeTimer {
    fn drop(&mut self) {
        // SAFETY: `timer` came from timer_create and is deleted exactly once;
        // `old_mask` is the mask pthread_sigmask returned in `arm`.
        unsafe {
            // Delete first, while the signal is still unblocked: a signal that
            // was already pending is delivered (to the no-op handler) as this
            // syscall returns, instead of interrupting the caller's next one.
            libc::timer_delete(self.timer);
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.old_mask, std::ptr::null_mut());
        }
    }
}

/// Blocks in flock(2) until the lock is taken (`Ok(true)`) or the deadline
/// passes (`Ok(false)`). The wait is the kernel's own: it wakes the moment
/// the holder releases, and uses no CPU meanwhile.
pub(crate) fn lock_until(file: &File, deadline: Instant) -> io::Result<bool> {
    let now = Instant::now();
    if now >= deadline || !wake_signal_ready() {
        return super::poll_until(file, deadline);
    }
    let _timer = WakeTimer::arm(deadline - now)?;
    loop {
        match rustix::fs::flock(file, FlockOperation::LockExclusive) {
            Ok(()) => return Ok(true),
            Err(rustix::io::Errno::INTR) if Instant::now() >= deadline => return Ok(false),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_locks_lines() {
        assert_eq!(
            parse_lock_line("2: FLOCK  ADVISORY  WRITE 1831 fe:00:10010694 0 EOF"),
            Some(LockLine {
                flock: true,
                pid: 1831,
                dev: rustix::fs::makedev(0xfe, 0),
                ino: 10010694
            })
        );
        assert_eq!(
            parse_lock_line("1: FLOCK  ADVISORY  READ -1 00:2d:77 0 EOF").map(|l| l.pid),
            Some(-1)
        );
        assert_eq!(
            parse_lock_line("2: -> FLOCK  ADVISORY  WRITE 1861 fe:00:10010694 0 EOF"),
            None
        );
        assert_eq!(
            parse_lock_line("1: POSIX  ADVISORY  WRITE 1836 fe:00:382078 0 EOF").map(|l| l.flock),
            Some(false)
        );
        assert_eq!(
            parse_lock_line("3: OFDLCK ADVISORY  READ  -1 00:05:1234 0 EOF").map(|l| l.flock),
            Some(false)
        );
        assert_eq!(parse_lock_line("garbage"), None);
        assert_eq!(parse_lock_line(""), None);
    }

    #[test]
    fn reads_our_own_identity() {
        let pid = std::process::id();
        let stat = process_stat(pid).unwrap();
        assert!(!stat.exited);
        assert_eq!(Some(stat.start_time), own_start_time());
        assert_eq!(innermost_pid(pid), Some(pid));
        assert_eq!(pid_namespace(Some(pid)), pid_namespace(None));
        assert!(boot_id().is_some());
    }

    #[test]
    fn a_bounded_wait_on_a_held_lock_times_out_and_leaves_no_signal_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lock");
        let holder = File::create(&path).unwrap();
        holder.lock().unwrap();
        let waiter = File::open(&path).unwrap();
        let start = Instant::now();
        let got = lock_until(&waiter, start + Duration::from_millis(30)).unwrap();
        assert!(!got);
        assert!(start.elapsed() >= Duration::from_millis(30));
        // A syscall after the wait is not interrupted by a late timer signal.
        std::thread::sleep(Duration::from_millis(5));
        drop(holder);
        assert!(lock_until(&waiter, Instant::now() + Duration::from_secs(5)).unwrap());
    }
}
