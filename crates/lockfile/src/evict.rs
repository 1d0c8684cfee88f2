//! Evicting a hung holder, safely: the judgement whether a holder that broke
//! its own heartbeat promise may be stopped, and the procedure that stops it
//! and takes the lock ([`LockOptions::evict_after`]).
//!
//! A dead holder needs none of this: the kernel frees its lock. A live,
//! hung one keeps the lock forever, and this is for holders whose own
//! supervision cannot act: a library holder that promised an interval and
//! stopped beating, or a `lockfile run` whose wrapper is itself stuck or
//! stopped.
//!
//! # The procedure
//!
//! 1. **Judge the record.** From `inspect`: the lock is held, the file holds
//!    an unreleased record of ours, the record promises a heartbeat that is
//!    not a wrapper's, it was written on this host in this boot, and it
//!    carries the start time and PID namespace that, with the PID, name one
//!    process. Then the silence: longer than `evict_after`, and longer than
//!    the promise (for a `--watchdog` holder, the promise plus its
//!    kill-after, so that its own watchdog acts first). Until then a waiting
//!    acquire waits, and judges again when the promise would be broken.
//! 2. **Verify the owner.** Resolve its PID in our namespace, open a pidfd
//!    for it, check through `/proc` that the process has the recorded start
//!    time, then check that the pidfd's process still lives: so `/proc`
//!    described the pidfd's process, not one that reused the PID.
//! 3. **Find everyone to stop**, each verified the same way: the owner's
//!    descendants (by their parent links, read while the parent's pidfd is
//!    known to be alive), and every process that holds the kernel lock
//!    (from the kernel's lock table and every process's descriptors, read
//!    again through the pidfd's window). A holder must be the owner, a
//!    descendant, or share the owner's own lock (the owner holds it: an
//!    exclusive flock is one lock, shared only by inheritance, or by
//!    passing the descriptor on); such a holder's descendants are stopped
//!    too. Every one must be of our uid, or we root, and this process must
//!    not be among them. Otherwise nothing is sent.
//! 4. **Last look.** The heartbeat must not have moved since the judgement.
//! 5. **Stop**, through the pidfds only: SIGTERM and SIGCONT to all, and to
//!    descendants forked meanwhile; SIGKILL to the survivors after
//!    kill-after (and to what they forked); wait for them to exit, then for
//!    the kernel lock.
//! 6. **Record.** The new holder's record keeps `evicted` (token, pid, job,
//!    silence), and the last run is the evicted run's, outcome `evicted`,
//!    its failures in a row counted on from the history it carried.
//!
//! Anything that fails the judgement leaves the acquire as it would be
//! without eviction, with the reason ([`EvictionRefused`]) in its error.

pub(crate) mod refused;

use std::collections::{HashMap, HashSet};
use std::fs::{File, TryLockError};
use std::io;
use std::os::fd::AsFd;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use crate::error::Operation;
use crate::history::{LastRun, Outcome, RunEnd};
use crate::record::{self, Evicted, LockDocument};
use crate::sys::{self, Pidfd, ProcessIdentity};
use crate::{Error, HeartbeatSource, InspectOptions, LockOptions, LockState, OwnerRecord, Result};
pub use refused::EvictionRefused;

/// The grace between SIGTERM and SIGKILL when nobody said: the command's
/// `--kill-after` default, both for a `--watchdog` holder that recorded none
/// and for this evictor.
const DEFAULT_KILL_AFTER: Duration = Duration::from_secs(10);

/// How long past kill-after `try_acquire` waits for the lock of a holder it
/// stopped.
const TRY_GRACE: Duration = Duration::from_secs(1);

/// A holder that cannot be evicted for a reason other than the clock is
/// judged again every `evict_after` while waiting, within these bounds: it
/// may have been replaced by one that can.
const REJUDGE_AT_LEAST: Duration = Duration::from_secs(1);
const REJUDGE_AT_MOST: Duration = Duration::from_secs(60);

/// How many times the descendants are walked again after SIGKILL, for what
/// they forked between two walks. A killed process forks no more, so the
/// walks end long before.
const KILL_ROUNDS: usize = 100;

/// A promise is broken once the silence is longer than it: judge again this
/// much after the moment it would be.
const PAST_THE_PROMISE: Duration = Duration::from_millis(10);

/// How often a holder that moved or vanished while being judged is judged
/// again at once before `try_acquire` gives up.
const SETTLE_ATTEMPTS: u32 = 3;

