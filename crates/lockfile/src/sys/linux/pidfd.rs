//! pidfds: a handle on one process that a reused PID can never redirect.
//!
//! Eviction opens a pidfd first, then checks through `/proc` that the process
//! behind the PID is the one it means, then checks that the pidfd's process
//! still lives: so the `/proc` reads were about the pidfd's process. From
//! then on it signals only through the pidfd. A PID that is reused at any
//! point after the open is never hit: the pidfd keeps naming the process it
//! was opened for, even once that one has exited.
//!
//! Through `libc::syscall`, because std has no pidfd for a process it did not
//! spawn.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Instant;

/// An open pidfd.
#[derive(Debug)]
pub(crate) struct Pidfd {
    fd: OwnedFd,
    pid: u32,
}

impl Pidfd {
    /// Opens a pidfd for the process that has `pid` in our PID namespace
    /// right now.
    ///
    /// # Errors
    ///
    /// ESRCH when no such process exists; ENOSYS on kernels before 5.3.
    pub(crate) fn open(pid: u32) -> io::Result<Pidfd> {
        let raw = libc::pid_t::try_from(pid)
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))?;
        // SAFETY: pidfd_open(2) takes a PID and a flags word by value and
        // reads no memory of ours. Both are passed as `c_long`, the width the
        // variadic `syscall` reads them as.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_pidfd_open,
                libc::c_long::from(raw),
                0 as libc::c_long,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = i32::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
        // SAFETY: the kernel just returned this descriptor to us (with
        // close-on-exec set, as pidfd_open always does), and nothing else
        // owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Pidfd { fd, pid })
    }

    /// The PID the pidfd was opened for.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Sends `signal` to the pidfd's process, and never to another that
    /// reused its PID.
    ///
    /// # Errors
    ///
    /// ESRCH when the process has exited and been reaped; EPERM when we may
    /// not signal it.
    pub(crate) fn signal(&self, signal: i32) -> io::Result<()> {
        // SAFETY: pidfd_send_signal(2) reads `info` only when it is not null;
        // with null it fills in the signal information as kill(2) does. The
        // descriptor is a pidfd we own and keep open for the call. The
        // integers are passed as `c_long`, the width `syscall` reads.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                libc::c_long::from(self.fd.as_raw_fd()),
                libc::c_long::from(signal),
                std::ptr::null::<libc::siginfo_t>(),
                0 as libc::c_long,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Whether the process has exited (a zombie counts: its files, and so
    /// its locks, are gone).
    pub(crate) fn has_exited(&self) -> bool {
        wait_exited(&[self], Instant::now())[0]
    }
}

/// Waits until every process in `pidfds` has exited, or `until` passes.
/// Returns, for each, whether it has exited. A pidfd polls readable once its
/// process has exited, whoever its parent is.
pub(crate) fn wait_exited(pidfds: &[&Pidfd], until: Instant) -> Vec<bool> {
    let mut exited = vec![false; pidfds.len()];
    loop {
        let mut polled: Vec<libc::pollfd> = pidfds
            .iter()
            .zip(&exited)
            .filter(|(_, gone)| !**gone)
            .map(|(p, _)| libc::pollfd {
                fd: p.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        if polled.is_empty() {
            return exited;
        }
        let left = until.saturating_duration_since(Instant::now());
        // Rounded up, so that a wait never ends a little before `until`.
        let timeout = i32::try_from(left.as_micros().div_ceil(1000)).unwrap_or(i32::MAX);
        // SAFETY: `polled` is a live, exclusively borrowed array of exactly
        // `polled.len()` pollfd structs, which poll(2) may write `revents`
        // into; its descriptors stay open for the call (`pidfds` borrows them).
        let n = unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, timeout) };
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            // Not one of our descriptors can be bad; report nothing as exited.
            return exited;
        }
        for p in polled.iter().filter(|p| p.revents != 0) {
            if let Some(i) = pidfds.iter().position(|q| q.fd.as_raw_fd() == p.fd) {
                exited[i] = true;
            }
        }
        if n == 0 && Instant::now() >= until {
            return exited;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn signals_reach_the_process_and_exits_are_seen() {
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let pidfd = Pidfd::open(child.id()).unwrap();
        assert_eq!(pidfd.pid(), child.id());
        assert!(!pidfd.has_exited());
        assert_eq!(wait_exited(&[&pidfd], Instant::now()), vec![false]);
        pidfd.signal(libc::SIGKILL).unwrap();
        let exited = wait_exited(&[&pidfd], Instant::now() + Duration::from_secs(60));
        assert_eq!(exited, vec![true]);
        // A zombie, not reaped yet: exited all the same.
        assert!(pidfd.has_exited());
        child.wait().unwrap();
        assert_eq!(
            pidfd.signal(0).unwrap_err().raw_os_error(),
            Some(libc::ESRCH),
            "a reaped process is gone for its pidfd too"
        );
        assert_eq!(
            Pidfd::open(0).unwrap_err().raw_os_error(),
            Some(libc::ESRCH)
        );
    }
}
