//! Calls on lock files that need no platform of their own, built on those
//! that do (the flag that spares the access time, the filesystem's type,
//! the identity of a name in a directory).

use std::borrow::Cow;
use std::fs::File;
use std::io;
use std::os::fd::BorrowedFd;
use std::time::SystemTime;

use super::file_identity::Identity;
use super::{filesystem_type, identity_in, noatime_flag};

/// `path` with any trailing `/` and `/.` taken off, so that opening it with
/// `O_NOFOLLOW` looks at the last component itself: the kernel follows a
/// symlink named as `link/` or `link/.` whatever the flags say.
pub(crate) fn without_trailing_slash(path: &std::path::Path) -> Cow<'_, std::path::Path> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    if bytes.ends_with(b"/") || bytes.ends_with(b"/.") {
        Cow::Owned(path.components().collect())
    } else {
        Cow::Borrowed(path)
    }
}

/// Opens `path` with `O_NOATIME` when allowed (we own the file, or hold
/// CAP_FOWNER), without it otherwise. Reading a lock file must not dirty its
/// inode: after every record write the access time is older than the
/// modification time, so without the flag each read would update it.
pub(crate) fn open_noatime(
    path: &std::path::Path,
    open: impl Fn(&std::path::Path, i32) -> io::Result<File>,
) -> io::Result<File> {
    match open(path, noatime_flag()) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => open(path, 0),
        other => other,
    }
}

/// Refreshes the file's modification time to `now`, the heartbeat. One
/// syscall, no allocation. An explicit time rather than `UTIME_NOW`, because
/// the kernel's coarse clock would round it to a few milliseconds.
pub(crate) fn touch(file: &File, now: SystemTime) -> io::Result<()> {
    let since_epoch = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let both = |ts: rustix::fs::Timespec| rustix::fs::Timestamps {
        last_access: ts,
        last_modification: ts,
    };
    let explicit = rustix::fs::Timespec {
        tv_sec: i64::try_from(since_epoch.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: since_epoch.subsec_nanos().into(),
    };
    let kernel_now = rustix::fs::Timespec {
        tv_sec: 0,
        tv_nsec: rustix::fs::UTIME_NOW,
    };
    match rustix::fs::futimens(file, &both(explicit)) {
        // Setting explicit times takes owning the file; "now" takes only
        // write access, which a holder of a lock shared between users has.
        Err(rustix::io::Errno::PERM) => rustix::fs::futimens(file, &both(kernel_now)),
        other => other,
    }
    .map_err(io::Error::from)
}

/// Reads up to `buf.len()` bytes from the start of a regular file and returns
/// how many it got. Bounded by the buffer, never the file. A short read of a
/// regular file means end of file, so the usual case is one `pread`.
pub(crate) fn read_prefix(file: &File, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: the same bytes seen as possibly uninitialised, which they are
    // not; `read_prefix_uninit` only ever writes initialised bytes (pread's).
    let buf = unsafe { &mut *(std::ptr::from_mut(buf) as *mut [std::mem::MaybeUninit<u8>]) };
    read_prefix_uninit(file, buf).map(|read| read.len())
}

/// [`read_prefix`] into a buffer that need not be initialised; returns the
/// bytes read.
pub(crate) fn read_prefix_uninit<'a>(
    file: &File,
    buf: &'a mut [std::mem::MaybeUninit<u8>],
) -> io::Result<&'a mut [u8]> {
    let mut filled = 0;
    while filled < buf.len() {
        match rustix::io::pread(file, &mut buf[filled..], filled as u64) {
            Ok(([], _)) => break,
            Ok((read, _)) => {
                let n = read.len();
                filled += n;
                if filled < buf.len() {
                    break;
                }
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) => break,
            Err(e) => return Err(e.into()),
        }
    }
    // SAFETY: pread initialised the first `filled` bytes, one read after
    // another from the start.
    Ok(unsafe { &mut *(std::ptr::from_mut(&mut buf[..filled]) as *mut [u8]) })
}

/// Unlinks `name` from the open directory `dir`, but only while it still
/// names the file `expected` (the one checked under its lock): never through
/// a symlink, and never in another directory than the one `dir` pinned,
/// whatever its path names now.
///
/// What the check cannot exclude is whoever may write `dir` renaming another
/// file over `name` between the look and the unlink: only they can, and only
/// in that directory, which is theirs to change anyway.
pub(crate) fn unlink_if_same(
    dir: BorrowedFd<'_>,
    name: &std::path::Path,
    expected: &Identity,
) -> io::Result<bool> {
    match identity_in(dir, name) {
        Ok(now) if now.same_file(expected) => {}
        Ok(_) => return Ok(false),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    }
    rustix::fs::unlinkat(dir, name, rustix::fs::AtFlags::empty())?;
    Ok(true)
}

/// The filesystems where a kernel lock may not cross hosts, or may not exist.
pub(crate) fn network_filesystem(file: &File) -> Option<&'static str> {
    filesystem_type(file).and_then(|magic| {
        Some(match magic {
            0x6969 => "nfs",
            0x517B => "smb",
            0xFF53_4D42 => "cifs",
            0xFE53_4D42 => "smb2",
            0x6573_5546 => "fuse",
            0x00C3_6400 => "ceph",
            0x0102_1997 => "9p",
            0x6B41_4653 => "afs",
            0x0116_1970 => "gfs2",
            0x7461_636F => "ocfs2",
            0x0BD0_0BD0 => "lustre",
            _ => return None,
        })
    })
}
