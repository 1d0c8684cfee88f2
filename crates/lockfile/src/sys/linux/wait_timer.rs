//! Bounded waits in the kernel's own flock(2): a per-thread POSIX timer sends
//! a signal at the deadline, so the wait wakes the moment the holder releases
//! and uses no CPU meanwhile. Its own file, because it holds the `unsafe`
//! calls (signal disposition, POSIX timers) that rustix does not wrap.

use std::io;
use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use rustix::fs::FlockOperation;

use crate::sys::{LockMode, poll_until};

/// The signal that wakes a bounded wait. A real-time signal, because those
/// are the least likely to be in use by the application.
fn wake_signal() -> libc::c_int {
    libc::SIGRTMAX() - 3
}

extern "C" fn wake_handler(_: libc::c_int) {}

/// Makes sure `wake_signal()` runs our no-op handler, installing it when the
/// signal has its default disposition. Returns false when the application
/// uses the signal itself: bounded waits then fall back to polling.
fn wake_signal_ready() -> bool {
    let sig = wake_signal();
    let handler = wake_handler as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: a zeroed sigaction is a valid "no handler, empty mask" value,
    // and sigaction only reads `new` and writes `old`, both live locals.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
            return false;
        }
        if old.sa_sigaction == handler {
            return true;
        }
        if old.sa_sigaction != libc::SIG_DFL {
            return false;
        }
        let mut new: libc::sigaction = std::mem::zeroed();
        new.sa_sigaction = handler;
        // No SA_RESTART: the whole point is that flock(2) returns EINTR.
        new.sa_flags = 0;
        libc::sigemptyset(&mut new.sa_mask);
        libc::sigaction(sig, &new, std::ptr::null_mut()) == 0
    }
}

/// A POSIX timer that sends `wake_signal()` to the calling thread at a deadline
/// and every millisecond after it, with the signal unblocked in this thread.
/// The repeats close the race where the first signal lands just before the
/// thread enters flock(2).
struct WakeTimer {
    timer: libc::timer_t,
    /// The thread's mask to put back, when arming changed it (the thread had
    /// the signal blocked); `None` spares the wake-up that syscall.
    old_mask: Option<libc::sigset_t>,
}

impl WakeTimer {
    fn arm(after: Duration) -> io::Result<WakeTimer> {
        let sig = wake_signal();
        // SAFETY: every pointer handed to libc points at a live local or
        // field; the sigevent is fully initialised (zeroed, then filled in).
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            let mut old_mask: libc::sigset_t = std::mem::zeroed();
            let rc = libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, &mut old_mask);
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
            let mut sev: libc::sigevent = std::mem::zeroed();
            sev.sigev_notify = libc::SIGEV_THREAD_ID;
            sev.sigev_signo = sig;
            sev.sigev_notify_thread_id = rustix::thread::gettid().as_raw_nonzero().get();
            let mut timer: libc::timer_t = std::ptr::null_mut();
            if libc::timer_create(libc::CLOCK_MONOTONIC, &mut sev, &mut timer) != 0 {
                let err = io::Error::last_os_error();
                libc::pthread_sigmask(libc::SIG_SETMASK, &old_mask, std::ptr::null_mut());
                return Err(err);
            }
            let was_blocked = libc::sigismember(&old_mask, sig) == 1;
            let wake = WakeTimer {
                timer,
                old_mask: was_blocked.then_some(old_mask),
            };
            let after = after.max(Duration::from_nanos(1));
            let spec = libc::itimerspec {
                it_value: libc::timespec {
                    tv_sec: after.as_secs().try_into().unwrap_or(libc::time_t::MAX),
                    tv_nsec: after.subsec_nanos().into(),
                },
                it_interval: libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 1_000_000,
                },
            };
            if libc::timer_settime(wake.timer, 0, &spec, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(wake)
        }
    }
}

impl Drop for WakeTimer {
    fn drop(&mut self) {
        // SAFETY: `timer` came from timer_create and is deleted exactly once;
        // `old_mask` is the mask pthread_sigmask returned in `arm`.
        unsafe {
            // Delete first, while the signal is still unblocked: a signal that
            // was already pending is delivered (to the no-op handler) as this
            // syscall returns, instead of interrupting the caller's next one.
            libc::timer_delete(self.timer);
            if let Some(old_mask) = &self.old_mask {
                libc::pthread_sigmask(libc::SIG_SETMASK, old_mask, std::ptr::null_mut());
            }
        }
    }
}