/// How long an acquire may wait, as eviction sees it.
pub(crate) enum Patience {
    /// `try_acquire`: judge once; an eviction then waits at most kill-after + 1 s.
    Once,
    /// Wait, and judge again, until the deadline.
    Until(Instant),
    /// Wait, and judge again, as long as it takes.
    Forever,
}

/// A run that was stopped so that this acquire could take its lock: what the
/// new record keeps of it.
#[derive(Debug)]
pub(crate) struct Eviction {
    evicted: Evicted,
    /// When the evicted run took the lock.
    started_at: SystemTime,
    /// The last run its record carried, before it.
    previous_run: Option<LastRun>,
    /// The last signal it was sent: SIGTERM, or SIGKILL when it outlived the grace.
    signal: i32,
}

impl Eviction {
    /// Writes the eviction into the new holder's document: `evicted` in the
    /// record, and the evicted run as the last run.
    pub(crate) fn record_into(self, doc: &mut LockDocument) {
        let end = RunEnd {
            outcome: Outcome::Evicted,
            exit_code: None,
            signal: Some(self.signal),
            started_at: self.started_at,
        };
        let last = LastRun::after(self.previous_run.as_ref(), end, record::now());
        doc.last_run = Some(Box::new(last));
        doc.owner.evicted = Some(Box::new(self.evicted));
    }
}

/// Takes the lock on `file`, which someone holds, as `patience` allows,
/// evicting the holder when it may be. `Ok(None)`: the lock came free by
/// itself; `Ok(Some)`: it was taken from an evicted holder.
///
/// # Errors
///
/// [`Error::Contended`] or [`Error::Timeout`] carrying why the holder was
/// not evicted; [`Error::Io`] when the lock cannot be waited for.
pub(crate) fn take(
    opts: &LockOptions,
    path: &Path,
    file: &File,
    patience: Patience,
    started: Instant,
) -> Result<Option<Eviction>> {
    let evict_after = opts.evict_after.unwrap_or_default();
    let kill_after = opts.kill_after.unwrap_or(DEFAULT_KILL_AFTER);
    let rejudge = evict_after.clamp(REJUDGE_AT_LEAST, REJUDGE_AT_MOST);
    let lock_err = |e: io::Error| Error::from_io(Operation::Lock, path, e);
    let mut unsettled = 0;
    loop {
        let judged_at = Instant::now();
        // The reason not to evict (yet), and when to judge again.
        let (reason, again) = match judge(evict_after, path, file) {
            Judgement::Evict(plan) => {
                let bound = match patience {
                    Patience::Once => judged_at.checked_add(kill_after.saturating_add(TRY_GRACE)),
                    Patience::Until(deadline) => Some(deadline),
                    Patience::Forever => None,
                };
                match plan.stop_and_take(path, file, kill_after, bound) {
                    Ok(eviction) => return Ok(Some(eviction)),
                    Err(Stop::Lock(e)) => return Err(lock_err(e)),
                    // Someone else may hold it now: judge them, at once.
                    Err(Stop::NotTaken(reason)) => (reason, judged_at),
                }
            }
            Judgement::Refused(reason, None) => (reason, judged_at + rejudge),
            Judgement::Refused(reason, Some(again)) => (reason, again),
            Judgement::Moving(reason) => {
                // Released, or beaten, while we judged.
                match file.try_lock() {
                    Ok(()) => return Ok(None),
                    Err(TryLockError::Error(e)) => return Err(lock_err(e)),
                    Err(TryLockError::WouldBlock) => {}
                }
                unsettled += 1;
                if unsettled < SETTLE_ATTEMPTS {
                    continue;
                }
                (reason, judged_at + rejudge)
            }
        };
        unsettled = 0;
        let until = match patience {
            Patience::Once => {
                return match file.try_lock() {
                    Ok(()) => Ok(None),
                    Err(TryLockError::WouldBlock) => {
                        Err(refusal(path, file, started, reason, false))
                    }
                    Err(TryLockError::Error(e)) => Err(lock_err(e)),
                };
            }
            Patience::Until(deadline) => again.min(deadline),
            Patience::Forever => again,
        };
        if sys::lock_until(file.as_fd(), sys::LockMode::Exclusive, until).map_err(lock_err)? {
            return Ok(None);
        }
        if let Patience::Until(deadline) = patience
            && Instant::now() >= deadline
        {
            return Err(refusal(path, file, started, reason, true));
        }
    }
}

