//! A wake-up for a waiter on several lock files of one directory: inotify
//! tells when one of them was written, or closed by a process that had it
//! open for writing (a holder's release, or the kernel closing a dead
//! holder's descriptors).
//!
//! Only a hint: the waiter tries the lock itself after every wake-up, and
//! tries every file now and then anyway. That is why following a symlink
//! to the directory is harmless here (`/var/lock` is one on Debian).

use std::ffi::OsStr;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

/// The most events one [`DirWatch::wait`] reads: a directory that others
/// keep writing to could feed the queue as fast as it is read. What is left
/// waits for the next call.
const MAX_EVENTS: usize = 1024;

/// An inotify watch of one directory.
pub(crate) struct DirWatch {
    fd: OwnedFd,
    wd: i32,
    buf: Box<[MaybeUninit<u8>]>,
}

impl DirWatch {
    /// Watches `dir` for files written, or closed after being opened for
    /// writing. Fails where inotify cannot be had (the user's limit of
    /// instances or watches reached).
    pub(crate) fn new(dir: &Path) -> io::Result<DirWatch> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
        let wd = inotify::add_watch(
            &fd,
            dir,
            WatchFlags::CLOSE_WRITE | WatchFlags::MODIFY | WatchFlags::ONLYDIR,
        )?;
        Ok(DirWatch {
            fd,
            wd,
            // Room for many events with long names at once.
            buf: vec![MaybeUninit::uninit(); 16 * 1024].into_boxed_slice(),
        })
    }

    /// Ends the watch, so that no more events queue up, and returns its
    /// descriptor for the caller to close once it has let go of its lock:
    /// closing an inotify descriptor waits out a grace period of the
    /// kernel's (several milliseconds, measured), which a waiter that has
    /// just taken its lock should not spend before it returns.
    pub(crate) fn retire(self) -> Option<OwnedFd> {
        let _ = inotify::remove_watch(&self.fd, self.wd);
        Some(self.fd)
    }

    /// Waits up to `timeout` for events, and hands the name of each file
    /// they concern to `seen`. Returns `true` when the kernel's queue
    /// overflowed, so that some events were lost.
    pub(crate) fn wait(
        &mut self,
        timeout: Duration,
        seen: &mut dyn FnMut(&OsStr),
    ) -> io::Result<bool> {
        let timeout = Timespec {
            tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        let mut fds = [PollFd::new(&self.fd, PollFlags::IN)];
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(_) => {}
            // A signal: the caller looks at its clock and comes back.
            Err(rustix::io::Errno::INTR) => return Ok(false),
            Err(e) => return Err(e.into()),
        }
        let mut reader = inotify::Reader::new(self.fd.as_fd(), &mut self.buf);
        let mut overflowed = false;
        for _ in 0..MAX_EVENTS {
            match reader.next() {
                Ok(event) => {
                    if event.events().contains(ReadFlags::QUEUE_OVERFLOW) {
                        overflowed = true;
                    }
                    if let Some(name) = event.file_name() {
                        seen(OsStr::from_bytes(name.to_bytes()));
                    }
                }
                Err(rustix::io::Errno::WOULDBLOCK | rustix::io::Errno::INTR) => break,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(overflowed)
    }
}
