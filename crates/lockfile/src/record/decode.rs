//! Telling a record of ours from everything else a lock file may hold.

use super::document::LockDocument;
use super::error::DecodeError;
use super::owner::OwnerRecord;
use super::read::MAX_RECORD_BYTES;

impl LockDocument {
    /// Decodes a lock file's content.
    ///
    /// # Errors
    ///
    /// Returns why the bytes are not a lock document: empty, too large, not
    /// UTF-8, not JSON, or JSON of another shape.
    pub(crate) fn decode(bytes: &[u8]) -> Result<LockDocument, DecodeError> {
        // Before anything else: only a whole file can be judged empty, zero
        // filled or torn, and more bytes than any record are not a whole
        // record of ours but the start of someone else's file.
        if bytes.len() > MAX_RECORD_BYTES {
            return Err(DecodeError::TooLarge(bytes.len()));
        }
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(DecodeError::Empty);
        }
        if bytes.iter().all(|b| *b == 0 || b.is_ascii_whitespace()) {
            // What a record looks like after a crash lost its data blocks
            // (ext4 and others can leave them zero-filled): ours, torn.
            return Err(DecodeError::Malformed(
                "only zero bytes (a write lost in a crash?)".to_owned(),
            ));
        }
        let written_by_us = written_by_us(bytes);
        if !written_by_us && !starts_like_a_record(bytes) {
            return Err(DecodeError::Foreign);
        }
        match serde_json::from_slice::<LockDocument>(bytes) {
            Ok(doc) if doc.format == 0 => {
                Err(DecodeError::Malformed("format version 0".to_owned()))
            }
            Ok(doc) => Ok(doc),
            Err(e) if written_by_us => Err(DecodeError::Malformed(e.to_string())),
            // JSON that starts with a "format" key but is not a record of
            // ours (a hand-edited record, or another tool's file) is not ours
            // to overwrite.
            Err(_) => Err(DecodeError::Foreign),
        }
    }

    /// Decodes the content of a file `len` bytes long (by `fstat`), of which
    /// `bytes` are the first (a bounded read). A file longer than any record
    /// is [`DecodeError::TooLarge`](crate::record::DecodeError::TooLarge) whatever its first bytes are: the bytes
    /// past the read are unseen, and may be anyone's data.
    pub(crate) fn decode_file(bytes: &[u8], len: u64) -> Result<LockDocument, DecodeError> {
        if len > MAX_RECORD_BYTES as u64 {
            return Err(DecodeError::TooLarge(
                usize::try_from(len).unwrap_or(usize::MAX),
            ));
        }
        LockDocument::decode(bytes)
    }
}

/// Whether `bytes` begin as this crate's encoder begins every document
/// (`{"format":N,"released":`), or are a beginning of that cut short.
/// Only such bytes can be a torn record of ours.
fn written_by_us(bytes: &[u8]) -> bool {
    const FORMAT_KEY: &[u8] = b"{\"format\":";
    const RELEASED_KEY: &[u8] = b",\"released\":";
    // What a cut-short write leaves after the bytes it got out: nothing, or
    // zeros and padding.
    let significant = |bytes: &[u8]| -> usize {
        bytes
            .iter()
            .rposition(|b| *b != 0 && !b.is_ascii_whitespace())
            .map_or(0, |i| i + 1)
    };
    match bytes.strip_prefix(FORMAT_KEY) {
        Some(rest) => {
            let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
            let rest = &rest[digits..];
            digits > 0
                && (rest.starts_with(RELEASED_KEY)
                    || RELEASED_KEY.starts_with(&rest[..significant(rest)]))
        }
        None => {
            let end = significant(bytes);
            end > 0 && FORMAT_KEY.starts_with(&bytes[..end])
        }
    }
}

/// Whether `bytes` start as every document of ours does, `{"format"`, give or
/// take whitespace (a record pretty-printed by hand still counts).
fn starts_like_a_record(bytes: &[u8]) -> bool {
    const START: &[u8] = b"{\"format\"";
    let mut significant = bytes
        .iter()
        .filter(|b| !b.is_ascii_whitespace())
        .take(START.len());
    START
        .iter()
        .all(|expected| significant.next() == Some(expected))
}

/// Decodes the owner record from a lock file's content (as written by this
/// crate), without touching any file. Useful for tools that copied a lock file
/// away for a post-mortem.
///
/// # Errors
///
/// Returns a [`DecodeError`](crate::record::DecodeError) when the bytes are not a lock document.
///
/// # Examples
///
/// ```
/// let torn = lockfile::record::decode_record(b"{\"format\":1,\"released\":tr").unwrap_err();
/// assert!(torn.to_string().contains("not an owner record"));
/// let other = lockfile::record::decode_record(b"12345\n").unwrap_err();
/// assert_eq!(other, lockfile::record::DecodeError::Foreign);
/// ```
pub fn decode_record(bytes: &[u8]) -> Result<OwnerRecord, DecodeError> {
    LockDocument::decode(bytes).map(|doc| doc.owner)
}
