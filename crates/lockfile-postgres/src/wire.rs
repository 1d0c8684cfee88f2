//! A bound on every message the server sends, enforced on the socket.
//!
//! tokio-postgres reads a message whole before it looks at it: a server
//! that declares a message of 1 GiB makes the client buffer 1 GiB (and
//! more, as the buffer doubles). So the stream under it follows the
//! protocol's framing (a type byte, then a 4-byte big-endian length that
//! counts itself) and fails the read when a message declares more than
//! [`MAX_MESSAGE`]: nothing past the header is read.
//!
//! On the socket, the client's first message says what comes back: after
//! an SSLRequest, one unframed byte (`S`: TLS follows, and the bound is
//! applied inside it, by the TLS connector (`tls.rs`); anything else: framed messages);
//! after a TLS ClientHello (`sslnegotiation=direct`), TLS; otherwise
//! (the startup message, a cancel request) framed messages from the first
//! byte.

use std::fmt;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The largest message the server may send: 1 MiB. The largest reply to
/// anything this engine sends is a row of `inspect` over all names (a name,
/// an owner record of at most 64 KiB, the history document with its last
/// run's record): far below this. A message above it is a hostile or
/// broken server, never an answer.
pub(crate) const MAX_MESSAGE: u32 = 1 << 20;

/// The SSLRequest code, in place of a protocol version.
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];

/// A TLS handshake record's first byte.
const TLS_HANDSHAKE: u8 = 0x16;

/// A message refused for its declared length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TooLarge {
    /// The message's type byte.
    pub(crate) tag: u8,
    /// Its length as declared (the header's, less itself).
    pub(crate) declared: u32,
}

impl fmt::Display for TooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the server sent a message ({}) of {} bytes, more than the limit of {} bytes for \
             any reply to what lockfile writes: the reply is refused",
            self.tag.escape_ascii(),
            self.declared,
            MAX_MESSAGE
        )
    }
}

impl std::error::Error for TooLarge {}

/// Where the stream is in the protocol's framing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Nothing written yet: the first message decides.
    Start,
    /// An SSLRequest was sent: its one-byte answer comes next.
    Answer,
    /// `filled` bytes of a 5-byte header read.
    Header { filled: usize },
    /// `left` bytes of a message's body still to come.
    Body { left: u32 },
    /// TLS: the bound is applied inside it.
    Tls,
}

/// Follows the framing of what the server sends.
#[derive(Debug)]
pub(crate) struct Framing {
    state: State,
    header: [u8; 5],
}

impl Framing {
    /// Framed from the first byte (inside TLS).
    pub(crate) fn framed() -> Framing {
        Framing {
            state: State::Header { filled: 0 },
            header: [0; 5],
        }
    }

    /// On a socket: decided by the client's first message.
    fn socket() -> Framing {
        Framing {
            state: State::Start,
            header: [0; 5],
        }
    }

    /// The client writes `bytes`.
    fn wrote(&mut self, bytes: &[u8]) {
        if self.state == State::Start && !bytes.is_empty() {
            self.state = if bytes.starts_with(&SSL_REQUEST) {
                State::Answer
            } else if bytes[0] == TLS_HANDSHAKE {
                State::Tls
            } else {
                State::Header { filled: 0 }
            };
        }
    }

    /// The server sent `bytes`: refused when a message in them declares
    /// more than [`MAX_MESSAGE`].
    pub(crate) fn read(&mut self, mut bytes: &[u8]) -> Result<(), TooLarge> {
        while let Some((&first, rest)) = bytes.split_first() {
            match self.state {
                // The server speaks first only to refuse (an error before
                // the startup message): framed.
                State::Start => self.state = State::Header { filled: 0 },
                State::Answer => {
                    self.state = if first == b'S' {
                        State::Tls
                    } else {
                        State::Header { filled: 0 }
                    };
                    bytes = rest;
                }
                State::Tls => return Ok(()),
                State::Header { filled } => {
                    let take = (5 - filled).min(bytes.len());
                    self.header[filled..filled + take].copy_from_slice(&bytes[..take]);
                    bytes = &bytes[take..];
                    if filled + take < 5 {
                        self.state = State::Header {
                            filled: filled + take,
                        };
                        continue;
                    }
                    let len = u32::from_be_bytes([
                        self.header[1],
                        self.header[2],
                        self.header[3],
                        self.header[4],
                    ]);
                    // A length below 4 is tokio-postgres's to refuse.
                    let declared = len.saturating_sub(4);
                    if declared > MAX_MESSAGE {
                        return Err(TooLarge {
                            tag: self.header[0],
                            declared,
                        });
                    }
                    self.state = State::Body { left: declared };
                }
                State::Body { left } => {
                    let take = u32::try_from(bytes.len()).unwrap_or(u32::MAX).min(left);
                    bytes = &bytes[take as usize..];
                    self.state = if left == take {
                        State::Header { filled: 0 }
                    } else {
                        State::Body { left: left - take }
                    };
                }
            }
        }
        // A body of 0 bytes ends at its header.
        if self.state == (State::Body { left: 0 }) {
            self.state = State::Header { filled: 0 };
        }
        Ok(())
    }
}

