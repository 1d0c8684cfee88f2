//! The handshake between a held lease's guard and the lease's own thread,
//! which took the lease and now renews it.
//!
//! [`Session::start`] starts the thread and returns at once, with a
//! [`Starting`] that completes once the lease is held (or why not): waited
//! for by parking the caller's thread, or awaited. From then on the guard
//! reaches the thread only through its [`Session`]: [`record`](Session::record)
//! a run, and [`release`](Session::release). Dropping the session releases
//! too, so the guard needs no `Drop` of its own; nothing renews a lease its
//! guard let go.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::thread::JoinHandle;

use lockfile::history::{LastRun, RunEnd};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::sync::oneshot;

use crate::Released;
use crate::error::{Error, Operation, Result};
use crate::park::block_on;
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

/// Where the thread sends the answer to one request.
#[derive(Debug)]
pub(crate) struct Reply<T>(oneshot::Sender<Result<T>>);

impl<T> Reply<T> {
    /// Answers the request; gives the answer back when nobody waits for it
    /// any more (a guard dropped inside a runtime does not wait).
    pub(crate) fn send(self, answer: Result<T>) -> Option<Result<T>> {
        self.0.send(answer).err()
    }
}

/// Where the thread says, once, that the lease is held (or why not); and
/// hears when to begin.
#[derive(Debug)]
pub(crate) struct Ready<A> {
    answer: oneshot::Sender<Result<A>>,
    go: Option<oneshot::Receiver<()>>,
}

impl<A> Ready<A> {
    /// Waits until the [`Starting`] is first waited for or polled: true
    /// then, false when it was dropped before. Nothing is asked of the
    /// server before, as nothing is done by a future before its first poll.
    pub(crate) async fn go(&mut self) -> bool {
        match self.go.take() {
            Some(go) => go.await.is_ok(),
            None => true,
        }
    }

    /// Hands `acquired` (or the acquire's error) to the [`Starting`].
    /// Renewal goes on at once on the thread, whenever the caller gets to
    /// build its guard; should the caller be gone, the request stream is
    /// closed and the thread releases.
    pub(crate) fn send(self, acquired: Result<A>) {
        let _ = self.answer.send(acquired);
    }

    /// Completes once nobody waits for the lease any more: the
    /// [`Starting`] was dropped (a cancelled future).
    pub(crate) async fn abandoned(&mut self) {
        self.answer.closed().await;
    }
}

/// A lease being taken on its own thread: completes with the thread's
/// answer and the [`Session`] to reach it.
#[derive(Debug)]
pub(crate) struct Starting<A> {
    key: String,
    history_key: String,
    ready: oneshot::Receiver<Result<A>>,
    /// Sent at the first wait or poll: the thread begins then.
    go: Option<oneshot::Sender<()>>,
    /// Taken by the session once the lease is held. Dropping it unanswered
    /// (with the `Starting`) tells the thread to let go.
    requests: Option<UnboundedSender<Request>>,
    thread: Option<JoinHandle<()>>,
}

