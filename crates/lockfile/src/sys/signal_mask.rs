//! The signal mask of a thread the crate starts: every signal blocked, so
//! that the thread never takes one meant for the application.

/// Blocks every signal in the calling thread.
///
/// A process-directed signal goes to any thread that does not block it. A
/// program that takes its signals synchronously (a command wrapper waiting
/// in `sigtimedwait` to forward SIGTERM to its child) blocks them in its own
/// threads; were ours to accept them, SIGTERM would run its default action
/// there and kill the whole process instead of being forwarded. The lease
/// layer's threads start the same way.
pub(crate) fn block_all_signals() {
    // SAFETY: `all` is initialised by sigfillset before use, and
    // pthread_sigmask only reads it and changes this thread's mask.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
    }
}
