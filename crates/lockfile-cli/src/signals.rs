//! Supervising COMMAND: signals are blocked and taken synchronously with
//! sigtimedwait(2), so none is lost between spawning the child and waiting,
//! and no async handler runs.

use std::io;
use std::time::Instant;

use rustix::process::{Pid, Signal, WaitOptions, WaitStatus};

/// The signals forwarded to COMMAND.
pub(crate) const FORWARDED: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Blocks `FORWARDED` and SIGCHLD in this (single-threaded) process for the
/// rest of its life: the mask is never restored, so that a signal arriving
/// while the lock is released after COMMAND ended cannot kill us halfway (it
/// stays pending until we exit). A spawned child inherits the mask unless
/// the command is prepared with [`BlockedSignals::unblock_in_child`].
///
/// A forwarded signal that was ignored when we started (`nohup`, or a
/// background job of a non-interactive shell, which ignores SIGINT) is left
/// ignored and is not forwarded: COMMAND inherits that disposition, as it
/// would without us, and a shell refuses to trap a signal ignored on entry,
/// so forwarding it would only look like it did something.
///
/// SIGCHLD ignored at start (a parent that set SIG_IGN passes it through
/// exec) is set back to its default for us, or the kernel would reap COMMAND
/// itself and we would wait for it forever; COMMAND gets it back ignored.
pub(crate) struct BlockedSignals {
    set: libc::sigset_t,
    old: libc::sigset_t,
    sigchld_ignored: bool,
}

impl BlockedSignals {
    pub(crate) fn block() -> io::Result<BlockedSignals> {
        let sigchld_ignored = ignored(libc::SIGCHLD);
        // SAFETY: signal(2) takes plain integers; the sets are plain data
        // initialised by sigemptyset before use; pthread_sigmask reads `set`
        // and writes `old`, both live.
        unsafe {
            if sigchld_ignored && libc::signal(libc::SIGCHLD, libc::SIG_DFL) == libc::SIG_ERR {
                return Err(io::Error::last_os_error());
            }
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for sig in FORWARDED.into_iter().filter(|&sig| !ignored(sig)) {
                libc::sigaddset(&mut set, sig);
            }
            libc::sigaddset(&mut set, libc::SIGCHLD);
            let mut old: libc::sigset_t = std::mem::zeroed();
            let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
            Ok(BlockedSignals {
                set,
                old,
                sigchld_ignored,
            })
        }
    }

    /// Makes `cmd`'s child start with the signal mask (and SIGCHLD
    /// disposition) we had before blocking, or COMMAND would ignore SIGTERM
    /// and friends.
    pub(crate) fn unblock_in_child(&self, cmd: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        let (old, sigchld_ignored) = (self.old, self.sigchld_ignored);
        // SAFETY: the closure runs in the forked child before exec and only
        // calls signal and pthread_sigmask, which are async-signal-safe;
        // `old` is a copy.
        unsafe {
            cmd.pre_exec(move || {
                if sigchld_ignored && libc::signal(libc::SIGCHLD, libc::SIG_IGN) == libc::SIG_ERR {
                    return Err(io::Error::last_os_error());
                }
                match libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) {
                    0 => Ok(()),
                    rc => Err(io::Error::from_raw_os_error(rc)),
                }
            });
        }
    }

    /// Also blocks `extra` (a wake-up signal of the caller's).
    #[cfg(feature = "etcd")]
    pub(crate) fn also_block(&mut self, extra: i32) -> io::Result<()> {
        // SAFETY: `self.set` is initialised; pthread_sigmask reads it only.
        unsafe {
            libc::sigaddset(&mut self.set, extra);
            match libc::pthread_sigmask(libc::SIG_BLOCK, &self.set, std::ptr::null_mut()) {
                0 => Ok(()),
                rc => Err(io::Error::from_raw_os_error(rc)),
            }
        }
    }

    /// Waits until a blocked signal arrives or `deadline` passes. Returns the
    /// signal and whether it was sent by the kernel (a terminal's Ctrl-C or
    /// hangup, which already reached the whole foreground process group).
    fn wait_until(&self, deadline: Instant) -> Option<(i32, bool)> {
        let timeout = deadline.saturating_duration_since(Instant::now());
        let ts = libc::timespec {
            tv_sec: timeout.as_secs().try_into().unwrap_or(libc::time_t::MAX),
            tv_nsec: timeout.subsec_nanos().into(),
        };
        // SAFETY: `info` is written by the kernel before we read it, and only
        // when the call succeeds; `self.set` is a valid initialised set.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let sig = libc::sigtimedwait(&self.set, &mut info, &ts);
            (sig > 0).then_some((sig, info.si_code == libc::SI_KERNEL))
        }
    }
}

/// Whether `sig`'s disposition is SIG_IGN.
fn ignored(sig: i32) -> bool {
    // SAFETY: a null new action only reads the disposition into `current`,
    // which is plain data.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut current) == 0
            && current.sa_sigaction == libc::SIG_IGN
    }
}

/// Waits for `child` to exit, forwarding SIGINT, SIGTERM and SIGHUP to it and
/// reaping any orphans that were reparented to us (we are a subreaper).
/// `on_wake` runs when its deadline passes (or a blocked signal that is
/// neither forwarded nor SIGCHLD arrives) and returns the next deadline: the
/// heartbeat, or the lease's stop policy.
pub(crate) fn supervise(
    signals: &BlockedSignals,
    child: Pid,
    mut next_wake: Instant,
    mut on_wake: impl FnMut() -> Instant,
) -> io::Result<WaitStatus> {
    loop {
        match signals.wait_until(next_wake) {
            Some((libc::SIGCHLD, _)) => {
                if let Some(status) = reap_children(child)? {
                    return Ok(status);
                }
            }
            Some((sig, from_kernel)) if FORWARDED.contains(&sig) => {
                forward(sig, from_kernel, &[child]);
            }
            // The deadline passed, or the caller's wake-up signal came.
            _ => next_wake = on_wake(),
        }
    }
}