/// The contention error, carrying why the holder was not evicted.
fn refusal(
    path: &Path,
    file: &File,
    started: Instant,
    reason: EvictionRefused,
    timed_out: bool,
) -> Error {
    let mut small = [0u8; record::SMALL_READ];
    let owner = record::read_content(file, &mut small)
        .ok()
        .and_then(|content| LockDocument::decode(&content).ok())
        .map(|doc| Box::new(doc.owner));
    let not_evicted = Some(Box::new(reason));
    if timed_out {
        Error::Timeout {
            path: path.to_path_buf(),
            waited: started.elapsed(),
            owner,
            not_evicted,
        }
    } else {
        Error::Contended {
            path: path.to_path_buf(),
            owner,
            not_evicted,
        }
    }
}

/// What the judgement of a holder decided.
enum Judgement {
    /// Stop it: everyone to stop is verified.
    Evict(Plan),
    /// Not this holder, or not yet; when it may change (its promise breaks),
    /// if the clock alone can change it.
    Refused(EvictionRefused, Option<Instant>),
    /// The lock came free, or the heartbeat moved, while it was judged:
    /// look again at once.
    Moving(EvictionRefused),
}

/// How long the holder's heartbeat must have been silent before it may be
/// evicted: longer than `evict_after`, and longer than what it promised.
fn threshold(owner: &OwnerRecord, evict_after: Duration) -> Result<Duration, EvictionRefused> {
    let promise = match owner.heartbeat_source {
        Some(HeartbeatSource::Wrapper) => return Err(EvictionRefused::WrapperHeartbeat),
        // Its own watchdog gets the first chance: its promise, then the
        // grace it gives its job between SIGTERM and SIGKILL.
        Some(HeartbeatSource::Command) => owner
            .heartbeat_interval()
            .map(|i| i.saturating_add(owner.kill_after().unwrap_or(DEFAULT_KILL_AFTER))),
        None => owner.heartbeat_interval(),
    };
    let promise = promise.ok_or(EvictionRefused::NoPromise)?;
    Ok(promise.max(evict_after))
}

/// Whether the record names a process we can identify on this host, in this
/// boot: its start time and PID namespace.
fn identifiable(owner: &OwnerRecord, me: &ProcessIdentity) -> Result<(u64, u64), EvictionRefused> {
    if owner.hostname != me.hostname {
        return Err(EvictionRefused::OtherHost {
            host: owner.hostname.clone(),
        });
    }
    let missing = |missing| EvictionRefused::Unidentifiable { missing };
    let theirs = owner.boot_id.as_ref().ok_or(missing("boot id"))?;
    let ours = me.boot_id.as_ref().ok_or(missing("boot id"))?;
    if theirs != ours {
        return Err(EvictionRefused::OtherBoot {
            recorded: theirs.clone(),
            current: ours.clone(),
        });
    }
    let start_time = owner.start_time.ok_or(missing("start time"))?;
    let pid_namespace = owner.pid_namespace.ok_or(missing("PID namespace"))?;
    Ok((start_time, pid_namespace))
}

