//! The lock file as its holder writes it: a document written over the
//! previous content, never longer than a record. Both the acquire (the first
//! record) and the guard (a success, a run's end, the release's mark) write
//! through here.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::Operation;
use crate::record::{LockDocument, MAX_RECORD_BYTES, RELEASED_FLAG_OFFSET, RELEASED_TRUE};
use crate::{Error, Result};

/// Encodes `doc` and writes it at the start of `file`, whose content is
/// `old_len` bytes long, cutting off what a longer previous content leaves
/// behind. Returns the length written, or, without writing anything, the
/// length of a document longer than [`MAX_RECORD_BYTES`]: a file that long
/// would be someone else's.
pub(crate) fn write_document(
    file: &File,
    path: &Path,
    doc: &LockDocument,
    old_len: usize,
) -> Result<Result<usize, usize>> {
    let write_err = |e| Error::from_io(Operation::Write, path, e);
    doc.encode_then(|buf| {
        if buf.len() > MAX_RECORD_BYTES {
            return Ok(Err(buf.len()));
        }
        file.write_all_at(buf, 0).map_err(write_err)?;
        // The previous content might be longer (a larger record, or a torn
        // one): cut it off. It is ours: no longer than a record.
        if old_len > buf.len() {
            file.set_len(buf.len() as u64).map_err(write_err)?;
        }
        Ok(Ok(buf.len()))
    })
}

/// Marks the record in `file` released: five bytes over its flag, one small
/// write, no encoding.
pub(crate) fn mark_released(file: &File, path: &Path) -> Result<()> {
    file.write_all_at(RELEASED_TRUE, RELEASED_FLAG_OFFSET as u64)
        .map_err(|e| Error::from_io(Operation::Write, path, e))
}

/// The refusal of a record `size` bytes long.
pub(crate) fn too_large(path: &Path, size: usize, job_len: usize) -> Error {
    Error::RecordTooLarge {
        op: Operation::Write,
        path: path.to_path_buf(),
        size,
        max: MAX_RECORD_BYTES,
        job_len,
    }
}
