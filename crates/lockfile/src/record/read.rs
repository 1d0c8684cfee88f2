//! Reading a lock file's content: a bounded read, so that a huge file that is
//! not ours costs no more than a record would.

use std::borrow::Cow;
use std::fs::File;
use std::io;
use std::mem::MaybeUninit;

use crate::sys;

/// The longest record this crate writes, and so the longest file that may be
/// one of ours: a longer file is someone else's, whatever it holds (a disk
/// image that starts with zeros, a text that starts with blank lines), and
/// is never written, truncated or removed. Only this much (and one byte
/// more) is ever read.
pub(crate) const MAX_RECORD_BYTES: usize = 64 * 1024;

/// The first read of a lock file's content: our records are 512 bytes unless
/// a job name is very long.
pub(crate) const SMALL_READ: usize = 4096;

/// The buffer of a lock file's first read, left uninitialised: zeroing it
/// would cost the lock's hot path a 4 KiB memset that the read overwrites.
pub(crate) struct SmallRead([MaybeUninit<u8>; SMALL_READ]);

impl SmallRead {
    pub(crate) fn new() -> SmallRead {
        SmallRead([MaybeUninit::uninit(); SMALL_READ])
    }
}

/// A lock file's content, at most `MAX_RECORD_BYTES + 1` bytes of it (more
/// means "too large to be a record"). A small buffer on the stack serves our
/// records, and only a larger file (a very long job name, or debris) costs a
/// second, larger read.
pub(crate) fn read_content<'a>(file: &File, small: &'a mut SmallRead) -> io::Result<Cow<'a, [u8]>> {
    let content = sys::read_prefix_uninit(file, &mut small.0)?;
    if content.len() < SMALL_READ {
        return Ok(Cow::Borrowed(content));
    }
    let mut large = vec![0; MAX_RECORD_BYTES + 1];
    let n = sys::read_prefix(file, &mut large)?;
    large.truncate(n);
    Ok(Cow::Owned(large))
}
