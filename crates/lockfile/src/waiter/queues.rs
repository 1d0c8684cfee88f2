//! What the waiter thread keeps: one FIFO queue of waiters per lock file,
//! one inotify watch per directory that has waiters (counted, ended with
//! its last waiter), and the rounds of attempts that an event, a sweep or
//! a deadline calls for.

use std::collections::{HashMap, HashSet, VecDeque};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::acquire::{Probe, Record, Taken, probe, take};
use crate::sys::{self, DirWatch, WatchId};
use crate::{Error, LockOptions, Result, Wait};

/// How often every queue is tried, whatever inotify said: for a holder that
/// unlocked without closing a descriptor opened for writing (flock(1) opens
/// read-only), or a filesystem whose changes inotify does not see.
pub(super) const SWEEP: Duration = Duration::from_secs(1);
/// How often, when a queue has no watch (no inotify: not Linux, or the
/// user's limit of instances or watches reached).
pub(super) const POLL: Duration = Duration::from_millis(100);

/// What a future gets: the lock (its record left to the future's poll), or
/// the error that ends its wait.
pub(super) type Outcome = Result<Taken>;

/// One async acquire, waiting.
#[derive(Debug)]
pub(super) struct Waiter {
    pub(super) opts: LockOptions,
    pub(super) path: PathBuf,
    /// When its future was first polled: a timeout's `waited`.
    pub(super) started: Instant,
    /// The end of a bounded wait.
    pub(super) deadline: Option<Instant>,
    pub(super) tx: oneshot::Sender<Outcome>,
}

/// The waiters of one path, first come first tried.
#[derive(Debug)]
struct Queue {
    /// The watch of the file's directory; `None` without inotify: the
    /// queue is then tried on the sweeps only, every [`POLL`].
    watch: Option<WatchId>,
    /// The file's name in that directory, as inotify names it.
    name: OsString,
    waiters: VecDeque<Waiter>,
    /// Set when a waiter joined: the next round tries the queue, since the
    /// lock may have come free before the watch was in place.
    joined: bool,
}

/// What the events read since the last round named.
#[derive(Debug, Default)]
pub(super) struct Due {
    names: HashMap<WatchId, HashSet<OsString>>,
    /// The kernel's queue overflowed, or the watch failed: sweep.
    sweep: bool,
}

/// What a round did.
#[derive(Debug, Default)]
pub(super) struct Round {
    /// Waiters gone: answered, or their future dropped.
    pub(super) removed: usize,
    /// Whether the events named any waited file.
    pub(super) named_ours: bool,
}

/// Every waiter of the process.
#[derive(Debug, Default)]
pub(super) struct Queues {
    queues: HashMap<PathBuf, Queue>,
    /// How many queues each watch serves.
    watches: HashMap<WatchId, usize>,
    /// The process's one inotify descriptor, made at the first wait.
    dir_watch: Option<DirWatch>,
    next_sweep: Option<Instant>,
}

impl Queues {
    /// Queues a waiter behind those of its path, watching its directory.
    pub(super) fn add(&mut self, waiter: Waiter) {
        if !self.queues.contains_key(&waiter.path) {
            let itself = sys::without_trailing_slash(&waiter.path).into_owned();
            let name = itself.file_name().unwrap_or_default().to_owned();
            let watch = self.watch(crate::paths::parent_dir(&itself));
            let queue = Queue {
                watch,
                name,
                waiters: VecDeque::new(),
                joined: false,
            };
            self.queues.insert(waiter.path.clone(), queue);
        }
        let now = Instant::now();
        let sweep_by = now + self.sweep_period();
        self.next_sweep = Some(self.next_sweep.map_or(sweep_by, |t| t.min(sweep_by)));
        let queue = self.queues.get_mut(&waiter.path).expect("inserted above");
        queue.waiters.push_back(waiter);
        queue.joined = true;
    }

    /// The watch of `dir`, counted; `None` where inotify cannot be had.
    fn watch(&mut self, dir: &std::path::Path) -> Option<WatchId> {
        if self.dir_watch.is_none() {
            self.dir_watch = DirWatch::new().ok();
        }
        let id = self.dir_watch.as_mut()?.watch_closes(dir).ok()?;
        *self.watches.entry(id).or_default() += 1;
        Some(id)
    }

