//! A wake-up for waiters on lock files of one or more directories: inotify
//! tells when one of their files was written, or closed by a process that
//! had it open for writing (a holder's release, or the kernel closing a dead
//! holder's descriptors).
//!
//! Only a hint: the waiter tries the lock itself after every wake-up, and
//! tries every file now and then anyway. That is why following a symlink
//! to the directory is harmless here (`/var/lock` is one on Debian).
//!
//! A slot waiter watches one directory; the process's async waiter
//! (`crate::waiter`) watches every directory that has waiters, through one
//! inotify descriptor, for closes alone, and adds and ends watches as
//! waiters come and go.

use std::ffi::OsStr;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

/// The most events one read of the queue hands on: a directory that others
/// keep writing to could feed the queue as fast as it is read. What is left
/// waits for the next call.
const MAX_EVENTS: usize = 1024;

/// One directory's watch. The kernel gives one watch per directory (inode)
/// and descriptor: watching a directory again, by any path that leads to
/// it, returns the same one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct WatchId(i32);

/// An inotify descriptor and its directory watches.
pub(crate) struct DirWatch {
    fd: OwnedFd,
    /// The watches added and not ended, for [`DirWatch::retire`].
    watched: Vec<WatchId>,
    buf: Box<[MaybeUninit<u8>]>,
}

impl std::fmt::Debug for DirWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the buffer: its bytes are the last events, or uninitialised.
        f.debug_struct("DirWatch")
            .field("fd", &self.fd)
            .field("watched", &self.watched)
            .finish_non_exhaustive()
    }
}

impl DirWatch {
    /// An inotify descriptor without watches. Fails where inotify cannot be
    /// had (the user's limit of instances reached).
    pub(crate) fn new() -> io::Result<DirWatch> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
        Ok(DirWatch {
            fd,
            watched: Vec::new(),
            // Room for many events with long names at once.
            buf: vec![MaybeUninit::uninit(); 16 * 1024].into_boxed_slice(),
        })
    }

    /// Watches `dir` for files written, or closed after being opened for
    /// writing. Fails where the user's limit of watches is reached, or
    /// `dir` is no directory.
    pub(crate) fn watch(&mut self, dir: &Path) -> io::Result<WatchId> {
        self.add(dir, WatchFlags::CLOSE_WRITE | WatchFlags::MODIFY)
    }

    /// Watches `dir` for files closed after being opened for writing, and
    /// not for writes: a release closes (ours after its unlock, and the
    /// kernel a dead holder's descriptors), while a holder that keeps
    /// writing into its locked file (a data file locked in place) would
    /// otherwise wake the waiter for a look at every write.
    #[cfg(feature = "tokio")]
    pub(crate) fn watch_closes(&mut self, dir: &Path) -> io::Result<WatchId> {
        self.add(dir, WatchFlags::CLOSE_WRITE)
    }

    fn add(&mut self, dir: &Path, events: WatchFlags) -> io::Result<WatchId> {
        let wd = inotify::add_watch(&self.fd, dir, events | WatchFlags::ONLYDIR)?;
        let id = WatchId(wd);
        if !self.watched.contains(&id) {
            self.watched.push(id);
        }
        Ok(id)
    }

    /// Ends one watch, once nobody waits on its directory any more. (A
    /// watch whose directory was removed has ended already.)
    #[cfg(feature = "tokio")]
    pub(crate) fn unwatch(&mut self, id: WatchId) {
        self.watched.retain(|&w| w != id);
        let _ = inotify::remove_watch(&self.fd, id.0);
    }

    /// Ends every watch, so that no more events queue up, and returns the
    /// descriptor for the caller to close once it has let go of its lock:
    /// closing an inotify descriptor waits out a grace period of the
    /// kernel's (several milliseconds, measured), which a waiter that has
    /// just taken its lock should not spend before it returns.
    pub(crate) fn retire(self) -> Option<OwnedFd> {
        for id in &self.watched {
            let _ = inotify::remove_watch(&self.fd, id.0);
        }
        Some(self.fd)
    }

    /// The descriptor, for a caller that polls it together with others.
    #[cfg(feature = "tokio")]
    pub(crate) fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Waits up to `timeout` for events, and hands the watch and name of
    /// the file each concerns to `seen`. Returns `true` when the kernel's
    /// queue overflowed, so that some events were lost.
    pub(crate) fn wait(
        &mut self,
        timeout: Duration,
        seen: &mut dyn FnMut(WatchId, &OsStr),
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
        self.read(seen)
    }

    /// Hands on the events queued now, without waiting: the watch and name
    /// of the file each concerns. Returns `true` when the kernel's queue
    /// overflowed, so that some events were lost.
    pub(crate) fn read(&mut self, seen: &mut dyn FnMut(WatchId, &OsStr)) -> io::Result<bool> {
        let mut reader = inotify::Reader::new(self.fd.as_fd(), &mut self.buf);
        let mut overflowed = false;
        for _ in 0..MAX_EVENTS {
            match reader.next() {
                Ok(event) => {
                    if event.events().contains(ReadFlags::QUEUE_OVERFLOW) {
                        overflowed = true;
                    }
                    if let Some(name) = event.file_name() {
                        seen(WatchId(event.wd()), OsStr::from_bytes(name.to_bytes()));
                    }
                }
                Err(rustix::io::Errno::WOULDBLOCK | rustix::io::Errno::INTR) => break,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(overflowed)
    }
}
