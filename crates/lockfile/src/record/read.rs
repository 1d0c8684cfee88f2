//! Reading a lock file's content: a bounded read, so that a huge file that is
//! not ours costs no more than a record would.

use std::borrow::Cow;
use std::fs::File;
use std::io;

use crate::sys;

/// A lock file larger than this is not one of ours; only this much is read.
pub(crate) const MAX_RECORD_BYTES: usize = 64 * 1024;

/// The first read of a lock file's content: our records are 512 bytes unless
/// a job name is very long.
pub(crate) const SMALL_READ: usize = 4096;

/// A lock file's content, at most `MAX_RECORD_BYTES + 1` bytes of it (more
/// means "too large to be a record"). A small buffer on the stack serves our
/// records, and only a larger file (a very long job name, or debris) costs a
/// second, larger read.
pub(crate) fn read_content<'a>(
    file: &File,
    small: &'a mut [u8; SMALL_READ],
) -> io::Result<Cow<'a, [u8]>> {
    let n = sys::read_prefix(file, small)?;
    if n < small.len() {
        return Ok(Cow::Borrowed(&small[..n]));
    }
    let mut large = vec![0; MAX_RECORD_BYTES + 1];
    let n = sys::read_prefix(file, &mut large)?;
    large.truncate(n);
    Ok(Cow::Owned(large))
}
