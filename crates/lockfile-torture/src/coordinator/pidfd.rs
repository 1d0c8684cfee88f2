//! Killing through a pidfd: a `lockfile run` section or wrapper is found by
//! the PID it wrote on the board, and that PID may be reused by the time
//! the signal goes out.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use anyhow::{Context, Result};
use rustix::process::{Pid, PidfdFlags, Signal};

/// A handle on a process that stays valid when the PID is reused.
pub(super) fn open_pidfd(pid: u32) -> Option<OwnedFd> {
    let pid = Pid::from_raw(i32::try_from(pid).ok()?)?;
    rustix::process::pidfd_open(pid, PidfdFlags::empty()).ok()
}

/// SIGKILLs the process and waits until it has exited (its descriptors are
/// closed by then).
pub(super) fn kill_and_wait(pidfd: &OwnedFd) -> Result<()> {
    match rustix::process::pidfd_send_signal(pidfd.as_fd(), Signal::KILL) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => {}
        Err(e) => return Err(e).context("pidfd_send_signal"),
    }
    let mut fds = [libc::pollfd {
        fd: pidfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    loop {
        // SAFETY: `fds` is a live array of one initialised pollfd.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 1, -1) };
        if n >= 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err).context("poll a pidfd");
        }
    }
}

/// SIGKILLs the process group `pgid` (gone already is fine).
pub(super) fn kill_group(pgid: u32) -> Result<()> {
    let Some(pid) = i32::try_from(pgid).ok().and_then(Pid::from_raw) else {
        return Ok(());
    };
    match rustix::process::kill_process_group(pid, Signal::KILL) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
        Err(e) => Err(e).context("kill a process group"),
    }
}
