//! What every engine's own threads (renewal, blocking calls) do first.

/// Blocks every signal in the calling thread. Every engine calls it first
/// in each thread it starts.
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

/// Runs `f` on a thread of its own named `name`, with every signal blocked
/// ([`block_signals`]), and returns its result: for an engine's blocking
/// calls, so that they work from any thread, including one that runs an
/// async runtime of its own (where building another would panic).
///
/// # Errors
///
/// When the thread cannot be started. A panic in `f` is resumed here.
pub fn on_own_thread<T: Send>(name: &str, f: impl FnOnce() -> T + Send) -> std::io::Result<T> {
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn_scoped(scope, || {
                block_signals();
                f()
            })?;
        Ok(thread
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    })
}