    /// The inotify descriptor to poll, while any directory is watched.
    pub(super) fn watch_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        if self.watches.is_empty() {
            return None;
        }
        self.dir_watch.as_ref().map(DirWatch::as_fd)
    }

    /// Reads the events queued, naming files for the next round.
    pub(super) fn read_events(&mut self, due: &mut Due) {
        let Some(watch) = &mut self.dir_watch else {
            return;
        };
        match watch.read(&mut |id, name| {
            due.names.entry(id).or_default().insert(name.to_owned());
        }) {
            Ok(overflowed) => due.sweep |= overflowed,
            // A watch that fails once is given up: every queue is swept
            // every POLL from now on.
            Err(_) => {
                self.dir_watch = None;
                self.watches.clear();
                for queue in self.queues.values_mut() {
                    queue.watch = None;
                }
                due.sweep = true;
            }
        }
    }

    /// How often the sweeps come: every [`POLL`] while a queue has no watch.
    fn sweep_period(&self) -> Duration {
        if self.queues.values().any(|q| q.watch.is_none()) {
            POLL
        } else {
            SWEEP
        }
    }

    /// When the next round is due without an event: the next sweep or the
    /// earliest deadline. `None` without waiters: nothing is due.
    pub(super) fn next_round(&self) -> Option<Instant> {
        let deadlines = self
            .queues
            .values()
            .flat_map(|q| q.waiters.iter().filter_map(|w| w.deadline));
        deadlines.chain(self.next_sweep).min()
    }

    /// Forgets every waiter whose future was dropped. Returns how many.
    pub(super) fn forget_dropped(&mut self) -> usize {
        let mut forgotten = 0;
        for queue in self.queues.values_mut() {
            let before = queue.waiters.len();
            queue.waiters.retain(|w| !w.tx.is_closed());
            forgotten += before - queue.waiters.len();
        }
        self.drop_empty();
        forgotten
    }

    /// One round: every waiter past its deadline gets a last attempt, and
    /// every queue that `due` names (all of them on a sweep) is tried.
    pub(super) fn round(&mut self, due: &Due, now: Instant) -> Round {
        let sweep = due.sweep || self.next_sweep.is_some_and(|t| t <= now);
        let mut round = Round::default();
        for (path, queue) in &mut self.queues {
            round.removed += queue.expire(now);
            let named = queue
                .watch
                .and_then(|id| due.names.get(&id))
                .is_some_and(|names| names.contains(&queue.name));
            round.named_ours |= named;
            if sweep || named || queue.joined {
                queue.joined = false;
                round.removed += queue.attempt(path, sweep);
            }
        }
        self.drop_empty();
        if sweep {
            self.next_sweep = (!self.queues.is_empty()).then(|| now + self.sweep_period());
        }
        round
    }

    /// Drops the queues without waiters, and ends the watches they alone
    /// used.
    fn drop_empty(&mut self) {
        let watches = &mut self.watches;
        let dir_watch = &mut self.dir_watch;
        self.queues.retain(|_, queue| {
            if !queue.waiters.is_empty() {
                return true;
            }
            if let Some(id) = queue.watch
                && let Some(count) = watches.get_mut(&id)
            {
                *count -= 1;
                if *count == 0 {
                    watches.remove(&id);
                    if let Some(w) = dir_watch.as_mut() {
                        w.unwatch(id);
                    }
                }
            }
            false
        });
        if self.queues.is_empty() {
            self.next_sweep = None;
        }
    }
}

impl Queue {
    /// Tries the waiters in order, and stops at the first that finds the
    /// lock held: those behind it would find it held too. Returns how many
    /// were answered or forgotten.
    ///
    /// Each waiter looks before it tries, read-only (see
    /// `crate::acquire::probe`): a failed attempt opens the file for
    /// writing, and its close is an inotify event that would wake this
    /// thread again, for another failed attempt. What the look cannot judge
    /// (not a regular file, a filesystem that refuses a read-only lock) is
    /// tried on sweeps alone, as a slot waiter does.
    fn attempt(&mut self, path: &std::path::Path, sweep: bool) -> usize {
        let mut removed = 0;
        while let Some(waiter) = self.waiters.front() {
            if waiter.tx.is_closed() {
                self.waiters.pop_front();
                removed += 1;
                continue;
            }
            match probe(path, waiter.opts.lock_mode()) {
                Probe::Held => break,
                Probe::Unknown if !sweep => break,
                Probe::Free | Probe::Unknown => {}
            }
            let outcome = match take(&waiter.opts, path, Wait::No, Record::Deferred) {
                Err(Error::Contended { .. }) => break,
                outcome => outcome.map(|taken| taken.waited_since(waiter.started)),
            };
            let waiter = self.waiters.pop_front().expect("the front one");
            answer(waiter, outcome);
            removed += 1;
        }
        removed
    }

    /// Gives each waiter past its deadline a last attempt, as the blocking
    /// acquire's timed wait ends: the lock, or the timeout naming the
    /// holder. Returns how many were answered or forgotten.
    fn expire(&mut self, now: Instant) -> usize {
        if !self
            .waiters
            .iter()
            .any(|w| w.deadline.is_some_and(|d| d <= now))
        {
            return 0;
        }
        let before = self.waiters.len();
        let mut kept = VecDeque::with_capacity(before);
        for waiter in self.waiters.drain(..) {
            if waiter.tx.is_closed() {
                continue;
            }
            if waiter.deadline.is_none_or(|d| d > now) {
                kept.push_back(waiter);
                continue;
            }
            let outcome = take(&waiter.opts, &waiter.path, Wait::No, Record::Deferred)
                .map(|taken| taken.waited_since(waiter.started))
                .map_err(|e| timed_out(e, waiter.started));
            answer(waiter, outcome);
        }
        self.waiters = kept;
        before - self.waiters.len()
    }
}

/// Hands a waiter its outcome. When its future was dropped meanwhile, the
/// outcome is dropped here, and with it the lock it took: unlocked and
/// closed at once, its record never written.
fn answer(waiter: Waiter, outcome: Outcome) {
    drop(waiter.tx.send(outcome));
}

/// A contention at the end of a bounded wait, as the blocking acquire
/// reports it: [`Error::Timeout`], naming the holder then. Any other error
/// stays itself.
pub(super) fn timed_out(e: Error, started: Instant) -> Error {
    match e {
        Error::Contended {
            path,
            owner,
            holders,
            not_evicted,
        } => Error::Timeout {
            path,
            waited: started.elapsed(),
            owner,
            holders,
            not_evicted,
        },
        other => other,
    }
}
