//! The process's start-up, in place of std's.
//!
//! std's runtime start-up on Linux also prepares the report of a stack
//! overflow: it asks glibc for the main thread's stack, which glibc finds by
//! reading and parsing /proc/self/maps with stdio and sscanf, and it sets up
//! an alternate signal stack and SIGSEGV and SIGBUS handlers. That was
//! about a fifth of what a `lockfile run` of a short job costs over
//! flock(1), in peak RSS and in wall time alike (see BENCHMARKS.md). So the
//! binary has its own entry point, which keeps the parts of std's start-up
//! that behaviour depends on:
//!
//! - descriptors 0, 1 and 2 are open, on /dev/null if they were closed, so
//!   that no file we open (the lock file) becomes our stdout or stderr;
//! - SIGPIPE is ignored, so that writing to a closed pipe is an error we
//!   handle, not a signal that kills us (COMMAND still gets it at its
//!   default: std's Command resets it in the child);
//! - a panic exits 101 after its message, as std's `main` does.
//!
//! What it leaves out: a stack overflow kills the process with SIGSEGV
//! without std's "has overflowed its stack" line and abort, and a panic
//! message names the main thread `<unnamed>` rather than `main`.

use std::ffi::{CStr, OsString};
use std::os::unix::ffi::OsStrExt;

/// Prepares the process as described above, then runs `main` on the
/// command line `argc` and `argv`; returns only when `main` panicked.
///
/// # Safety
///
/// `argv` must hold `argc` valid NUL-terminated strings, as the C runtime's
/// arguments to `main` do.
pub unsafe fn start(
    argc: libc::c_int,
    argv: *const *const libc::c_char,
    main: fn(Vec<OsString>),
) -> libc::c_int {
    open_standard_descriptors();
    // SAFETY: signal(2) with an integer signal number and SIG_IGN.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let args = (0..usize::try_from(argc).unwrap_or(0))
        .map(|i| {
            // SAFETY: the caller guarantees `argc` valid strings in `argv`.
            let arg = unsafe { CStr::from_ptr(*argv.add(i)) };
            std::ffi::OsStr::from_bytes(arg.to_bytes()).to_owned()
        })
        .collect();
    match std::panic::catch_unwind(move || main(args)) {
        // `main` exits by itself: returning is the C runtime's exit(0).
        Ok(()) => 0,
        Err(payload) => {
            // As std: a payload whose drop panics must not unwind out of
            // the entry point.
            std::mem::forget(payload);
            use std::io::Write as _;
            let _ = std::io::stdout().flush();
            101
        }
    }
}

/// Opens /dev/null on whichever of descriptors 0, 1 and 2 is closed, as
/// std's start-up does; aborts when it cannot.
fn open_standard_descriptors() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    // SAFETY: poll reads and writes the three live pollfds of `fds`;
    // fcntl(F_GETFD) and open take integers and a NUL-terminated path.
    unsafe {
        let closed: Vec<libc::c_int> = loop {
            if libc::poll(fds.as_mut_ptr(), 3, 0) != -1 {
                break fds
                    .iter()
                    .filter(|p| p.revents & libc::POLLNVAL != 0)
                    .map(|p| p.fd)
                    .collect();
            }
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                // poll unusable (a sandbox): ask each descriptor instead.
                _ => {
                    break (0..3)
                        .filter(|&fd| {
                            libc::fcntl(fd, libc::F_GETFD) == -1
                                && std::io::Error::last_os_error().raw_os_error()
                                    == Some(libc::EBADF)
                        })
                        .collect();
                }
            }
        };
        for _ in closed {
            // open returns the lowest free descriptor: the closed one.
            if libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) == -1 {
                libc::abort();
            }
        }
    }
}