/// Judges the holder of the lock on `file` (at `path`).
fn judge(evict_after: Duration, path: &Path, file: &File) -> Judgement {
    use EvictionRefused as Why;
    let refused = |why| Judgement::Refused(why, None);
    if let Some(why) = sys::EVICTION_UNSUPPORTED {
        return refused(Why::Unsupported { why });
    }
    let Ok(ours) = sys::identity_of(file) else {
        return refused(Why::Replaced);
    };
    let names_ours = || sys::identity_at(path).is_ok_and(|at| at.same_file(&ours));
    if !names_ours() {
        return refused(Why::Replaced);
    }
    let report = match InspectOptions::new().inspect(path) {
        Ok(report) => report,
        Err(e) => return refused(Why::Inspect(Box::new(e))),
    };
    // Inspect opened the path again: make sure it looked at our file.
    if !names_ours() {
        return refused(Why::Replaced);
    }
    if report.state != LockState::Held {
        return Judgement::Moving(Why::UnidentifiedHolder { pid: None });
    }
    let owner = match (&report.owner, report.no_record) {
        (Some(owner), None) => owner,
        _ => return refused(Why::NoRecord),
    };
    if report.released {
        return refused(Why::Released);
    }
    let me = sys::process_identity();
    let (threshold, (start_time, pid_namespace)) =
        match threshold(owner, evict_after).and_then(|t| Ok((t, identifiable(owner, &me)?))) {
            Ok(judged) => judged,
            Err(why) => return refused(why),
        };
    let silent = report.heartbeat_age.unwrap_or_default();
    if silent <= threshold {
        let broken_at = Instant::now()
            .checked_add(threshold - silent)
            .and_then(|t| t.checked_add(PAST_THE_PROMISE));
        return Judgement::Refused(Why::NotSilentLongEnough { silent, threshold }, broken_at);
    }
    let targets = match find_targets(owner, start_time, pid_namespace, file, &ours, &me) {
        Ok(targets) => targets,
        Err(why) => return refused(why),
    };
    // The last look, with every pidfd open: a beat since the judgement means
    // it is alive after all.
    let modified = file.metadata().and_then(|m| m.modified()).ok();
    if modified != report.modified {
        return Judgement::Moving(Why::Resumed);
    }
    let plan = Plan {
        targets,
        evicted: Evicted {
            token: owner.token,
            pid: owner.pid,
            job: owner.job.clone(),
            silent_ms: record::millis(silent),
        },
        started_at: owner.acquired_at,
        previous_run: report.last_run,
    };
    Judgement::Evict(plan)
}

/// A process to stop, verified through its pidfd.
#[derive(Debug)]
struct Target {
    pidfd: Pidfd,
    /// Its real and effective uids, read while the pidfd was known to name it.
    uids: Option<(u32, u32)>,
}

/// Everyone to stop, verified, and what the new record will say of them.
#[derive(Debug)]
struct Plan {
    /// The owner first.
    targets: Vec<Target>,
    evicted: Evicted,
    started_at: SystemTime,
    previous_run: Option<LastRun>,
}

/// How stopping a holder ended, when it did not end with the lock.
enum Stop {
    NotTaken(EvictionRefused),
    Lock(io::Error),
}

/// Verifies the owner, its descendants and the lock's holders, each through
/// a pidfd opened before anything about it is read. The owner comes first.
fn find_targets(
    owner: &OwnerRecord,
    start_time: u64,
    pid_namespace: u64,
    file: &File,
    id: &sys::Identity,
    me: &ProcessIdentity,
) -> Result<Vec<Target>, EvictionRefused> {
    use EvictionRefused as Why;
    let table = sys::process_table();
    let pid = resolve_pid(owner.pid, pid_namespace, me, &table)?;

    let pidfd = open_pidfd(pid)?.ok_or(Why::OwnerGone { pid })?;
    let stat = sys::process_stat(pid)
        .filter(|s| !s.exited)
        .ok_or(Why::OwnerGone { pid })?;
    let uids = sys::process_uids(pid);
    let owner_holds = sys::process_hold(pid, id.dev, id.ino).is_some();
    if pidfd.has_exited() {
        return Err(Why::OwnerGone { pid });
    }
    if stat.start_time != start_time {
        return Err(Why::PidReused {
            pid,
            recorded: start_time,
            found: stat.start_time,
        });
    }
    let mut targets = vec![Target { pidfd, uids }];
    adopt_descendants(&mut targets, &table)?;
    // Before the holders: another user's descriptors are not ours to read,
    // so its tree would only look unidentified.
    check_targets(&targets, me)?;
    let tree: HashSet<u32> = targets.iter().map(|t| t.pidfd.pid()).collect();

    // Every process that holds the kernel lock: the table's takers, and
    // whoever holds it through an inherited descriptor.
    let table_err = |source| Why::Failed {
        what: "read the kernel lock table to judge",
        pid,
        source,
    };
    let mut candidates = sys::processes_holding(id.dev, id.ino);
    if let sys::KernelHold::Held { pids: takers, .. } = sys::KernelLocks::snapshot()
        .map_err(table_err)?
        .hold(file, id.dev, id.ino)
    {
        for taker in takers {
            match u32::try_from(taker) {
                Ok(p) if p > 0 => candidates.push(p),
                // Outside our PID namespace: nothing can be verified of it.
                _ => return Err(Why::UnidentifiedHolder { pid: None }),
            }
        }
    }
    candidates.sort_unstable();
    candidates.dedup();
    let mut holders = 0;
    for holder in candidates {
        if tree.contains(&holder) {
            holders += usize::from(sys::process_hold(holder, id.dev, id.ino).is_some());
            continue;
        }
        let Some(pidfd) = open_pidfd(holder)? else {
            continue;
        };
        let holds = sys::process_hold(holder, id.dev, id.ino).is_some();
        let readable = sys::descriptors_readable(holder);
        let uids = sys::process_uids(holder);
        if pidfd.has_exited() {
            continue;
        }
        match (holds, readable) {
            // A taker the table still names that holds nothing now: the
            // lock lives on in inherited descriptors, and the PID may be
            // someone else's by now.
            (false, true) => continue,
            (false, false) => return Err(Why::UnidentifiedHolder { pid: Some(holder) }),
            (true, _) if !owner_holds => return Err(Why::UnrelatedHolder { pid: holder }),
            // It shares the owner's own lock (an exclusive flock is one
            // lock): it got the descriptor from the owner's run.
            (true, _) => {}
        }
        holders += 1;
        targets.push(Target { pidfd, uids });
    }
    if holders == 0 {
        return Err(Why::UnidentifiedHolder { pid: None });
    }
    // A holder outside the owner's tree brings its own descendants: all of
    // it is the hung run's.
    adopt_descendants(&mut targets, &table)?;
    check_targets(&targets, me)?;
    Ok(targets)
}

