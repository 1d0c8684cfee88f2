//! Waiting for a lock from async code (the `tokio` feature, off by
//! default): [`LockOptions::acquire_async`] and [`LockGuard::acquire_async`]
//! return an [`Acquire`] future that waits without blocking the thread that
//! polls it, on a multi-threaded or a current-thread runtime (its only
//! dependency is tokio's oneshot channel, which needs nothing of a runtime
//! but the waker it is polled with).
//!
//! # How a waiter waits
//!
//! flock(2) gives no readiness notification: a lock is waited for by a
//! thread blocked in flock(2), or by trying again. An async acquire blocks
//! no thread of the runtime, and does not start one per waiter:
//!
//! - **The first poll** makes one attempt, the one
//!   [`try_acquire`](LockOptions::try_acquire) makes. When the lock is free
//!   that is all: no thread, no channel.
//! - **When it is held**, the future hands the wait to the process's one
//!   waiter thread, `lockfile-waiter` (started at the first wait, every
//!   signal blocked, never ended), and awaits its answer on a oneshot
//!   channel.
//! - **The thread** keeps a queue of waiters per lock file, first come
//!   first tried, and one inotify descriptor with a watch on every
//!   directory that has waiters (one per directory, counted, ended with its
//!   last waiter). It sleeps in poll(2) on that descriptor and on a pipe
//!   that new and dropped futures write to, until the next sweep or the
//!   earliest deadline; with no waiters, without a timeout.
//! - **An event naming a file** (closed by a process that had it open for
//!   writing: a holder's release, or the kernel closing a dead holder's
//!   descriptors; not a write, so that a holder writing into its locked
//!   file wakes nobody) makes it try that file's waiters in order, and
//!   stop at the first that finds the lock held. Each one looks before it
//!   tries, read-only (open, fstat, a non-blocking flock, close), and tries
//!   (the ordinary attempt, every rule of the blocking acquire included)
//!   only when the lock looks free: an attempt opens the file for writing,
//!   and a failed one's close would be an event of its own, waking the
//!   thread for another failed attempt. The looks wake nobody.
//! - **Every second** it sweeps every queue, whatever inotify said: for a
//!   holder whose descriptor was read-only (flock(1), a shared lock), one
//!   that unlocked without closing, or a filesystem whose changes inotify
//!   misses. A lock on a directory, and a file the look cannot judge (not
//!   a regular file, a filesystem that refuses a read-only lock), are tried
//!   on the sweeps alone. Without inotify (not Linux, or the user's limit
//!   of inotify instances or watches reached), every 100 ms.
//! - **After a wake-up for others' files only** (a busy shared directory)
//!   it listens to inotify again 10 ms later, as a slot waiter does, so
//!   that others' writes cannot keep it busy.
//! - **At a deadline** ([`LockOptions::timeout`]) it makes one last
//!   attempt: the lock, or the [`Error::Timeout`](crate::Error::Timeout)
//!   that the blocking acquire returns, naming the holder then.
//!
//! The attempts are the thread's own, one at a time: an attempt that waits
//! (a lock file on a network filesystem whose server does not answer)
//! holds up every async waiter of the process, their timeouts included,
//! until it returns. Keep lock files local, as the crate's caveats say.
//!
//! First come is first tried, not first served: a newcomer's first attempt
//! may take a lock that came free before the thread got to its queue, as
//! flock(2) itself favours no waiter.
//!
//! So a waiting process runs one thread for its waiters, however many (1,000
//! waiters on a runtime of 4 workers: 6 threads in all), and a lock
//! released by a holder that had it open for writing is taken within a
//! fraction of a millisecond (0.06 ms median on one lock, 1.4 times a
//! thread blocked in [`LockOptions::acquire`]; after a read-only holder,
//! up to the next sweep). The figures are in BENCHMARKS.md ("Async
//! waiters").
//!
//! # Cancel safety
//!
//! Dropping an [`Acquire`] at any point leaves no lock held, no record
//! written for a run that never started, and no thread stuck:
//!
//! - **Not yet polled**: nothing was done.
//! - **Waiting**: the drop tells the waiter thread, which forgets the
//!   waiter at its next wake-up (at once), and its directory's watch with
//!   its last waiter. When the thread is taking the lock for that waiter
//!   just then, it takes it without writing a record and finds nobody to
//!   hand it to: it unlocks and closes the file at once. The lock is held
//!   for nobody's run for at most the rest of that one attempt: a few
//!   non-blocking system calls, microseconds.
//! - **Answered, not yet polled again**: the lock waits in the channel
//!   without its record, and is unlocked and closed with the future, in
//!   the thread that drops it.
//!
//! The record is written by the poll that returns the guard, in the task
//! that will run: the run starts there. An attempt may have created the
//! lock file, empty, as any attempt does.
//!
//! The waiter thread never waits on a future, and a dropped future leaves
//! nothing behind it: nothing gets stuck. [`waiters`] says how many waits
//! the thread holds.
//!
//! # What is fine to call from async code, as it is
//!
//! These make a few non-blocking system calls on a local file, and never
//! wait for another process; none calls fsync:
//!
//! - [`LockOptions::try_acquire`] (and [`LockGuard::try_acquire`]): open,
//!   a non-blocking flock, fstat, one pread and one pwrite of the record
//!   (and an ftruncate after a longer previous content). Against a holder
//!   that wrote no record (flock(1), shared holders) its error names the
//!   holders from the kernel's lock table: a read of `/proc/locks`, as long
//!   as the host's list of locks. With [`LockOptions::evict_after`] it may
//!   wait for a hung holder to die: not from async code.
//! - [`LockGuard::heartbeat`]: one futimens.
//! - [`LockGuard::record_success`] and [`LockGuard::record_outcome`]: one
//!   pwrite (and an ftruncate when the record got shorter).
//! - [`LockGuard::release`], and dropping a guard: one pwrite of the
//!   record's flag, flock(LOCK_UN), close; with
//!   [`LockOptions::remove_on_release`], an fstat, an fstatat and an
//!   unlinkat besides.
//!
//! On a network filesystem any of them may wait for the server (NFS
//! flushes on close): keep lock files local, as the crate's caveats say.
//! The blocking [`LockOptions::acquire`], [`inspect`](crate::inspect()),
//! [`reap`](crate::reap()) and the `check` module (which read `/proc` and
//! may walk every process's descriptors) belong on a blocking thread
//! (`tokio::task::spawn_blocking`). There is no async slot acquire: take
//! a slot with [`LockOptions::acquire_slot`] on a blocking thread.

mod future;
mod helper;
mod queues;
mod wake;

pub use future::Acquire;

#[cfg(doc)]
use crate::{LockGuard, LockOptions};

/// How many async acquires this process's waiter thread is waiting for:
/// handed to it and neither answered nor forgotten. A future dropped while
/// it waited counts until the thread has forgotten it (at its next
/// wake-up, which the drop itself causes). 0 before the first wait.
///
/// ```
/// println!("{} async acquires wait", lockfile::waiter::waiters());
/// ```
pub fn waiters() -> usize {
    helper::waiting()
}
