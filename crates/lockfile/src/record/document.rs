//! The whole content of a lock file, and the fixed prefix that lets release
//! mark it with one small write.

use std::cell::RefCell;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::owner::OwnerRecord;
use crate::history::LastRun;
use crate::rfc3339;
use crate::tick::Claim;

/// The format version as a literal, so that the record's fixed prefix can be
/// spelled from it at compile time (see [`RELEASED_PREFIX`]).
macro_rules! format_version {
    () => {
        1
    };
}

/// The on-disk format version written into every lock file.
pub const FORMAT_VERSION: u32 = format_version!();

/// Records are padded with spaces to a multiple of this many bytes, so that
/// rewriting a record in place almost never needs an `ftruncate`.
pub(super) const RECORD_BLOCK: usize = 512;

/// The whole content of a lock file: the record plus the file's own history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct LockDocument {
    /// [`FORMAT_VERSION`](crate::record::FORMAT_VERSION) when written.
    pub(crate) format: u32,
    /// Set when the owner released the lock cleanly; a record that was never
    /// released but whose kernel lock is free is a dead owner's litter.
    pub(crate) released: bool,
    /// The last time a holder reported a successful run (see
    /// `LockGuard::record_success`). Carried from one holder to the next, so
    /// it comes right after the flag, at a fixed offset: see [`peek`].
    #[serde(
        default,
        with = "rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) last_success: Option<SystemTime>,
    /// How the last finished run ended, carried like the last success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    // Boxed: most documents have none, and a guard carries its document.
    pub(crate) last_run: Option<Box<LastRun>>,
    /// The last run's claim on its tick (`--once-per`), carried like the
    /// last run, until the next claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) last_claimed_tick: Option<Box<Claim>>,
    pub(crate) owner: OwnerRecord,
}

/// What `acquire` needs to know of the previous document, read without
/// parsing it: whether it was released, and whether it carries a success.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Peek {
    pub(crate) released: bool,
    /// It carries a history (a last success, a last run) to hand on.
    pub(crate) has_history: bool,
}

/// Peeks at a document this crate wrote; `None` for anything else (empty,
/// debris, another format), which `acquire` simply overwrites. Only a peek
/// that finds something worth carrying (a success) or reporting (an owner
/// that never released) costs `acquire` a full parse, which also makes sure
/// the rest of the document is a record and not debris.
pub(crate) fn peek(bytes: &[u8]) -> Option<Peek> {
    let rest = bytes.strip_prefix(RELEASED_PREFIX.as_bytes())?;
    let (released, rest) = if let Some(rest) = rest.strip_prefix(b"false") {
        (false, rest)
    } else {
        (true, rest.strip_prefix(b"true")?)
    };
    Some(Peek {
        released,
        has_history: {
            let rest = rest.trim_ascii_start();
            rest.starts_with(b",\"last_success\":\"")
                || rest.starts_with(b",\"last_run\":{")
                || rest.starts_with(b",\"last_claimed_tick\":{")
        },
    })
}

/// The byte offset of the `released` flag's value in every encoded document.
/// Release overwrites these five bytes with `true ` instead of rewriting the
/// whole record: one small `pwrite`, no serialisation, no allocation.
pub(crate) const RELEASED_FLAG_OFFSET: usize = RELEASED_PREFIX.len();
/// How every document this version writes begins; spelled from
/// [`FORMAT_VERSION`](crate::record::FORMAT_VERSION), so a version bump moves the flag with it.
pub(super) const RELEASED_PREFIX: &str =
    concat!("{\"format\":", format_version!(), ",\"released\":");
pub(crate) const RELEASED_TRUE: &[u8; 5] = b"true ";

impl LockDocument {
    pub(crate) fn new(
        owner: OwnerRecord,
        last_success: Option<SystemTime>,
        last_run: Option<Box<LastRun>>,
    ) -> LockDocument {
        LockDocument {
            format: FORMAT_VERSION,
            released: false,
            owner,
            last_success,
            last_run,
            last_claimed_tick: None,
        }
    }

    /// Encodes the document into `buf` (cleared first), padded with spaces and
    /// a final newline to a multiple of [`RECORD_BLOCK`] bytes. Padding is valid
    /// JSON whitespace, so `jq` and any JSON parser read the file as is.
    pub(crate) fn encode_into(&self, buf: &mut Vec<u8>) {
        buf.clear();
        debug_assert_eq!(self.format, FORMAT_VERSION, "RELEASED_PREFIX spells it");
        serde_json::to_writer(&mut *buf, self).expect("a lock document always serialises");
        pad(buf);
    }

    /// Encodes the document as [`encode_into`](Self::encode_into) does, into
    /// a buffer that the thread keeps, and hands the bytes to `write`: the
    /// lock's hot path allocates nothing for them.
    pub(crate) fn encode_then<R>(&self, write: impl FnOnce(&[u8]) -> R) -> R {
        thread_local! {
            static BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
        }
        BUF.with(|cell| match cell.try_borrow_mut() {
            Ok(mut buf) => {
                self.encode_into(&mut buf);
                let written = write(&buf);
                // A huge record (a very long job name) is not kept around.
                if buf.capacity() > 4 * RECORD_BLOCK {
                    *buf = Vec::new();
                }
                written
            }
            // Only if `write` itself encoded a document.
            Err(_) => {
                let mut buf = Vec::new();
                self.encode_into(&mut buf);
                write(&buf)
            }
        })
    }
}

/// The length of a document of `len` bytes once padded: whole blocks, with
/// room for the final newline.
fn padded_len(len: usize) -> usize {
    (len + 1).div_ceil(RECORD_BLOCK) * RECORD_BLOCK
}

/// Pads the encoded document in `buf` with spaces and a final newline.
fn pad(buf: &mut Vec<u8>) {
    debug_assert!(buf.starts_with(RELEASED_PREFIX.as_bytes()));
    buf.resize(padded_len(buf.len()) - 1, b' ');
    buf.push(b'\n');
}