/// Where a refusal is kept for the connection's client: tokio-postgres
/// ends the connection on the read's error, and its client sees only that
/// the connection closed.
pub(crate) type Refusal = Arc<OnceLock<TooLarge>>;

/// A stream whose reads are refused past [`MAX_MESSAGE`] per message.
#[derive(Debug)]
pub(crate) struct Bounded<S> {
    inner: S,
    framing: Framing,
    refused: Refusal,
}

impl<S> Bounded<S> {
    /// `inner`, framed as a socket is, keeping its refusal in `refused`.
    pub(crate) fn socket(inner: S, refused: Refusal) -> Bounded<S> {
        Bounded {
            inner,
            framing: Framing::socket(),
            refused,
        }
    }

    /// `inner`, framed from its first byte (inside TLS).
    pub(crate) fn framed(inner: S, refused: Refusal) -> Bounded<S> {
        Bounded {
            inner,
            framing: Framing::framed(),
            refused,
        }
    }

    pub(crate) fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Bounded<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(refused) = self.refused.get() {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, *refused)));
        }
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => match this.framing.read(&buf.filled()[before..]) {
                Ok(()) => Poll::Ready(Ok(())),
                Err(refused) => {
                    let _ = this.refused.set(refused);
                    Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, refused)))
                }
            },
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Bounded<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let written = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = written {
            this.framing.wrote(&buf[..n]);
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(tag: u8, len: u32) -> Vec<u8> {
        let mut m = vec![tag];
        m.extend_from_slice(&len.to_be_bytes());
        m
    }

    #[test]
    fn a_message_is_refused_by_its_declared_length_byte_by_byte_too() {
        let mut ok = message(b'D', 4 + 3);
        ok.extend_from_slice(b"abc");
        ok.extend(message(b'Z', 5));
        ok.push(b'I');
        let huge = message(b'D', (1 << 30) + 4);
        let mut whole = Framing::socket();
        whole.wrote(b"\0\0\0\x10startup");
        whole.read(&ok).unwrap();
        assert_eq!(
            whole.read(&huge),
            Err(TooLarge {
                tag: b'D',
                declared: 1 << 30
            })
        );
        let mut split = Framing::framed();
        for b in ok.iter().chain(&huge[..4]) {
            split.read(&[*b]).unwrap();
        }
        assert!(split.read(&huge[4..]).is_err());
        // The limit itself passes.
        Framing::framed()
            .read(&message(b'D', MAX_MESSAGE + 4))
            .unwrap();
    }

    #[test]
    fn the_answer_to_an_ssl_request_is_one_unframed_byte() {
        let mut refused = Framing::socket();
        refused.wrote(&SSL_REQUEST);
        let mut then = b"N".to_vec();
        then.extend(message(b'R', 8));
        then.extend_from_slice(&[0; 4]);
        refused.read(&then).unwrap();
        assert!(refused.read(&message(b'D', u32::MAX)).is_err());
        let mut tls = Framing::socket();
        tls.wrote(&SSL_REQUEST);
        tls.read(b"S\x16\x03\x03\xff\xff").unwrap();
        tls.read(&message(b'D', u32::MAX)).unwrap();
        let mut direct = Framing::socket();
        direct.wrote(&[TLS_HANDSHAKE, 3, 1]);
        direct.read(&message(b'D', u32::MAX)).unwrap();
    }
}
