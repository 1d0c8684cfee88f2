//! The waiter thread: one per process, started at the first async acquire
//! that has to wait, every signal blocked. It sleeps in poll(2) on its
//! doorbell and its inotify descriptor, without a timeout while nobody
//! waits, and runs the rounds of [`Queues`] when woken.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};

use super::queues::{Due, Queues, Waiter};
use super::wake::{Bell, Ringer, doorbell};
use crate::sys;

/// How long the thread stops listening to inotify after a wake-up for
/// others' files only (a busy shared directory), so that others' writes
/// cannot keep it busy; as a slot waiter naps. Its doorbell still rings.
const IDLE_NAP: Duration = Duration::from_millis(10);

/// The process's waiter thread, as futures reach it.
#[derive(Debug)]
pub(super) struct Shared {
    /// The process that started the thread: a forked child has none, and
    /// starts its own.
    pid: u32,
    inbox: Mutex<Inbox>,
    ringer: Ringer,
    /// Set by a future dropped while it waited, so that the thread looks
    /// for the waiters whose futures are gone.
    dropped: AtomicBool,
    /// Waiters registered and not yet answered or forgotten.
    waiting: AtomicUsize,
}

#[derive(Debug, Default)]
struct Inbox {
    new: Vec<Waiter>,
    /// Set when the thread ended (a bug: it panicked): nothing reads the
    /// inbox any more.
    ended: bool,
}

/// The thread of this process, once started.
static THREAD: Mutex<Option<Arc<Shared>>> = Mutex::new(None);

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing that holds these locks can panic halfway through a change.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Hands `waiter` to the waiter thread, starting it first when this process
/// has none. Returns the thread's handle, for the future to say when it is
/// dropped.
///
/// # Errors
///
/// The thread, or its doorbell, could not be made (the process is out of
/// threads or descriptors). `waiter` is dropped then.
pub(super) fn register(waiter: Waiter) -> io::Result<Arc<Shared>> {
    let mut waiter = Some(waiter);
    loop {
        let shared = current()?;
        // Counted before it is queued, so that the count never dips below
        // what the thread holds.
        shared.waiting.fetch_add(1, Ordering::SeqCst);
        {
            let mut inbox = locked(&shared.inbox);
            if !inbox.ended {
                inbox.new.extend(waiter.take());
            }
        }
        if waiter.is_none() {
            shared.ringer.ring();
            return Ok(shared);
        }
        // It ended meanwhile: the next call starts another.
        shared.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

/// This process's thread, started when there is none (or it ended).
fn current() -> io::Result<Arc<Shared>> {
    let mut thread = locked(&THREAD);
    if let Some(shared) = &*thread
        && shared.pid == std::process::id()
        && !locked(&shared.inbox).ended
    {
        return Ok(Arc::clone(shared));
    }
    let shared = start()?;
    *thread = Some(Arc::clone(&shared));
    Ok(shared)
}

/// How many waiters the thread of this process holds: registered, and
/// neither answered nor forgotten.
pub(super) fn waiting() -> usize {
    match &*locked(&THREAD) {
        Some(shared) if shared.pid == std::process::id() => shared.waiting.load(Ordering::SeqCst),
        _ => 0,
    }
}

impl Shared {
    /// Says that a waiting future was dropped: the thread forgets it.
    pub(super) fn dropped(&self) {
        self.dropped.store(true, Ordering::SeqCst);
        self.ringer.ring();
    }
}

fn start() -> io::Result<Arc<Shared>> {
    let (bell, ringer) = doorbell()?;
    let shared = Arc::new(Shared {
        pid: std::process::id(),
        inbox: Mutex::default(),
        ringer,
        dropped: AtomicBool::new(false),
        waiting: AtomicUsize::new(0),
    });
    let theirs = Arc::clone(&shared);
    std::thread::Builder::new()
        .name("lockfile-waiter".to_owned())
        .spawn(move || run(&theirs, &bell))?;
    Ok(shared)
}

/// Marks the thread ended when it unwinds, and drops what its inbox holds:
/// each of those futures then fails rather than waits for ever (those in
/// its queues are dropped with them).
struct EndGuard<'a>(&'a Shared);

impl Drop for EndGuard<'_> {
    fn drop(&mut self) {
        let orphans = {
            let mut inbox = locked(&self.0.inbox);
            inbox.ended = true;
            std::mem::take(&mut inbox.new)
        };
        drop(orphans);
    }
}

/// The thread's body: never returns.
fn run(shared: &Shared, bell: &Bell) {
    sys::block_all_signals();
    let _end = EndGuard(shared);
    let mut queues = Queues::default();
    // Until when inotify is not listened to, after a wake-up for others'
    // files.
    let mut nap_until: Option<Instant> = None;
    loop {
        let now = Instant::now();
        let napping = nap_until.filter(|&t| t > now);
        let until = [queues.next_round(), napping].into_iter().flatten().min();
        let watch = if napping.is_some() {
            None
        } else {
            queues.watch_fd()
        };
        let (rung, events) = sleep(bell, watch, until.map(|t| t.saturating_duration_since(now)));
        let mut removed = 0;
        if rung {
            bell.drain();
            let new = std::mem::take(&mut locked(&shared.inbox).new);
            for waiter in new {
                queues.add(waiter);
            }
            if shared.dropped.swap(false, Ordering::SeqCst) {
                removed += queues.forget_dropped();
            }
        }
        let mut due = Due::default();
        if events {
            queues.read_events(&mut due);
        }
        let round = queues.round(&due, Instant::now());
        removed += round.removed;
        if removed > 0 {
            shared.waiting.fetch_sub(removed, Ordering::SeqCst);
        }
        nap_until = (events && !round.named_ours).then(|| Instant::now() + IDLE_NAP);
    }
}

/// Sleeps in poll(2) on the doorbell and, when given, the inotify
/// descriptor, for up to `timeout` (for ever without one). Returns whether
/// each is readable.
fn sleep(
    bell: &Bell,
    watch: Option<std::os::fd::BorrowedFd<'_>>,
    timeout: Option<Duration>,
) -> (bool, bool) {
    let timeout = timeout.map(|t| Timespec {
        tv_sec: i64::try_from(t.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(t.subsec_nanos()),
    });
    let mut fds = Vec::with_capacity(2);
    fds.push(PollFd::new(bell, PollFlags::IN));
    if let Some(watch) = &watch {
        fds.push(PollFd::new(watch, PollFlags::IN));
    }
    // An error (EINTR cannot come: every signal is blocked; ENOMEM can) is
    // a wake-up like any other, after a pause, so that one that lasts does
    // not spin: the round looks at the clock, and the next poll sleeps again.
    if rustix::event::poll(&mut fds, timeout.as_ref()).is_err() {
        std::thread::sleep(super::queues::POLL);
        return (true, watch.is_some());
    }
    let ready = |fd: &PollFd<'_>| !fd.revents().is_empty();
    (ready(&fds[0]), fds.get(1).is_some_and(ready))
}
