//! Supervising COMMAND and everything it starts, for the file lock and the
//! lease alike: waiting for it, forwarding signals, reaping the orphans we
//! inherit as a subreaper, and the one stop sequence for every reason to stop
//! (a silent watchdog, a maximum runtime, a lease about to lapse).
//!
//! The stop sequence:
//! 1. SIGTERM, then SIGCONT (a stopped process cannot act on SIGTERM), to the
//!    whole tree: every living descendant, including those that left
//!    COMMAND's process group or called setsid, since all are our children or
//!    grandchildren as long as we (or, under a lease, our keeper) are a
//!    subreaper.
//! 2. SIGKILL to the tree at the kill deadline (`--kill-after` later, or a
//!    hard deadline such as the lease's, whichever comes first), and again
//!    every few milliseconds for anything forked meanwhile.
//! 3. Wait until they are gone, for a bounded time: a process in
//!    uninterruptible sleep (a stuck NFS read) can outlive SIGKILL for long.
//!    The caller names the survivors and leaves them the lock.

use std::io;
use std::time::{Duration, Instant};

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use rustix::process::{Pid, Signal, WaitOptions, WaitStatus};

use crate::run::keeper::Keeper;
use crate::run::signals::{BlockedSignals, Received, ToForward};
pub(crate) use crate::run::tree::{descendants, has_children};

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

    /// Step 1: SIGTERM and SIGCONT to the tree, once. SIGKILL follows
    /// `--kill-after` later, or at `hard_deadline` if that comes first.
    ///
    /// Once the sequence has begun, only brings SIGKILL forward to
    /// `hard_deadline`: a lease about to lapse while a limit stops the run
    /// must still see the tree dead by its deadline, however long the limit's
    /// `--kill-after` would have waited.
    fn terminate(&mut self, hard_deadline: Option<Instant>) {
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
    fn kill(&mut self) {
        let now = Instant::now();
        self.kill_at.get_or_insert(now);
        self.killed_at.get_or_insert(now);
        signal_tree(Signal::KILL);
    }

    /// Moves the sequence on; returns when to step again, or `None` when
    /// it has not begun.
    fn step(&mut self, now: Instant) -> Option<Instant> {
        let kill_at = self.kill_at?;
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

/// COMMAND, as the supervision loop waits for it.
pub(crate) enum Child {
    /// Our own child (under a file lock): its status is ours to reap.
    Own(Pid),
    /// The child of our keeper (under a lease), which reports its status.
    Kept(Keeper),
}

impl Child {
    /// COMMAND's status once it has exited; called on SIGCHLD.
    fn status(&mut self) -> io::Result<Option<ExitStatus>> {
        match self {
            Child::Own(pid) => {
                Ok(reap_children(*pid)?.map(|status| ExitStatus::from_raw(status.as_raw())))
            }
            Child::Kept(keeper) => keeper.status(),
        }
    }

    fn forward(&self, sig: &ToForward) {
        match self {
            Child::Own(pid) => sig.forward_to(&[*pid]),
            Child::Kept(keeper) => keeper.forward(sig),
        }
    }
}

/// What a run's watchers (its limits, its hold) ask for when woken: a stop,
/// and when to wake them next. They only ask; the supervision loop alone
/// drives the [`StopSequence`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Wake {
    pub(crate) stop: Option<Stop>,
    pub(crate) next: Instant,
}

impl Wake {
    /// Nothing to do until `next`.
    pub(crate) fn at(next: Instant) -> Wake {
        Wake { stop: None, next }
    }

    /// Nothing to do, ever (until a signal wakes the loop).
    pub(crate) fn never() -> Wake {
        Wake::at(after(Duration::MAX))
    }
}

/// A stop that a watcher asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Begin the sequence (SIGTERM, then SIGKILL `--kill-after` later), or
    /// once begun, bring SIGKILL forward to `kill_by`.
    Terminate { kill_by: Option<Instant> },
    /// SIGKILL the tree now.
    Kill,
}

impl StopSequence {
    fn apply(&mut self, stop: Stop) {
        match stop {
            Stop::Terminate { kill_by } => self.terminate(kill_by),
            Stop::Kill => self.kill(),
        }
    }

    /// Asks `watch` what it wants at one moment, `now`, which the
    /// sequence's own step judges by too (so that a watcher that saw no
    /// SIGKILL due sees none sent); applies it, and returns when to wake
    /// next: the watchers' moment or the sequence's next step, whichever
    /// comes first.
    fn on(&mut self, mut watch: impl FnMut(&StopSequence, Instant) -> Wake) -> Instant {
        let now = Instant::now();
        let wake = watch(self, now);
        if let Some(stop) = wake.stop {
            self.apply(stop);
        }
        self.step(now).map_or(wake.next, |step| step.min(wake.next))
    }
}

/// Waits for `child` to exit, forwarding SIGINT, SIGTERM and SIGHUP to it and
/// reaping any orphans that were reparented to us (we are a subreaper).
/// `watch` runs when its moment passes (or a blocked signal that is neither
/// forwarded nor SIGCHLD arrives): the heartbeat, the limits, the lease's
/// stop policy, each of which may ask for a stop.
pub(crate) fn supervise(
    signals: &BlockedSignals,
    child: &mut Child,
    stop: &mut StopSequence,
    mut watch: impl FnMut(&StopSequence, Instant) -> Wake,
) -> io::Result<ExitStatus> {
    let mut next_wake = Instant::now();
    loop {
        match signals.wait_until(next_wake) {
            Some(Received::ChildExited) => {
                if let Some(status) = child.status()? {
                    return Ok(status);
                }
            }
            Some(Received::Forwarded(sig)) => {
                stop.forwarded = true;
                child.forward(&sig);
            }
            // The moment passed, or the hold's wake-up signal came.
            _ => next_wake = stop.on(&mut watch),
        }
    }
}

/// After COMMAND exited: waits until every process it left behind (all
/// reparented to us, the subreaper, or to our keeper) has exited too,
/// forwarding signals to them and running `watch` as [`supervise`] does.
/// Returns false when some survived the stop sequence's SIGKILL for longer
/// than it waits.
pub(crate) fn supervise_leftovers(
    signals: &BlockedSignals,
    stop: &mut StopSequence,
    mut watch: impl FnMut(&StopSequence, Instant) -> Wake,
) -> bool {
    let mut next_wake = Instant::now();
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
            _ => next_wake = stop.on(&mut watch),
        }
    }
    true
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
pub(crate) fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(crate::exit::OS_ERROR)
}
