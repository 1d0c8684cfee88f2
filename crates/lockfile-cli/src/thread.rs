//! Helper threads of the wrapper (pings, the output tee), which never take a
//! signal.
//!
//! The wrapper takes the signals it forwards, and SIGCHLD, synchronously on
//! its main thread (sigtimedwait), with them blocked. A process-directed
//! signal goes to any thread that does not block it: one that reached a
//! helper thread would run its default action, killing the wrapper (and
//! leaving COMMAND unsupervised). So a helper starts with every signal
//! blocked, whatever the spawning thread's mask is at that moment, and
//! whether or not the main thread has blocked its own yet.

use std::io;

/// Spawns `f` on a thread that blocks every signal from its first
/// instruction: a new thread inherits its creator's mask, so the creator
/// blocks everything for the instant of the spawn, then restores its mask.
pub(crate) fn spawn<F>(name: &str, f: F) -> io::Result<std::thread::JoinHandle<()>>
where
    F: FnOnce() + Send + 'static,
{
    // SAFETY: the sets are plain data, initialised by sigfillset (or
    // written by pthread_sigmask) before they are read.
    let old = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        let mut old: libc::sigset_t = std::mem::zeroed();
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        old
    };
    let spawned = std::thread::Builder::new().name(name.to_owned()).spawn(f);
    // SAFETY: `old` is the mask pthread_sigmask returned above.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
    spawned
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_helper_blocks_every_signal_and_its_creator_keeps_its_mask() {
        fn blocked(sig: i32) -> bool {
            // SAFETY: a null new set only reads the mask into `now`.
            unsafe {
                let mut now: libc::sigset_t = std::mem::zeroed();
                libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut now);
                libc::sigismember(&now, sig) == 1
            }
        }
        let before = blocked(libc::SIGTERM);
        let (tx, rx) = std::sync::mpsc::channel();
        super::spawn("test", move || {
            let _ = tx.send((blocked(libc::SIGTERM), blocked(libc::SIGCHLD)));
        })
        .unwrap()
        .join()
        .unwrap();
        assert_eq!(rx.recv().unwrap(), (true, true));
        assert_eq!(blocked(libc::SIGTERM), before);
    }
}