/// Blocks in flock(2) until the lock is taken (`Ok(true)`) or the deadline
/// passes (`Ok(false)`). The wait is the kernel's own: it wakes the moment
/// the holder releases, and uses no CPU meanwhile.
pub(crate) fn lock_until(
    fd: BorrowedFd<'_>,
    mode: LockMode,
    deadline: Instant,
) -> io::Result<bool> {
    let now = Instant::now();
    if now >= deadline || !wake_signal_ready() {
        return poll_until(fd, mode, deadline);
    }
    let _timer = WakeTimer::arm(deadline - now)?;
    let operation = match mode {
        LockMode::Exclusive => FlockOperation::LockExclusive,
        LockMode::Shared => FlockOperation::LockShared,
    };
    loop {
        match rustix::fs::flock(fd, operation) {
            Ok(()) => return Ok(true),
            Err(rustix::io::Errno::INTR) if Instant::now() >= deadline => return Ok(false),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::os::fd::AsFd;

    use super::*;

    #[test]
    fn a_bounded_wait_on_a_held_lock_times_out_and_leaves_no_signal_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lock");
        let holder = File::create(&path).unwrap();
        holder.lock().unwrap();
        let waiter = File::open(&path).unwrap();
        let start = Instant::now();
        let got = lock_until(
            waiter.as_fd(),
            LockMode::Exclusive,
            start + Duration::from_millis(30),
        )
        .unwrap();
        assert!(!got);
        assert!(start.elapsed() >= Duration::from_millis(30));
        // A syscall after the wait is not interrupted by a late timer signal.
        std::thread::sleep(Duration::from_millis(5));
        drop(holder);
        let deadline = Instant::now() + Duration::from_secs(5);
        assert!(lock_until(waiter.as_fd(), LockMode::Exclusive, deadline).unwrap());
    }

    #[test]
    fn a_bounded_shared_wait_ends_when_the_exclusive_holder_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lock");
        let holder = File::create(&path).unwrap();
        holder.lock().unwrap();
        let (a, b) = (File::open(&path).unwrap(), File::open(&path).unwrap());
        let soon = Instant::now() + Duration::from_millis(20);
        assert!(!lock_until(a.as_fd(), LockMode::Shared, soon).unwrap());
        drop(holder);
        let deadline = Instant::now() + Duration::from_secs(5);
        assert!(lock_until(a.as_fd(), LockMode::Shared, deadline).unwrap());
        // Shared holders hold it together.
        assert!(lock_until(b.as_fd(), LockMode::Shared, deadline).unwrap());
    }

    fn wake_signal_blocked() -> bool {
        // SAFETY: queries the calling thread's mask into a live local.
        unsafe {
            let mut mask: libc::sigset_t = std::mem::zeroed();
            assert_eq!(
                libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut mask),
                0
            );
            libc::sigismember(&mask, wake_signal()) == 1
        }
    }

    fn set_wake_signal_blocked(blocked: bool) {
        let how = if blocked {
            libc::SIG_BLOCK
        } else {
            libc::SIG_UNBLOCK
        };
        // SAFETY: changes the calling thread's mask from a live local set.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, wake_signal());
            assert_eq!(libc::pthread_sigmask(how, &set, std::ptr::null_mut()), 0);
        }
    }

    /// The wait unblocks its signal for itself only: a thread that had it
    /// blocked has it blocked again afterwards, one that had not, not.
    #[test]
    fn a_bounded_wait_leaves_the_threads_signal_mask_as_it_found_it() {
        std::thread::spawn(|| {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("t.lock");
            let holder = File::create(&path).unwrap();
            holder.lock().unwrap();
            let waiter = File::open(&path).unwrap();
            for blocked in [true, false, true] {
                set_wake_signal_blocked(blocked);
                let soon = Instant::now() + Duration::from_millis(5);
                assert!(!lock_until(waiter.as_fd(), LockMode::Exclusive, soon).unwrap());
                assert_eq!(wake_signal_blocked(), blocked, "blocked before: {blocked}");
            }
        })
        .join()
        .unwrap();
    }
}
