//! What a lock file holds, and why a held lock may carry no record of ours:
//! the line between a file we may write and one that is someone else's.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::record::{DecodeError, LockDocument};

/// What a lock file holds, as far as writing a record into it goes.
///
/// Only [`Content::Foreign`](crate::inspect::Content::Foreign) content is someone else's: a lock on such a file
/// is taken (when asked to) without writing anything into it, and `reap`
/// never removes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Content {
    /// An owner record of ours, released or not.
    Record,
    /// Nothing, or only whitespace: the whole file, which is no longer than
    /// a record.
    Empty,
    /// A record of ours that a crash or an interrupted write left incomplete
    /// (or zero-filled): ours to overwrite. Again the whole file, no longer
    /// than a record.
    Torn,
    /// Anything else: a script, data, another tool's lock or PID file, and
    /// any file longer than the longest record of ours (64 KiB), whatever
    /// it begins with.
    Foreign,
}

impl Content {
    /// Classifies a lock file's whole content, as
    /// [`decode_record`](crate::record::decode_record) takes it. More bytes than
    /// the longest record are [`Content::Foreign`](crate::inspect::Content::Foreign), whatever they are.
    ///
    /// # Examples
    ///
    /// ```
    /// use lockfile::inspect::Content;
    /// assert_eq!(Content::of(b""), Content::Empty);
    /// assert_eq!(Content::of(b"#!/bin/sh\necho hi\n"), Content::Foreign);
    /// assert_eq!(Content::of(b"{\"format\":1,\"released\":tr"), Content::Torn);
    /// assert_eq!(Content::of(&[0; 1000]), Content::Torn);
    /// assert_eq!(Content::of(&[0; 65_537]), Content::Foreign);
    /// ```
    pub fn of(bytes: &[u8]) -> Content {
        Content::from_decoded(&LockDocument::decode(bytes).map(|_| ()))
    }

    pub(crate) fn from_decoded<T>(decoded: &Result<T, DecodeError>) -> Content {
        match decoded {
            Ok(_) => Content::Record,
            Err(DecodeError::Empty) => Content::Empty,
            Err(DecodeError::Malformed(_)) => Content::Torn,
            // Longer than any record: only a whole file can be judged empty
            // or torn, and this one was not read whole.
            Err(DecodeError::Foreign | DecodeError::TooLarge(_)) => Content::Foreign,
        }
    }

    /// The name `inspect --json` prints: `record`, `empty`, `torn` or
    /// `foreign`.
    pub fn as_str(self) -> &'static str {
        match self {
            Content::Record => "record",
            Content::Empty => "empty",
            Content::Torn => "torn",
            Content::Foreign => "foreign",
        }
    }
}

impl fmt::Display for Content {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a held lock carries no owner record, by design rather than by
/// accident.
///
/// When several reasons apply, the first of this order is given, both by a
/// guard and by `inspect`: [`Directory`](NoRecord::Directory) (a directory
/// never takes a record), [`Shared`](NoRecord::Shared) (a shared lock never
/// writes one, whatever the file holds), then
/// [`ForeignContent`](NoRecord::ForeignContent), [`ReadOnly`](NoRecord::ReadOnly)
/// and [`Descriptor`](NoRecord::Descriptor).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum NoRecord {
    /// The file holds someone else's content, which is never written over.
    ForeignContent,
    /// The holder may read the file but not write it (its mode, a read-only
    /// mount, an executable that is running), and locked it read-only, as
    /// flock(1) does.
    ReadOnly,
    /// The lock is a directory's, as flock(1) takes on a directory: nothing
    /// in it is created or changed.
    Directory,
    /// The lock is held shared (`LOCK_SH`, flock(1)'s `-s`), by any number of
    /// processes at once, none of which writes a record.
    Shared,
    /// The lock was taken on a descriptor that another process keeps open
    /// (flock(1)'s descriptor form, `flock 9`), and no record could be
    /// written for it safely: see
    /// [`LockOptions::try_acquire_descriptor`](crate::LockOptions::try_acquire_descriptor).
    Descriptor,
}

impl NoRecord {
    /// The name `inspect --json` prints: `foreign_content`, `read_only`,
    /// `directory`, `shared` or `descriptor`.
    pub fn as_str(self) -> &'static str {
        match self {
            NoRecord::ForeignContent => "foreign_content",
            NoRecord::ReadOnly => "read_only",
            NoRecord::Directory => "directory",
            NoRecord::Shared => "shared",
            NoRecord::Descriptor => "descriptor",
        }
    }
}

impl fmt::Display for NoRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NoRecord::ForeignContent => "the file holds content that is not ours",
            NoRecord::ReadOnly => "its holders locked it read-only",
            NoRecord::Directory => "it is a directory",
            NoRecord::Shared => "its holders hold it shared",
            NoRecord::Descriptor => {
                "it was locked through a descriptor that another process keeps open"
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_record_names_match_their_json() {
        for why in [
            NoRecord::ForeignContent,
            NoRecord::ReadOnly,
            NoRecord::Directory,
            NoRecord::Shared,
            NoRecord::Descriptor,
        ] {
            assert_eq!(
                serde_json::to_value(why).unwrap(),
                serde_json::Value::from(why.as_str())
            );
        }
    }
}
