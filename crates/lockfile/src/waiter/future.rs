//! The async acquire: its entry points and its future, [`Acquire`].

use std::fmt;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::sync::oneshot;

use super::helper::{self, Shared};
use super::queues::{Outcome, Waiter, timed_out};
use crate::acquire::{Record, Taken, take};
use crate::error::Operation;
use crate::{Error, LockGuard, LockOptions, Result, Wait};

impl LockOptions {
    /// Takes the lock at `path` without blocking the thread that awaits it:
    /// what [`acquire`](LockOptions::acquire) does, as a future. It waits
    /// as long as it takes, or up to [`timeout`](LockOptions::timeout)
    /// (counted from the first poll), and ends with the same
    /// [`Error::Timeout`], naming the holder then.
    ///
    /// The first poll makes one attempt, as
    /// [`try_acquire`](LockOptions::try_acquire) does; when the lock is
    /// held, the process's waiter thread waits for it (see
    /// [`crate::waiter`]). Every rule of the blocking acquire holds: no
    /// symlink followed, nothing waited on that is not a regular file,
    /// planted files refused, a record written only into a file of ours.
    ///
    /// Dropping the future at any point leaves no lock held and no record
    /// written (see [cancel safety](crate::waiter#cancel-safety)).
    ///
    /// # Errors
    ///
    /// The future ends with [`Error::Timeout`] when the timeout passed, and
    /// with any other [`Error`] the blocking acquire returns. It refuses
    /// [`evict_after`](LockOptions::evict_after) with [`Error::Io`] of kind
    /// [`io::ErrorKind::InvalidInput`], before anything is opened: an
    /// eviction signals a hung holder and waits for it to die, which no
    /// thread of a runtime, nor the one waiter thread of every future,
    /// should do. Evict with `acquire` on a blocking thread
    /// (`tokio::task::spawn_blocking`).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "tokio")]
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), lockfile::Error> {
    /// use std::time::Duration;
    /// use lockfile::LockOptions;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("job.lock");
    /// let held = LockOptions::new().try_acquire(&path)?;
    /// let err = LockOptions::new()
    ///     .timeout(Duration::from_millis(50))
    ///     .acquire_async(&path)
    ///     .await
    ///     .unwrap_err();
    /// assert!(matches!(err, lockfile::Error::Timeout { .. }), "{err}");
    /// drop(held);
    /// let guard = LockOptions::new().acquire_async(&path).await?;
    /// guard.release()?;
    /// # Ok(())
    /// # }
    /// # #[cfg(not(feature = "tokio"))]
    /// # fn main() {}
    /// ```
    pub fn acquire_async(&self, path: impl AsRef<Path>) -> Acquire {
        Acquire {
            path: path.as_ref().to_path_buf(),
            state: State::Start(self.clone()),
        }
    }
}

impl LockGuard {
    /// Takes the lock at `path` without blocking the thread that awaits it,
    /// waiting as long as it takes. Same as
    /// `LockOptions::new().acquire_async(path)`.
    ///
    /// # Errors
    ///
    /// As [`LockOptions::acquire_async`].
    pub fn acquire_async(path: impl AsRef<Path>) -> Acquire {
        LockOptions::new().acquire_async(path)
    }
}

/// The future of an async acquire
/// ([`LockOptions::acquire_async`], [`LockGuard::acquire_async`]): the
/// guard, or the error that ended the wait.
///
/// `Send`, `Unpin` and `'static`: it may be spawned, moved between threads,
/// and polled by reference in a `select!`. Like every future it does
/// nothing until polled. Dropped, it leaves no lock held and no record
/// written (see [cancel safety](crate::waiter#cancel-safety)).
#[must_use = "a future does nothing unless polled: await it to take the lock"]
pub struct Acquire {
    path: PathBuf,
    state: State,
}

