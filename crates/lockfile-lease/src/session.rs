//! The handshake between a held lease's guard and the lease's own thread,
//! which took the lease and now renews it.
//!
//! [`Session::spawn`] starts the thread and returns once the lease is held
//! (or why not). From then on the guard reaches the thread only through its
//! [`Session`]: [`record`](Session::record) a run, and
//! [`release`](Session::release). Dropping the session releases too, so the
//! guard needs no `Drop` of its own; either way the thread is joined, and
//! nothing renews a lease its guard let go.

use std::future::Future;
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::JoinHandle;

use lockfile::history::{LastRun, RunEnd};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::Released;
use crate::error::{Error, Operation, Result};
use crate::runtime::{runtime, spawn_error};

/// What a guard asks of its lease thread.
#[derive(Debug)]
pub(crate) enum Request {
    /// Write how the run ended into the run history, bounded by the
    /// deadline the thread keeps.
    Record(RunEnd, Reply<LastRun>),
    /// Stop renewing and let the lease go, then answer and return.
    Release(Reply<()>),
}

/// The thread's end of the request stream.
pub(crate) type Requests = UnboundedReceiver<Request>;

/// Where the thread sends the answer to one request; the guard waits on it.
#[derive(Debug)]
pub(crate) struct Reply<T>(SyncSender<Result<T>>);

impl<T> Reply<T> {
    /// Answers the request. A guard that stopped waiting loses nothing.
    pub(crate) fn send(self, answer: Result<T>) {
        let _ = self.0.send(answer);
    }
}

/// Where the thread says, once, that the lease is held (or why not).
#[derive(Debug)]
pub(crate) struct Ready<A>(SyncSender<Result<A>>);

impl<A> Ready<A> {
    /// Hands `acquired` (or the acquire's error) to [`Session::spawn`]'s
    /// caller. Renewal goes on at once on the thread, whenever the caller
    /// gets to build its guard; should the caller be gone, the request
    /// stream is closed and the thread releases.
    pub(crate) fn send(self, acquired: Result<A>) {
        let _ = self.0.send(acquired);
    }
}

/// The guard's handle on its lease thread: the only way to ask it anything,
/// and the thread to join.
#[derive(Debug)]
pub(crate) struct Session {
    key: String,
    history_key: String,
    requests: UnboundedSender<Request>,
    thread: Option<JoinHandle<()>>,
}

impl Session {
    /// Starts the thread `name`, with every signal blocked and a
    /// single-threaded runtime of its own, and runs `body`'s future there:
    /// it takes the lease on `key`, says so through [`Ready`], then holds it,
    /// answering [`Requests`] until a [`Request::Release`] (or until the
    /// stream closes: then it releases). Returns once `body` has sent the
    /// lease, or its error.
    ///
    /// # Errors
    ///
    /// The error `body` sent, or [`Error::Io`] ([`Operation::Spawn`]) when
    /// the thread cannot be started or ends without a word. A panic on the
    /// thread before it sent is resumed here.
    pub(crate) fn spawn<A, F>(
        name: &str,
        key: &str,
        history_key: &str,
        body: impl FnOnce(Ready<A>, Requests) -> F + Send + 'static,
    ) -> Result<(A, Session)>
    where
        A: Send + 'static,
        F: Future<Output = ()>,
    {
        let (ready_tx, ready_rx) = sync_channel::<Result<A>>(1);
        let (requests, received) = unbounded_channel::<Request>();
        let thread_key = key.to_owned();
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                let runtime = match runtime(&thread_key) {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                runtime.block_on(body(Ready(ready_tx), received));
                // The connections' tasks are dropped, not awaited.
                runtime.shutdown_background();
            })
            .map_err(|e| spawn_error(key, e))?;
        let acquired = match ready_rx.recv() {
            Ok(Ok(acquired)) => acquired,
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(e);
            }
            Err(_) => match thread.join() {
                Err(panic) => std::panic::resume_unwind(panic),
                Ok(()) => {
                    return Err(spawn_error(
                        key,
                        std::io::Error::other("the lease thread exited without acquiring"),
                    ));
                }
            },
        };
        let session = Session {
            key: key.to_owned(),
            history_key: history_key.to_owned(),
            requests,
            thread: Some(thread),
        };
        Ok((acquired, session))
    }

    /// Where the lease's run history is kept.
    pub(crate) fn history_key(&self) -> &str {
        &self.history_key
    }

    /// Asks the thread to write how the run ended, and waits for the run
    /// as written.
    ///
    /// # Errors
    ///
    /// The thread's answer, or [`Error::Io`] when the thread had stopped.
    pub(crate) fn record(&self, end: RunEnd) -> Result<LastRun> {
        self.send(Operation::RecordRun, &self.history_key, |reply| {
            Request::Record(end, reply)
        })
    }

    /// Asks the thread to release the lease, waits for its answer, and
    /// joins it. Renewal has stopped when this returns, whatever the
    /// result. A second call finds the thread gone.
    ///
    /// # Errors
    ///
    /// The engine's release error (a lost lease, a server that could not be
    /// told), or [`Error::Io`] when the thread had stopped.
    pub(crate) fn release(&mut self) -> Result<Released> {
        let result = self.send(Operation::Release, &self.key, Request::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        match result {
            Ok(()) => Ok(Released::WhileHeld),
            Err(loss) if loss.is_lost() => Ok(Released::AfterLoss(loss)),
            Err(e) => Err(e),
        }
    }

    fn send<T>(
        &self,
        op: Operation,
        key: &str,
        make: impl FnOnce(Reply<T>) -> Request,
    ) -> Result<T> {
        let (reply_tx, reply_rx) = sync_channel(1);
        let answer = match self.requests.send(make(Reply(reply_tx))) {
            Ok(()) => reply_rx.recv().ok(),
            Err(_) => None,
        };
        answer.unwrap_or_else(|| {
            Err(Error::Io {
                op,
                key: key.to_owned(),
                source: std::io::Error::other("the renewal thread had stopped"),
            })
        })
    }
}

impl Drop for Session {
    /// Releases a lease nobody released, and says so when that fails.
    fn drop(&mut self) {
        if self.thread.is_some()
            && let Err(e) = self.release()
        {
            tracing::warn!(name: "release_failed", event = "release_failed", error = %e);
        }
    }
}
