//! Which file a descriptor or a path is, and what kind of filesystem holds
//! it, asked of the kernel as narrowly as the lock's hot path can afford.

use std::fs::File;
use std::io;
use std::os::fd::AsFd;

use crate::sys::Identity;

/// `O_NOATIME`, which only Linux has: reading a lock file must not dirty its
/// inode.
pub(in crate::sys) fn noatime_flag() -> i32 {
    libc::O_NOATIME
}

/// The identity of an open file, from statx(2) asked for the type, inode,
/// link count, size and owner only. Not for the times: on filesystems with fine-grained timestamps
/// (Linux 6.13+), a query of the times makes the next write to the file take
/// a fine-grained timestamp and log its inode, which the lock's hot path
/// would pay for on every record write.
pub(crate) fn identity_of(fd: impl AsFd) -> io::Result<Identity> {
    identity(rustix::fs::statx(
        fd,
        // A `&CStr`: a `&str` would be copied to the stack to add its NUL.
        c"",
        rustix::fs::AtFlags::EMPTY_PATH,
        identity_mask(),
    ))
}

/// The identity of what `path` names, without following a symlink.
pub(crate) fn identity_at(path: &std::path::Path) -> io::Result<Identity> {
    identity_in(rustix::fs::CWD, path)
}

/// The identity of what `name` names in the open directory `dir` (or, for
/// a path of several components, below it), without following a symlink
/// in the last component.
pub(crate) fn identity_in(dir: impl AsFd, name: &std::path::Path) -> io::Result<Identity> {
    identity(rustix::fs::statx(
        dir,
        name,
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        identity_mask(),
    ))
}

/// What an identity asks statx(2) for: never the times (see `identity_of`).
fn identity_mask() -> rustix::fs::StatxFlags {
    use rustix::fs::StatxFlags;
    StatxFlags::TYPE | StatxFlags::INO | StatxFlags::NLINK | StatxFlags::UID | StatxFlags::SIZE
}

fn identity(statx: rustix::io::Result<rustix::fs::Statx>) -> io::Result<Identity> {
    let st = statx?;
    Ok(Identity {
        dev: rustix::fs::makedev(st.stx_dev_major, st.stx_dev_minor),
        ino: st.stx_ino,
        kind: rustix::fs::FileType::from_raw_mode(st.stx_mode.into()),
        links: st.stx_nlink.into(),
        uid: st.stx_uid,
        size: st.stx_size,
    })
}

/// Opens the directory `path` to pin it: later lookups and unlinks go
/// through this descriptor, so that a directory renamed or swapped for a
/// symlink afterwards cannot redirect them. `O_PATH`: it is only ever a
/// base for `*at` calls, which takes no read permission on it.
pub(crate) fn open_dir_pinned(path: &std::path::Path) -> io::Result<std::os::fd::OwnedFd> {
    use rustix::fs::OFlags;
    rustix::fs::open(
        path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(io::Error::from)
}

pub(in crate::sys) fn filesystem_type(file: &File) -> Option<u64> {
    rustix::fs::fstatfs(file).ok().map(|s| s.f_type as u64)
}
