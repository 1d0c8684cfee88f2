//! Why some bytes are not a lock document.

use super::read::MAX_RECORD_BYTES;

/// Why some bytes are not a lock document.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The file is empty or holds only whitespace.
    #[error("the file is empty")]
    Empty,
    /// The file is longer than any record this crate writes, so it is not
    /// ours, whatever its first bytes are (zeros and whitespace included):
    /// [`Content::Foreign`](crate::inspect::Content::Foreign), never written,
    /// truncated or removed.
    #[error("the file holds {0} bytes or more, more than any owner record (at most {max}): not ours", max = MAX_RECORD_BYTES)]
    TooLarge(usize),
    /// The content begins as this crate writes every record but is not a
    /// whole one: torn, truncated, or zero-filled by a crash. Ours to
    /// overwrite ([`Content::Torn`](crate::inspect::Content::Torn)).
    #[error("the content is not an owner record: {0}")]
    Malformed(String),
    /// The content is not ours: some other tool's file (a script, a
    /// `Cargo.lock`, a PID file, JSON of another shape). Acquire never
    /// writes into it and `reap` leaves it alone ([`Content::Foreign`](crate::inspect::Content::Foreign)).
    #[error("the content is not an owner record of ours (another tool's file?)")]
    Foreign,
}