/// After COMMAND exited: waits until every process it left behind (all
/// reparented to us, the subreaper) has exited too, forwarding signals to
/// them and running `on_wake` as `supervise` does.
#[cfg(feature = "etcd")]
pub(crate) fn supervise_leftovers(
    signals: &BlockedSignals,
    mut next_wake: Instant,
    mut on_wake: impl FnMut() -> Instant,
) {
    while has_children() {
        match signals.wait_until(next_wake) {
            Some((libc::SIGCHLD, _)) => {}
            Some((sig, from_kernel)) if FORWARDED.contains(&sig) => {
                forward(sig, from_kernel, &descendants());
            }
            _ => next_wake = on_wake(),
        }
    }
}

/// Forwards a signal we received, unless the terminal already delivered it to
/// its targets, which share our process group: a Ctrl-C goes to the whole
/// foreground group, and so does the SIGHUP that follows a session leader's
/// exit. A hangup that reaches us as the session leader reached only us.
fn forward(sig: i32, from_kernel: bool, targets: &[Pid]) {
    let session_leader = is_session_leader();
    let from_terminal =
        from_kernel && (sig == libc::SIGINT || (sig == libc::SIGHUP && !session_leader));
    if from_terminal {
        return;
    }
    if let Some(sig) = Signal::from_named_raw(sig) {
        for &pid in targets {
            // The target may have exited a moment ago; ESRCH is fine.
            let _ = rustix::process::kill_process(pid, sig);
        }
    }
}

/// Whether this process leads its session. Not through rustix: getsid(2)
/// returns 0 in session 0 (that of a process started by init without
/// setsid) and in a PID namespace whose session leader lives outside it (a
/// container), and rustix's `Pid` cannot hold 0 (it asserts in debug builds).
fn is_session_leader() -> bool {
    // SAFETY: getsid(0) and getpid() take and return plain integers.
    unsafe { libc::getsid(0) == libc::getpid() }
}

/// Every living descendant of this process, read from
/// `/proc/PID/task/TID/children` down the tree.
#[cfg(feature = "etcd")]
pub(crate) fn descendants() -> Vec<Pid> {
    let mut found: Vec<Pid> = Vec::new();
    let mut queue = vec![rustix::process::getpid()];
    while let Some(parent) = queue.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", parent.as_raw_nonzero())) else {
            continue;
        };
        for task in tasks.flatten() {
            let Ok(children) = std::fs::read_to_string(task.path().join("children")) else {
                continue;
            };
            for pid in children
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .filter_map(Pid::from_raw)
            {
                if !found.contains(&pid) {
                    found.push(pid);
                    queue.push(pid);
                }
            }
        }
    }
    found
}

/// Sends `sig` to every current descendant. Reaping is left to the
/// supervision loop, which is waiting for COMMAND's own status; a process
/// forked meanwhile is found by the next call.
#[cfg(feature = "etcd")]
pub(crate) fn signal_tree(sig: Signal) {
    for pid in descendants() {
        let _ = rustix::process::kill_process(pid, sig);
    }
}

/// Reaps every exited child; returns `child`'s status once it is among them.
fn reap_children(child: Pid) -> io::Result<Option<WaitStatus>> {
    let mut found = None;
    loop {
        match rustix::process::wait(WaitOptions::NOHANG) {
            Ok(Some((pid, status))) if pid == child => found = Some(status),
            Ok(Some(_orphan)) => {}
            Ok(None) | Err(rustix::io::Errno::CHILD) => return Ok(found),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Whether any child (an orphaned descendant of COMMAND) is still alive,
/// reaping those that already exited.
pub(crate) fn has_children() -> bool {
    loop {
        match rustix::process::wait(WaitOptions::NOHANG) {
            Ok(Some(_)) | Err(rustix::io::Errno::INTR) => {}
            Ok(None) => return true,
            Err(_) => return false,
        }
    }
}

/// Makes every orphan among COMMAND's descendants our child rather than
/// init's, so that `has_children` and `descendants` see it.
pub(crate) fn become_subreaper() -> io::Result<()> {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).map_err(io::Error::from)
}

/// Makes the kernel SIGKILL `cmd`'s child when this process dies, for any
/// reason: nobody renews a lease any more, so the work must stop.
pub(crate) fn die_with_parent(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let parent = rustix::process::getpid();
    // SAFETY: the closure runs in the forked child before exec and makes only
    // raw syscalls (prctl, getppid), which are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
            // The parent may have died before prctl took effect.
            if rustix::process::getppid() != Some(parent) {
                return Err(io::Error::other("the parent died while spawning"));
            }
            Ok(())
        });
    }
}

/// `d` from now, or a year from now when `d` is too large to add.
pub(crate) fn after(d: std::time::Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(d)
        .unwrap_or_else(|| now + std::time::Duration::from_secs(365 * 86_400))
}

/// The shell's convention: the exit code, or 128 + the signal number.
pub(crate) fn exit_code(status: WaitStatus) -> i32 {
    status
        .exit_status()
        .or_else(|| status.terminating_signal().map(|s| 128 + s))
        .unwrap_or(crate::exit::OS_ERROR)
}
