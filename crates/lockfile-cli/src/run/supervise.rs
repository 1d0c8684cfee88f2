//! Supervising COMMAND and everything it starts, for the file lock and the
//! lease alike: waiting for it, forwarding signals, reaping the orphans we
//! inherit as a subreaper, and the one stop sequence for every reason to stop
//! (a silent watchdog, a maximum runtime, a lease about to lapse).
//!
//! The stop sequence:
//! 1. SIGTERM, then SIGCONT (a stopped process cannot act on SIGTERM), to the
//!    whole tree: every living descendant, including those that left
//!    COMMAND's process group or called setsid, since all are our children or
//!    grandchildren as long as we are a subreaper.
//! 2. SIGKILL to the tree at the kill deadline (`--kill-after` later, or a
//!    hard deadline such as the lease's, whichever comes first), and again
//!    every few milliseconds for anything forked meanwhile.
//! 3. Wait until they are gone, for a bounded time: a process in
//!    uninterruptible sleep (a stuck NFS read) can outlive SIGKILL for long.
//!    The caller names the survivors and leaves them the lock.

use std::io;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitOptions, WaitStatus};

use crate::run::signals::{BlockedSignals, Received};

/// How long survivors of SIGKILL are waited for before they are named and
/// left the lock.
const SURVIVOR_WAIT: Duration = Duration::from_secs(5);

/// How often SIGKILL is repeated while the tree is dying, for processes
/// forked between two rounds.
const KILL_AGAIN: Duration = Duration::from_millis(10);

/// Where a run is in the stop sequence.
#[derive(Debug)]
pub(crate) struct StopSequence {
    kill_after: Duration,
    /// Set once SIGTERM went out: when SIGKILL follows.
    kill_at: Option<Instant>,
    /// Set once SIGKILL went out.
    killed_at: Option<Instant>,
    /// Set once a signal from outside was forwarded: the run is being
    /// stopped by someone else, and no limit should claim it.
    forwarded: bool,
}

impl StopSequence {
    pub(crate) fn new(kill_after: Duration) -> StopSequence {
        StopSequence {
            kill_after,
            kill_at: None,
            killed_at: None,
            forwarded: false,
        }
    }

    /// Whether the sequence has begun.
    pub(crate) fn stopping(&self) -> bool {
        self.kill_at.is_some()
    }

    /// Whether a signal from outside (SIGTERM, SIGINT, SIGHUP) was forwarded
    /// to the command.
    pub(crate) fn forwarded(&self) -> bool {
        self.forwarded
    }

    /// Whether SIGKILL went out.
    pub(crate) fn killed(&self) -> bool {
        self.killed_at.is_some()
    }

    /// Step 1: SIGTERM and SIGCONT to the tree, once. SIGKILL follows
    /// `--kill-after` later, or at `hard_deadline` if that comes first.
    ///
    /// Once the sequence has begun, only brings SIGKILL forward to
    /// `hard_deadline`: a lease about to lapse while a limit stops the run
    /// must still see the tree dead by its deadline, however long the limit's
    /// `--kill-after` would have waited.
    pub(crate) fn terminate(&mut self, hard_deadline: Option<Instant>) {
        if let Some(kill_at) = &mut self.kill_at {
            if let Some(hard) = hard_deadline {
                *kill_at = hard.min(*kill_at);
            }
            return;
        }
        let now = Instant::now();
        let soft = now.checked_add(self.kill_after).unwrap_or(now);
        self.kill_at = Some(hard_deadline.map_or(soft, |hard| hard.min(soft)));
        signal_tree(Signal::TERM);
        signal_tree(Signal::CONT);
    }

    /// Step 2 at once: SIGKILL to the tree (and again at every step).
    pub(crate) fn kill(&mut self) {
        let now = Instant::now();
        self.kill_at.get_or_insert(now);
        self.killed_at.get_or_insert(now);
        signal_tree(Signal::KILL);
    }

    /// Moves the sequence on; returns when to step again, or `None` when
    /// it has not begun.
    pub(crate) fn step(&mut self) -> Option<Instant> {
        let kill_at = self.kill_at?;
        let now = Instant::now();
        if now < kill_at {
            return Some(kill_at);
        }
        self.kill();
        Some(now + KILL_AGAIN)
    }

    /// Whether the survivors of SIGKILL have been waited for long enough.
    fn gave_up(&self) -> bool {
        self.killed_at
            .is_some_and(|killed| killed.elapsed() >= SURVIVOR_WAIT)
    }
}

/// Waits for `child` to exit, forwarding SIGINT, SIGTERM and SIGHUP to it and
/// reaping any orphans that were reparented to us (we are a subreaper).
/// `on_wake` runs when its deadline passes (or a blocked signal that is
/// neither forwarded nor SIGCHLD arrives) and returns the next deadline: the
/// heartbeat, the limits, the lease's stop policy, each of which may start
/// the stop sequence.
pub(crate) fn supervise(
    signals: &BlockedSignals,
    child: Pid,
    stop: &mut StopSequence,
    mut next_wake: Instant,
    mut on_wake: impl FnMut(&mut StopSequence) -> Instant,
) -> io::Result<WaitStatus> {
    loop {
        match signals.wait_until(next_wake) {
            Some(Received::ChildExited) => {
                if let Some(status) = reap_children(child)? {
                    return Ok(status);
                }
            }
            Some(Received::Forwarded(sig)) => {
                stop.forwarded = true;
                sig.forward_to(&[child]);
            }
            // The deadline passed, or the caller's wake-up signal came.
            _ => next_wake = on_wake(stop),
        }
    }
}

/// After COMMAND exited: waits until every process it left behind (all
/// reparented to us, the subreaper) has exited too, forwarding signals to
/// them and running `on_wake` as [`supervise`] does. Returns false when some
/// survived the stop sequence's SIGKILL for longer than it waits.
pub(crate) fn supervise_leftovers(
    signals: &BlockedSignals,
    stop: &mut StopSequence,
    mut next_wake: Instant,
    mut on_wake: impl FnMut(&mut StopSequence) -> Instant,
) -> bool {
    while has_children() {
        if stop.gave_up() {
            return false;
        }
        match signals.wait_until(next_wake) {
            Some(Received::ChildExited) => {}
            Some(Received::Forwarded(sig)) => {
                stop.forwarded = true;
                sig.forward_to(&descendants());
            }
            _ => next_wake = on_wake(stop),
        }
    }
    true
}

/// Every living descendant of this process, read from
/// `/proc/PID/task/TID/children` down the tree.
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
fn signal_tree(sig: Signal) {
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

/// `d` from now, or a year from now when `d` is too large to add.
pub(crate) fn after(d: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(d)
        .unwrap_or_else(|| now + Duration::from_secs(365 * 86_400))
}

/// The shell's convention: the exit code, or 128 + the signal number.
pub(crate) fn exit_code(status: WaitStatus) -> i32 {
    status
        .exit_status()
        .or_else(|| status.terminating_signal().map(|s| 128 + s))
        .unwrap_or(crate::exit::OS_ERROR)
}