/// Adds the descendants of `targets`, from `table` (parent links), each
/// verified through its pidfd: its parent is a target whose own pidfd still
/// lives after the child's parent link was read. Returns how many were added.
fn adopt_descendants(
    targets: &mut Vec<Target>,
    table: &[(u32, sys::ProcStat)],
) -> Result<usize, EvictionRefused> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (pid, stat) in table {
        children.entry(stat.parent).or_default().push(*pid);
    }
    let mut known: HashSet<u32> = targets.iter().map(|t| t.pidfd.pid()).collect();
    let before = targets.len();
    let mut next = 0;
    while next < targets.len() {
        let parent = targets[next].pidfd.pid();
        for &child in children.get(&parent).into_iter().flatten() {
            if !known.insert(child) {
                continue;
            }
            let Some(pidfd) = open_pidfd(child)? else {
                continue;
            };
            let is_child =
                sys::process_stat(child).is_some_and(|s| !s.exited && s.parent == parent);
            let uids = sys::process_uids(child);
            if is_child && !pidfd.has_exited() && !targets[next].pidfd.has_exited() {
                targets.push(Target { pidfd, uids });
            }
        }
        next += 1;
    }
    Ok(targets.len() - before)
}

/// Every target must be of our uid (or we root), and we not among them.
fn check_targets(targets: &[Target], me: &ProcessIdentity) -> Result<(), EvictionRefused> {
    for target in targets {
        let pid = target.pidfd.pid();
        if pid == me.pid {
            return Err(EvictionRefused::WouldStopItself);
        }
        if let Some(uid) = not_ours(target) {
            return Err(EvictionRefused::OtherUser { pid, uid });
        }
    }
    Ok(())
}

/// `Some` when the target is not ours to stop (it is of another uid, and we
/// are not root): that uid, when it could be read.
fn not_ours(target: &Target) -> Option<Option<u32>> {
    let euid = rustix::process::geteuid();
    if euid.is_root() {
        return None;
    }
    let ours = euid.as_raw();
    match target.uids {
        Some((real, effective)) if real == ours && effective == ours => None,
        Some((real, effective)) => Some(Some(if real == ours { effective } else { real })),
        None => Some(None),
    }
}

