//! The syscalls this program makes itself: the clock both sides of a
//! handoff stamp, the raw probe that is the floor of a waiter's sweep, the
//! limit on open files that a holder of every slot needs, and the name of
//! the filesystem the slots live on.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use anyhow::{Context as _, Result, bail};
use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

pub(crate) use lockfile_bench::clock::mono_ns;

/// The path as a C string, for the raw probe.
pub(crate) fn cpath(path: &Path) -> Result<CString> {
    Ok(CString::new(path.as_os_str().as_bytes())?)
}

/// The raw look at one slot file that a waiter makes through the library
/// before it tries a slot: open read-only (no symlink followed, never
/// blocking on a FIFO), fstat, flock(LOCK_EX | LOCK_NB) (and LOCK_UN when
/// it was free), close. Whether it was free.
pub(crate) fn probe(path: &CString) -> Result<bool> {
    let flags =
        libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
    // SAFETY: `path` is NUL-terminated; no mode is read without O_CREAT.
    let fd = unsafe { libc::open(path.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error()).context(format!("open({path:?})"));
    }
    // SAFETY: a live stat buffer and a descriptor we own, closed once below.
    let (stat_rc, free) = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        let stat_rc = libc::fstat(fd, &mut st);
        let free = libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) == 0;
        if free {
            libc::flock(fd, libc::LOCK_UN);
        }
        libc::close(fd);
        (stat_rc, free)
    };
    if stat_rc != 0 {
        bail!("fstat({path:?}) failed");
    }
    Ok(free)
}

/// [`probe`] of a file that must be held, as every file of the floor is.
pub(crate) fn probe_held(path: &CString) -> Result<()> {
    if probe(path)? {
        bail!("{path:?} was free: every file of the floor must be held");
    }
    Ok(())
}

/// Raises the limit on open files to its hard limit, so that one process
/// can hold `need` lock files (1,024 slots and more; the usual soft limit is
/// 1,024 descriptors in all).
pub(crate) fn allow_open_files(need: u64) -> Result<()> {
    let limit = getrlimit(Resource::Nofile);
    if limit.current.is_some_and(|c| c >= need) {
        return Ok(());
    }
    if limit.maximum.is_some_and(|m| m < need) {
        bail!(
            "a holder of every slot needs {need} open files, and the hard limit is {:?}",
            limit.maximum
        );
    }
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        },
    )
    .context("cannot raise the limit on open files")
}
