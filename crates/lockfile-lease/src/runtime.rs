//! The runtime of every thread the lease layer starts for an engine (a
//! lease's own thread, a blocking call's): every signal blocked, then a
//! single-threaded runtime with the socket and time drivers.

use crate::error::{Error, Operation};

/// Blocks every signal in the calling thread. Every thread an engine's
/// calls run on starts with it.
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

/// Blocks every signal in the calling thread, then builds its runtime.
pub(crate) fn runtime(key: &str) -> Result<tokio::runtime::Runtime, Error> {
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