impl Plan {
    /// The stop sequence, through the pidfds only, then the wait for the
    /// lock, within `bound` when one is given.
    fn stop_and_take(
        mut self,
        path: &Path,
        file: &File,
        kill_after: Duration,
        bound: Option<Instant>,
    ) -> Result<Eviction, Stop> {
        tracing::warn!(
            name: "lock_evicted",
            event = "lock_evicted",
            path = %path.display(),
            pid = self.evicted.pid,
            job = self.evicted.job.as_deref().unwrap_or(""),
            token = %self.evicted.token,
            silent_s = self.evicted.silent().as_secs_f64(),
            processes = self.targets.len(),
        );
        let me = sys::process_identity();
        // A stopped process cannot act on SIGTERM: SIGCONT follows at once.
        self.signal_all(libc::SIGTERM);
        self.signal_all(libc::SIGCONT);
        // Processes forked between the walk and the signals.
        self.adopt_more(&me, &[libc::SIGTERM, libc::SIGCONT]);

        // SIGKILL after kill-after, or at the end of the wait if that comes
        // first: the caller's patience is the hard deadline.
        let kill_at = match (Instant::now().checked_add(kill_after), bound) {
            (Some(soft), Some(bound)) => Some(soft.min(bound)),
            (soft, bound) => soft.or(bound),
        };
        let mut signal = libc::SIGTERM;
        if !self.wait_exited(kill_at) {
            if !self.targets[0].pidfd.has_exited() {
                signal = libc::SIGKILL;
            }
            self.signal_all(libc::SIGKILL);
            // What they forked meanwhile, until a walk finds nothing new.
            for _ in 0..KILL_ROUNDS {
                if self.adopt_more(&me, &[libc::SIGKILL]) == 0 {
                    break;
                }
            }
            self.wait_exited(bound);
        }
        let taken = match bound {
            Some(bound) => sys::lock_until(file.as_fd(), sys::LockMode::Exclusive, bound),
            None => match file.try_lock() {
                Ok(()) => Ok(true),
                Err(TryLockError::WouldBlock) => Ok(false),
                Err(TryLockError::Error(e)) => Err(e),
            },
        };
        if !taken.map_err(Stop::Lock)? {
            let survivors = self
                .targets
                .iter()
                .filter(|t| !t.pidfd.has_exited())
                .map(|t| t.pidfd.pid())
                .collect();
            return Err(Stop::NotTaken(EvictionRefused::StillHeld { survivors }));
        }
        Ok(Eviction {
            evicted: self.evicted,
            started_at: self.started_at,
            previous_run: self.previous_run,
            signal,
        })
    }

    fn signal_all(&self, signal: i32) {
        for target in &self.targets {
            send(target, signal);
        }
    }

    /// Adds the descendants forked since the last walk, verified as the
    /// first ones were, and sends them `signals`. A new one that is not ours
    /// to stop is left alone. Returns how many were added.
    fn adopt_more(&mut self, me: &ProcessIdentity, signals: &[i32]) -> usize {
        let before = self.targets.len();
        // A pidfd that cannot be opened now only ends the walk early; the
        // ones found so far are stopped all the same.
        let _ = adopt_descendants(&mut self.targets, &sys::process_table());
        let mut added: Vec<Target> = self.targets.drain(before..).collect();
        added.retain(|t| t.pidfd.pid() != me.pid && not_ours(t).is_none());
        for target in &added {
            for &signal in signals {
                send(target, signal);
            }
        }
        let n = added.len();
        self.targets.extend(added);
        n
    }

    /// Waits until every target has exited, until `until` (or as long as it
    /// takes). Returns whether all have.
    fn wait_exited(&self, until: Option<Instant>) -> bool {
        let pidfds: Vec<&Pidfd> = self.targets.iter().map(|t| &t.pidfd).collect();
        loop {
            // In slices, when unbounded: a wait needs an end.
            let slice_end = until.unwrap_or_else(|| Instant::now() + Duration::from_secs(60));
            if sys::wait_exited(&pidfds, slice_end)
                .iter()
                .all(|&gone| gone)
            {
                return true;
            }
            if until.is_some() {
                return false;
            }
        }
    }
}

/// Sends `signal` through the target's pidfd. A process that exited
/// meanwhile is no failure; anything else is worth a warning, not a stop.
fn send(target: &Target, signal: i32) {
    if let Err(e) = target.pidfd.signal(signal)
        && e.raw_os_error() != Some(libc::ESRCH)
    {
        tracing::warn!(
            name: "evict_signal_failed",
            event = "evict_signal_failed",
            pid = target.pidfd.pid(),
            signal,
            error = %e,
        );
    }
}

/// Opens a pidfd; `None` when no process has the PID.
fn open_pidfd(pid: u32) -> Result<Option<Pidfd>, EvictionRefused> {
    match Pidfd::open(pid) {
        Ok(pidfd) => Ok(Some(pidfd)),
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => Err(EvictionRefused::Unsupported {
            why: "this kernel has no pidfd_open(2) (Linux 5.3 or later), and signalling by PID could hit a process that reused it",
        }),
        Err(source) => Err(EvictionRefused::Failed {
            what: "open a pidfd for",
            pid,
            source,
        }),
    }
}

