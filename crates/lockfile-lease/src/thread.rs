//! Blocking calls of an engine (`inspect`), run on a thread of their own.

use std::future::Future;

use crate::error::Result;
use crate::runtime::{runtime, spawn_error};

pub use crate::runtime::block_signals;

/// Runs `make()`'s future to completion on a fresh single-threaded runtime,
/// on a thread of its own named `thread` with every signal blocked: for an
/// engine's blocking calls, so that they work from any thread, including
/// one that runs an async runtime of its own (where building another would
/// panic). `key` names the lease in the error when the thread or its runtime
/// cannot be started. A panic in the future is resumed here.
///
/// # Errors
///
/// The future's own, or [`Error::Io`](crate::Error::Io)
/// ([`Operation::Spawn`](crate::error::Operation::Spawn)) when the thread or
/// its runtime cannot be started.
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
