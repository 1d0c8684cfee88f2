//! COMMAND's output passing through the wrapper, for two options:
//! `--ping-log-bytes N`, the last N bytes for the body of the final ping,
//! while everything still reaches the wrapper's own stdout and stderr; and
//! `--output-on-failure`, which keeps it all instead (bounded: see
//! `output.rs`), for the run to print only if it fails. Together, the ping
//! gets the tail either way.
//!
//! The wrapper's own descriptors 1 and 2 are pointed at pipes before
//! COMMAND is spawned, so that COMMAND inherits them as it would inherit
//! the originals, and a thread reads each pipe, keeps the tail, and passes
//! what it reads on to the original or keeps it. When stdout and stderr are
//! the same file (a terminal, or cron's mail, `2>&1`), one pipe carries
//! both, and their order is kept exactly; otherwise each keeps its own
//! order, and how the two interleaved is lost. The wrapper's own messages
//! written meanwhile go through the pipe too, in order with COMMAND's.
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

use crate::run::output::Kept;

/// How long [`Capture::finish`] waits for the pipes to drain once COMMAND
/// exited: a background process that still holds them keeps them open for
/// good, and neither the final ping nor the wrapper's exit must wait for
/// it.
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

    fn write_all(self, kept: &Kept) -> io::Result<()> {
        match self {
            Stream::Stdout => kept.write_to(&mut io::stdout().lock()),
            Stream::Stderr => kept.write_to(&mut io::stderr().lock()),
        }
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

/// What a pipe's reader does with what it reads, besides the tail.
#[derive(Debug)]
enum Sink {
    /// Passes it on to the original stream.
    Through(File),
    /// Keeps it, until `finish` takes it (after which it is dropped).
    Keep(Arc<Mutex<Option<Kept>>>),
}

/// COMMAND's output, passing through the wrapper.
#[derive(Debug)]
pub(crate) struct Capture {
    tail: Arc<Mutex<Tail>>,
    /// With `--output-on-failure`: the most each pipe keeps.
    keep: Option<u64>,
    /// The original descriptors, put back by `finish`.
    originals: Vec<(Stream, OwnedFd)>,
    /// One per reader thread: closed at the end of its pipe.
    drained: Vec<Receiver<()>>,
    /// What each pipe keeps, and the stream it goes back to.
    kept: Vec<(Stream, Arc<Mutex<Option<Kept>>>)>,
}

/// What [`Capture::finish`] returns.
#[derive(Debug, Default)]
pub(crate) struct Captured {
    /// The last bytes of the output, both streams, for the ping.
    pub(crate) tail: Vec<u8>,
    /// What the pipes kept, with where each goes back.
    kept: Vec<(Stream, Kept)>,
}

impl Captured {
    /// Whether the streams carried nothing that was kept.
    pub(crate) fn nothing_kept(&self) -> bool {
        self.kept.iter().all(|(_, kept)| kept.is_empty())
    }

    /// Writes what was kept back to the stream it was written to (stdout,
    /// or stderr, or stdout for both when they are one file). A stream that
    /// fails (closed) is given up; the others are still written.
    pub(crate) fn print_kept(&self) {
        for (stream, kept) in &self.kept {
            if let Err(e) = stream.write_all(kept) {
                errln!("lockfile: cannot print the command's output: {e}");
            }
        }
    }
}

impl Capture {
    /// Points stdout and stderr at pipes whose readers keep the last `tail`
    /// bytes, and with `keep`, keep up to that much of each pipe rather
    /// than pass it on. A stream that is closed is left alone.
    ///
    /// # Errors
    ///
    /// When a pipe or a thread cannot be made; the streams are as they were.
    pub(crate) fn start(tail: usize, keep: Option<u64>) -> io::Result<Capture> {
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
                limit: tail,
            })),
            keep,
            originals: Vec::new(),
            drained: Vec::new(),
            kept: Vec::new(),
        };
        for streams in groups {
            if let Err(e) = capture.divert(&streams) {
                capture.restore();
                return Err(e);
            }
        }
        Ok(capture)
    }

    /// One pipe for `streams`, passed on to (or kept for) the first one.
    fn divert(&mut self, streams: &[Stream]) -> io::Result<()> {
        let (reader, writer) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        let sink = match self.keep {
            None => Sink::Through(File::from(streams[0].current()?)),
            Some(limit) => {
                let kept = Arc::new(Mutex::new(Some(Kept::new(limit))));
                self.kept.push((streams[0], Arc::clone(&kept)));
                Sink::Keep(kept)
            }
        };
        let (done, drained) = channel();
        let tail = Arc::clone(&self.tail);
        crate::thread::spawn("lockfile-tee", move || {
            tee(File::from(reader), sink, &tail);
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
    /// COMMAND wrote last to come through, and returns the tail and what
    /// was kept. What a background process writes later is read still (so
    /// that it never blocks), but no longer kept.
    pub(crate) fn finish(mut self) -> Captured {
        self.restore();
        let deadline = Instant::now() + DRAIN_PATIENCE;
        for drained in &self.drained {
            let _ = drained.recv_timeout(deadline.saturating_duration_since(Instant::now()));
        }
        let kept = self
            .kept
            .iter()
            .filter_map(|(stream, kept)| Some((*stream, lock(kept).take()?)))
            .collect();
        let tail = lock(&self.tail).bytes.iter().copied().collect();
        Captured { tail, kept }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Reads `reader` until the last writer closes the pipe, keeping the tail,
/// and passes each read on to `sink`. A stream that fails (a closed
/// terminal) is given up, but the pipe is still read, so that COMMAND never
/// blocks on it.
fn tee(mut reader: File, mut sink: Sink, tail: &Mutex<Tail>) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut target_ok = true;
    loop {
        match reader.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                match &mut sink {
                    Sink::Through(target) if target_ok => {
                        target_ok = target.write_all(&buf[..n]).is_ok();
                    }
                    Sink::Through(_) => {}
                    Sink::Keep(kept) => {
                        if let Some(kept) = lock(kept).as_mut() {
                            kept.push(&buf[..n]);
                        }
                    }
                }
                lock(tail).push(&buf[..n]);
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