/// The owner's PID in our namespace. A record from another PID namespace
/// (a container's) is resolved through the processes in that namespace whose
/// innermost PID is the recorded one.
fn resolve_pid(
    pid: u32,
    pid_namespace: u64,
    me: &ProcessIdentity,
    table: &[(u32, sys::ProcStat)],
) -> Result<u32, EvictionRefused> {
    if me.pid_namespace == Some(pid_namespace) {
        return Ok(pid);
    }
    let mut found = table.iter().map(|(p, _)| *p).filter(|&p| {
        sys::pid_namespace(Some(p)) == Some(pid_namespace) && sys::innermost_pid(p) == Some(pid)
    });
    match (found.next(), found.next()) {
        (Some(here), None) => Ok(here),
        _ => Err(EvictionRefused::OtherPidNamespace { pid_namespace }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(interval: Option<u64>, source: Option<HeartbeatSource>) -> OwnerRecord {
        let mut owner = OwnerRecord::current(Some("job"), interval.map(Duration::from_secs));
        owner.heartbeat_source = source;
        owner
    }

    #[test]
    fn a_holder_is_hung_only_once_it_broke_its_own_promise() {
        let secs = Duration::from_secs;
        let lib = record(Some(30), None);
        assert_eq!(threshold(&lib, secs(1)).unwrap(), secs(30));
        assert_eq!(threshold(&lib, secs(60)).unwrap(), secs(60));

        // A watchdog holder: its promise plus its kill-after, 10 s unsaid.
        let mut watchdog = record(Some(2), Some(HeartbeatSource::Command));
        assert_eq!(threshold(&watchdog, secs(1)).unwrap(), secs(12));
        watchdog.kill_after_ms = Some(500);
        assert_eq!(
            threshold(&watchdog, secs(1)).unwrap(),
            Duration::from_millis(2_500)
        );

        assert!(matches!(
            threshold(&record(Some(2), Some(HeartbeatSource::Wrapper)), secs(1)),
            Err(EvictionRefused::WrapperHeartbeat)
        ));
        assert!(matches!(
            threshold(&record(None, None), secs(1)),
            Err(EvictionRefused::NoPromise)
        ));
        assert!(matches!(
            threshold(&record(None, Some(HeartbeatSource::Command)), secs(1)),
            Err(EvictionRefused::NoPromise)
        ));
    }

    #[test]
    fn only_a_record_of_this_host_and_boot_with_a_full_identity_is_identifiable() {
        let me = sys::process_identity();
        let ours = record(Some(1), None);
        assert!(identifiable(&ours, &me).is_ok());

        let mut other_host = ours.clone();
        other_host.hostname = "elsewhere".to_owned();
        assert!(matches!(
            identifiable(&other_host, &me),
            Err(EvictionRefused::OtherHost { host }) if host == "elsewhere"
        ));
        let mut other_boot = ours.clone();
        other_boot.boot_id = Some("00000000-0000-0000-0000-000000000000".to_owned());
        assert!(matches!(
            identifiable(&other_boot, &me),
            Err(EvictionRefused::OtherBoot { .. })
        ));
        let mut no_start = ours.clone();
        no_start.start_time = None;
        assert!(matches!(
            identifiable(&no_start, &me),
            Err(EvictionRefused::Unidentifiable {
                missing: "start time"
            })
        ));
    }

    #[test]
    fn the_evicted_run_becomes_the_last_run_and_counts_as_a_failure() {
        let started_at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let previous = LastRun::after(
            None,
            RunEnd {
                outcome: Outcome::Failed,
                exit_code: Some(1),
                signal: None,
                started_at,
            },
            started_at + Duration::from_secs(5),
        );
        let eviction = Eviction {
            evicted: Evicted {
                token: uuid::Uuid::from_u128(7),
                pid: 42,
                job: Some("job".to_owned()),
                silent_ms: 3_000,
            },
            started_at,
            previous_run: Some(previous),
            signal: libc::SIGTERM,
        };
        let mut doc = LockDocument::new(record(None, None), None, None);
        eviction.record_into(&mut doc);
        let run = doc.last_run.as_deref().unwrap();
        assert_eq!(run.outcome, Outcome::Evicted);
        assert_eq!(run.started_at, started_at);
        assert_eq!(run.signal, Some(libc::SIGTERM));
        assert_eq!(run.consecutive_failures, 2);
        assert_eq!(doc.owner.evicted.as_ref().unwrap().pid, 42);
    }
}
