//! The waiter thread's doorbell: a pipe that futures write a byte into (a
//! new waiter, a cancelled one), and that the thread polls beside its
//! inotify descriptor. A pipe rather than an eventfd, so that the fallback
//! for other Unix systems waits the same way.

use std::io::{self, PipeReader, PipeWriter, Read as _, Write as _};
use std::os::fd::{AsFd, BorrowedFd};

/// The end the thread polls and drains.
#[derive(Debug)]
pub(super) struct Bell(PipeReader);

/// The end futures ring.
#[derive(Debug)]
pub(super) struct Ringer(PipeWriter);

/// A new doorbell. Both ends are non-blocking: a full pipe has rung
/// already, and an empty one is drained.
pub(super) fn doorbell() -> io::Result<(Bell, Ringer)> {
    let (reader, writer) = io::pipe()?;
    rustix::io::ioctl_fionbio(&reader, true)?;
    rustix::io::ioctl_fionbio(&writer, true)?;
    Ok((Bell(reader), Ringer(writer)))
}

impl Ringer {
    /// Wakes the thread. Never blocks: when the pipe is full, the thread
    /// has more than enough rings to read.
    pub(super) fn ring(&self) {
        let _ = (&self.0).write(&[1]);
    }
}

impl Bell {
    /// Reads every ring so far, so that the next poll sleeps.
    pub(super) fn drain(&self) {
        let mut buf = [0u8; 64];
        while let Ok(n) = (&self.0).read(&mut buf) {
            if n < buf.len() {
                break;
            }
        }
    }
}

impl AsFd for Bell {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}
