//! What every engine's own threads (renewal, blocking calls) do: block
//! every signal, then run a single-threaded runtime.

use std::future::Future;

use crate::error::{Error, Operation, Result};

/// Blocks every signal in the calling thread. Every engine calls it first
/// in each thread it starts ([`block_on`] and
/// [`Session::spawn`](crate::session::Session::spawn) do).
///
/// A process-directed signal goes to any thread that does not block it. A
/// program that takes its signals synchronously (a command wrapper waiting in
/// `sigtimedwait` to forward SIGTERM to its child) blocks them in its own
/// threads; were an engine's to accept them, SIGTERM would run its default
/// action there and kill the whole process instead of being forwarded.
pub fn block_signals() {
    // SAFETY: `all` is initialised by sigfillset before use; pthread_sigmask
    // only changes this thread's mask.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
    }
}

/// Runs `make()`'s future to completion on a fresh single-threaded runtime,
/// on a thread of its own named `thread` with every signal blocked: for an
/// engine's blocking calls, so that they work from any thread, including
/// one that runs an async runtime of its own (where building another would
/// panic). `key` names the lease in the error when the thread or its runtime
/// cannot be started. A panic in the future is resumed here.
///
/// # Errors
///
/// The future's own, or [`Error::Io`] ([`Operation::Spawn`]) when the
/// thread or its runtime cannot be started.
pub fn block_on<T, F>(thread: &str, key: &str, make: impl FnOnce() -> F + Send) -> Result<T>
where
    T: Send,
    F: Future<Output = Result<T>>,
{
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new()
            .name(thread.to_owned())
            .spawn_scoped(scope, || {
                let runtime = runtime(key)?;
                let result = runtime.block_on(make());
                // Never wait for a connection's background tasks to wind down.
                runtime.shutdown_background();
                result
            })
            .map_err(|e| spawn_error(key, e))?;
        thread
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// Blocks every signal in the calling thread, then builds its runtime:
/// single-threaded, with the socket and time drivers.
pub(crate) fn runtime(key: &str) -> Result<tokio::runtime::Runtime> {
    block_signals();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| spawn_error(key, e))
}

/// The error of a thread, or of its runtime, that could not be started.
pub(crate) fn spawn_error(key: &str, source: std::io::Error) -> Error {
    Error::Io {
        op: Operation::Spawn,
        key: key.to_owned(),
        source,
    }
}