impl<A> Starting<A> {
    /// Polls for the thread's answer (telling it to begin, the first time).
    ///
    /// # Errors
    ///
    /// The error the thread sent, or [`Error::Io`] ([`Operation::Spawn`])
    /// when it ended without a word: a panic, which `blocking` resumes here
    /// (the thread is joined); awaited, the thread is never joined, so that
    /// no worker waits for its unwinding, and its panic message is all
    /// there is.
    pub(crate) fn poll_started(
        &mut self,
        cx: &mut Context<'_>,
        blocking: bool,
    ) -> Poll<Result<(A, Session)>> {
        if let Some(go) = self.go.take() {
            let _ = go.send(());
        }
        let answer = match Pin::new(&mut self.ready).poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(answer) => answer,
        };
        Poll::Ready(match answer {
            Ok(Ok(acquired)) => Ok((
                acquired,
                Session {
                    key: self.key.clone(),
                    history_key: self.history_key.clone(),
                    requests: self
                        .requests
                        .take()
                        .expect("polled once more after it completed"),
                    thread: self.thread.take(),
                },
            )),
            // The thread returns right after sending it: not joined, so
            // that an awaited acquire never blocks a worker.
            Ok(Err(e)) => Err(e),
            // Gone without a word: only a panic (or a runtime that could not
            // be built, which sends its error) ends the thread this way. It
            // has finished unwinding, or is about to.
            Err(_) => match self
                .thread
                .take()
                .filter(|_| blocking)
                .map(JoinHandle::join)
            {
                Some(Err(panic)) => std::panic::resume_unwind(panic),
                _ => Err(spawn_error(
                    &self.key,
                    std::io::Error::other("the lease thread exited without acquiring"),
                )),
            },
        })
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
    /// once told to [`go`](Ready::go), it takes the lease on `key`, says so
    /// through [`Ready`] (giving up should it be
    /// [`abandoned`](Ready::abandoned)), then holds it,
    /// answering [`Requests`] until a [`Request::Release`] (or until the
    /// stream closes: then it releases). Returns at once.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] ([`Operation::Spawn`]) when the thread cannot be
    /// started.
    pub(crate) fn start<A, F>(
        name: &str,
        key: &str,
        history_key: &str,
        body: impl FnOnce(Ready<A>, Requests) -> F + Send + 'static,
    ) -> Result<Starting<A>>
    where
        A: Send + 'static,
        F: Future<Output = ()>,
    {
        let (ready_tx, ready) = oneshot::channel::<Result<A>>();
        let (go, go_rx) = oneshot::channel();
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
                let ready = Ready {
                    answer: ready_tx,
                    go: Some(go_rx),
                };
                runtime.block_on(body(ready, received));
                // The connections' tasks are dropped, not awaited.
                runtime.shutdown_background();
            })
            .map_err(|e| spawn_error(key, e))?;
        Ok(Starting {
            key: key.to_owned(),
            history_key: history_key.to_owned(),
            ready,
            go: Some(go),
            requests: Some(requests),
            thread: Some(thread),
        })
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
        block_on(self.record_async(end))
    }

    /// [`record`](Session::record), awaited.
    pub(crate) fn record_async(
        &self,
        end: RunEnd,
    ) -> impl Future<Output = Result<LastRun>> + use<> {
        let (reply, answer) = oneshot::channel();
        let sent = self
            .requests
            .send(Request::Record(end, Reply(reply)))
            .is_ok();
        answered(sent, answer, Operation::RecordRun, self.history_key.clone())
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
        let result = block_on(self.ask_release());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        released(result)
    }

    /// [`release`](Session::release), awaited. The thread is not joined:
    /// it has stopped renewing when it answers, and ends right after.
    ///
    /// # Errors
    ///
    /// As [`release`](Session::release).
    #[cfg(feature = "tokio")]
    pub(crate) async fn release_async(&mut self) -> Result<Released> {
        let answer = self.ask_release();
        self.thread = None;
        released(answer.await)
    }

    fn ask_release(&self) -> impl Future<Output = Result<()>> + use<> {
        let (reply, answer) = oneshot::channel();
        let sent = self.requests.send(Request::Release(Reply(reply))).is_ok();
        answered(sent, answer, Operation::Release, self.key.clone())
    }
}

/// The thread's answer to a request, if it was `sent`; an error naming
/// `op` and `key` when the thread had stopped.
async fn answered<T>(
    sent: bool,
    answer: oneshot::Receiver<Result<T>>,
    op: Operation,
    key: String,
) -> Result<T> {
    let answer = if sent { answer.await.ok() } else { None };
    answer.unwrap_or_else(|| {
        Err(Error::Io {
            op,
            key,
            source: std::io::Error::other("the renewal thread had stopped"),
        })
    })
}

/// A release's answer: a loss before it is no error.
fn released(answer: Result<()>) -> Result<Released> {
    match answer {
        Ok(()) => Ok(Released::WhileHeld),
        Err(loss) if loss.is_lost() => Ok(Released::AfterLoss(loss)),
        Err(e) => Err(e),
    }
}

impl Drop for Session {
    /// Releases a lease nobody released, and says so when that fails.
    ///
    /// Inside a tokio runtime it only asks: the lease's thread releases on
    /// its own (within about two request timeouts, never past the deadline)
    /// and logs a failure itself, so that no worker is blocked;
    /// [`shutdown::releases`](crate::shutdown::releases) waits for it.
    /// Elsewhere it waits, so that the lease is free when the drop returns.
    fn drop(&mut self) {
        if self.thread.is_none() {
            return;
        }
        if tokio::runtime::Handle::try_current().is_ok() {
            let (reply, answer) = oneshot::channel();
            if self.requests.send(Request::Release(Reply(reply))).is_ok() {
                crate::shutdown::under_way(answer);
            }
            self.thread = None;
            return;
        }
        if let Err(e) = self.release() {
            tracing::warn!(name: "release_failed", event = "release_failed", error = %e);
        }
    }
}
