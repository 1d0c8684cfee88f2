//! What one read of a lock file gave: which file it is, and its content.

use std::fs::File;

use crate::record::{DecodeError, LockDocument};
use crate::sys;

/// What one read of a lock file gave: which file it is, and its content.
/// A directory has no content to read: only its lock is looked at.
// Made once per file and taken apart at once: a box would only cost an
// allocation per file.
#[allow(clippy::large_enum_variant)]
pub(super) enum Read {
    File(Sample),
    Directory { dev: u64, ino: u64 },
}

/// Which file a lock file is, and its content.
pub(super) struct Sample {
    pub(super) dev: u64,
    pub(super) ino: u64,
    /// The file's owner.
    pub(super) uid: u32,
    /// How many bytes of `Scan::buf` are the file's.
    pub(super) len: usize,
    pub(super) doc: Option<LockDocument>,
    pub(super) content_error: Option<DecodeError>,
}

/// Whether `file` no longer starts with exactly `content`.
pub(super) fn changed(file: &File, content: &[u8]) -> bool {
    let mut again = vec![0; content.len() + 1];
    match sys::read_prefix(file, &mut again) {
        Ok(n) => again[..n] != *content,
        Err(_) => true,
    }
}