enum State {
    /// Not polled yet.
    Start(LockOptions),
    /// Waiting for the waiter thread's answer.
    Waiting {
        rx: oneshot::Receiver<Outcome>,
        thread: Arc<Shared>,
    },
    /// Answered.
    Done,
}

// The promise above, kept by the compiler.
const _: fn() = || {
    fn promised<T: Send + Unpin + 'static>() {}
    promised::<Acquire>();
};

impl fmt::Debug for Acquire {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            State::Start(_) => "not polled",
            State::Waiting { .. } => "waiting",
            State::Done => "done",
        };
        f.debug_struct("Acquire")
            .field("path", &self.path)
            .field("state", &state)
            .finish()
    }
}

impl Future for Acquire {
    type Output = Result<LockGuard>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if let State::Start(_) = this.state {
            let State::Start(opts) = std::mem::replace(&mut this.state, State::Done) else {
                unreachable!("matched above")
            };
            if let Some(outcome) = this.first_attempt(opts) {
                return Poll::Ready(outcome);
            }
        }
        let State::Waiting { rx, .. } = &mut this.state else {
            panic!("an Acquire future was polled after it completed");
        };
        let answer = match Pin::new(rx).poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(answer) => answer,
        };
        this.state = State::Done;
        Poll::Ready(match answer {
            // The run starts now: its record is written here, by the task
            // that runs it.
            Ok(Ok(Taken::Unwritten(lock))) => lock.finish(),
            Ok(Ok(Taken::Guard(guard))) => Ok(guard),
            Ok(Err(e)) => Err(e),
            // The thread dropped the waiter without an answer: it ended.
            Err(_) => Err(thread_error(
                &this.path,
                io::Error::other("the lockfile-waiter thread ended"),
            )),
        })
    }
}

impl Acquire {
    /// The first poll's attempt: the future's outcome (the guard, or an
    /// error), or `None` once the wait is handed to the waiter thread.
    fn first_attempt(&mut self, opts: LockOptions) -> Option<Result<LockGuard>> {
        let started = Instant::now();
        let path = &self.path;
        if opts.evict_after.is_some() {
            return Some(Err(Error::Io {
                op: Operation::Lock,
                path: path.clone(),
                source: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "an async acquire does not evict: an eviction signals a hung holder and waits for it to die, which no runtime thread should; evict with `acquire` on a blocking thread",
                ),
            }));
        }
        let deadline = match Wait::up_to(opts.timeout) {
            Wait::Until(deadline) => Some(deadline),
            Wait::No | Wait::Forever => None,
        };
        match take(&opts, path, Wait::No, Record::Now) {
            Ok(Taken::Guard(guard)) => Some(Ok(guard)),
            Ok(Taken::Unwritten(lock)) => Some(lock.finish()),
            Err(e @ Error::Contended { .. }) if deadline.is_some_and(|d| d <= Instant::now()) => {
                Some(Err(timed_out(e, started)))
            }
            Err(Error::Contended { .. }) => {
                let (tx, rx) = oneshot::channel();
                let waiter = Waiter {
                    opts,
                    path: path.clone(),
                    started,
                    deadline,
                    tx,
                };
                match helper::register(waiter) {
                    Ok(thread) => {
                        self.state = State::Waiting { rx, thread };
                        None
                    }
                    Err(e) => Some(Err(thread_error(path, e))),
                }
            }
            Err(e) => Some(Err(e)),
        }
    }
}

/// The waiter thread could not be had, or ended.
fn thread_error(path: &Path, e: io::Error) -> Error {
    Error::Io {
        op: Operation::Lock,
        path: path.to_path_buf(),
        source: io::Error::new(e.kind(), format!("cannot wait for the lock: {e}")),
    }
}

impl Drop for Acquire {
    fn drop(&mut self) {
        if let State::Waiting { rx, thread } = std::mem::replace(&mut self.state, State::Done) {
            // Closed first, so that the thread sees it closed when it looks.
            drop(rx);
            thread.dropped();
        }
    }
}
