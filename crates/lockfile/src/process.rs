//! A handle on one process that a reused PID can never redirect, for a
//! program that must signal processes it did not spawn itself: `lockfile
//! run` stops every descendant of COMMAND with it once its wrapper is gone.
//!
//! A PID names whichever process has it now. One that exited and was reaped
//! frees its PID for the next fork, so a PID read from `/proc` a moment ago
//! may name an unrelated process by the time it is signalled. A handle is
//! opened on the process that has the PID at the moment of the open and
//! keeps naming that one: [`ProcessHandle::signal`] never reaches another,
//! and what `/proc` says about the PID is believed only while the handle's
//! process is seen alive after the read ([`ProcessHandle::parent`]).
//!
//! # Platform Notes
//!
//! Linux 5.3 or later (a pidfd). Elsewhere [`ProcessHandle::open`] fails
//! with [`std::io::ErrorKind::Unsupported`].

use std::io;

use crate::sys;

/// A handle on one process (a pidfd on Linux), closed when dropped.
#[derive(Debug)]
pub struct ProcessHandle(sys::Pidfd);

impl ProcessHandle {
    /// Opens a handle on the process that has `pid` in our PID namespace
    /// right now.
    ///
    /// # Errors
    ///
    /// ESRCH when no process has that PID; ENOSYS on Linux before 5.3;
    /// [`std::io::ErrorKind::Unsupported`] on other systems.
    pub fn open(pid: u32) -> io::Result<ProcessHandle> {
        sys::Pidfd::open(pid).map(ProcessHandle)
    }

    /// The PID the handle was opened for.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.0.pid()
    }

    /// Sends `signal` (a signal number, such as `libc::SIGKILL`) to the
    /// handle's process, and never to another that reused its PID.
    ///
    /// # Errors
    ///
    /// ESRCH when the process has exited and been reaped; EPERM when we may
    /// not signal it.
    pub fn signal(&self, signal: i32) -> io::Result<()> {
        self.0.signal(signal)
    }

    /// Whether the process has exited (a zombie not reaped yet counts).
    #[must_use]
    pub fn has_exited(&self) -> bool {
        self.0.has_exited()
    }

    /// The PID of the process's parent, read from `/proc` and believed only
    /// because the handle's process was still alive after the read, so that
    /// the read was about it and not about a process that reused its PID.
    /// `None` once it has exited, or where `/proc` cannot tell.
    #[must_use]
    pub fn parent(&self) -> Option<u32> {
        let stat = sys::process_stat(self.0.pid())?;
        (!stat.exited && !self.0.has_exited()).then_some(stat.parent)
    }
}

#[cfg(all(test, target_os = "linux", not(lockfile_fallback)))]
mod tests {
    use super::*;

    #[test]
    fn names_its_process_and_that_process_only() {
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let handle = ProcessHandle::open(child.id()).unwrap();
        assert_eq!(handle.pid(), child.id());
        assert_eq!(handle.parent(), Some(std::process::id()));
        assert!(!handle.has_exited());
        handle.signal(libc::SIGKILL).unwrap();
        child.wait().unwrap();
        assert!(handle.has_exited());
        assert_eq!(
            handle.parent(),
            None,
            "an exited process has no parent to believe"
        );
        assert_eq!(
            handle.signal(0).unwrap_err().raw_os_error(),
            Some(libc::ESRCH),
            "a reaped process is gone for its handle too"
        );
    }
}
