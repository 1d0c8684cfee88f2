//! `--ping-log-bytes N`: the last N bytes of COMMAND's output, for the body
//! of the final ping, while everything still reaches the wrapper's own
//! stdout and stderr.
//!
//! The wrapper's own descriptors 1 and 2 are pointed at pipes before
//! COMMAND is spawned, so that COMMAND inherits them as it would inherit
//! the originals, and a thread tees each pipe to the original and keeps the
//! tail. When stdout and stderr are the same file (a terminal, or cron's
//! mail, `2>&1`), one pipe carries both, and their order is kept exactly.
//! The wrapper's own messages written meanwhile go through the pipe too, in
//! order with COMMAND's.
//!
//! The costs, which is why it is opt-in: COMMAND no longer writes to a
//! terminal (`isatty` is false, so colours and progress bars change); and
//! once the wrapper is gone (SIGKILLed, or exited while a background process
//! COMMAND left behind still writes) nobody reads the pipes, so the next
//! write gets SIGPIPE (or EPIPE, where SIGPIPE is ignored).

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long [`Capture::finish`] waits for the pipes to drain once COMMAND
/// exited: a background process that still holds them keeps them open for
/// good, and the final ping must not wait for it.
const DRAIN_PATIENCE: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug)]
enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    fn point_at(self, fd: impl AsFd) -> io::Result<()> {
        let done = match self {
            Stream::Stdout => rustix::stdio::dup2_stdout(fd),
            Stream::Stderr => rustix::stdio::dup2_stderr(fd),
        };
        done.map_err(io::Error::from)
    }

    fn current(self) -> io::Result<OwnedFd> {
        let fd = match self {
            Stream::Stdout => rustix::io::fcntl_dupfd_cloexec(io::stdout().as_fd(), 3),
            Stream::Stderr => rustix::io::fcntl_dupfd_cloexec(io::stderr().as_fd(), 3),
        };
        fd.map_err(io::Error::from)
    }
}

/// The last `limit` bytes seen.
#[derive(Debug)]
struct Tail {
    bytes: VecDeque<u8>,
    limit: usize,
}

impl Tail {
    fn push(&mut self, data: &[u8]) {
        let data = &data[data.len().saturating_sub(self.limit)..];
        let excess = (self.bytes.len() + data.len()).saturating_sub(self.limit);
        self.bytes.drain(..excess);
        self.bytes.extend(data);
    }
}

/// COMMAND's output, passing through the wrapper.
#[derive(Debug)]
pub(crate) struct Capture {
    tail: Arc<Mutex<Tail>>,
    /// The original descriptors, put back by `finish`.
    originals: Vec<(Stream, OwnedFd)>,
    /// One per tee thread: closed at the end of its pipe.
    drained: Vec<Receiver<()>>,
}

impl Capture {
    /// Points stdout and stderr at pipes whose readers keep the last `limit`
    /// bytes. A stream that is closed is left alone.
    ///
    /// # Errors
    ///
    /// When a pipe or a thread cannot be made; the streams are as they were.
    pub(crate) fn start(limit: usize) -> io::Result<Capture> {
        let id = |fd: std::os::fd::BorrowedFd<'_>| {
            rustix::fs::fstat(fd).ok().map(|st| (st.st_dev, st.st_ino))
        };
        let out = id(io::stdout().as_fd());
        let err = id(io::stderr().as_fd());
        let groups: Vec<Vec<Stream>> = match (out, err) {
            (Some(o), Some(e)) if o == e => vec![vec![Stream::Stdout, Stream::Stderr]],
            _ => [(out, Stream::Stdout), (err, Stream::Stderr)]
                .into_iter()
                .filter(|(id, _)| id.is_some())
                .map(|(_, s)| vec![s])
                .collect(),
        };
        let mut capture = Capture {
            tail: Arc::new(Mutex::new(Tail {
                bytes: VecDeque::new(),
                limit,
            })),
            originals: Vec::new(),
            drained: Vec::new(),
        };
        for streams in groups {
            if let Err(e) = capture.divert(&streams) {
                capture.restore();
                return Err(e);
            }
        }
        Ok(capture)
    }

    /// One pipe for `streams`, teed to the first one's original.
    fn divert(&mut self, streams: &[Stream]) -> io::Result<()> {
        let (reader, writer) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        let target = File::from(streams[0].current()?);
        let (done, drained) = channel();
        let tail = Arc::clone(&self.tail);
        crate::thread::spawn("lockfile-tee", move || {
            tee(File::from(reader), target, &tail);
            drop(done);
        })?;
        self.drained.push(drained);
        for &stream in streams {
            let original = stream.current()?;
            stream.point_at(&writer)?;
            self.originals.push((stream, original));
        }
        // `writer` closes here: the pipe's write end now lives as our
        // stdout (and stderr), and in COMMAND once it is spawned.
        Ok(())
    }

    fn restore(&mut self) {
        for (stream, original) in self.originals.drain(..) {
            let _ = stream.point_at(&original);
        }
    }

    /// Puts the original stdout and stderr back, waits a moment for what
    /// COMMAND wrote last to come through, and returns the tail.
    pub(crate) fn finish(mut self) -> Vec<u8> {
        self.restore();
        let deadline = Instant::now() + DRAIN_PATIENCE;
        for drained in &self.drained {
            let _ = drained.recv_timeout(deadline.saturating_duration_since(Instant::now()));
        }
        let tail = self.tail.lock().unwrap_or_else(|e| e.into_inner());
        tail.bytes.iter().copied().collect()
    }
}

/// Copies `reader` to `target` until the last writer closes the pipe,
/// keeping the tail. A target that fails (a closed terminal) is given up,
/// but the pipe is still read, so that COMMAND never blocks on it.
fn tee(mut reader: File, mut target: File, tail: &Mutex<Tail>) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut target_ok = true;
    loop {
        match reader.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if target_ok {
                    target_ok = target.write_all(&buf[..n]).is_ok();
                }
                tail.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(&buf[..n]);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_bytes() {
        let mut t = Tail {
            bytes: VecDeque::new(),
            limit: 5,
        };
        t.push(b"abc");
        t.push(b"def");
        assert_eq!(t.bytes.iter().copied().collect::<Vec<u8>>(), b"bcdef");
        t.push(b"0123456789");
        assert_eq!(t.bytes.iter().copied().collect::<Vec<u8>>(), b"56789");
        let mut none = Tail {
            bytes: VecDeque::new(),
            limit: 0,
        };
        none.push(b"abc");
        assert!(none.bytes.is_empty());
    }
}
