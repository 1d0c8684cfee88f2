//! An open file handed to us by the process that started us, as in flock(1)'s
//! descriptor form (`flock -n 9`): what it is, a fresh open file of it, and
//! whether another process shares it. Its own file, because it holds the one
//! `unsafe` call (kcmp) that neither std nor rustix wraps.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use super::process_walk::fdinfo_flock;
use super::procfs::read_proc;
use crate::sys::{Identity, LockMode};

/// The kernel's name for the file `fd` refers to: the target of
/// `/proc/self/fd/N` (a path, with ` (deleted)` once unlinked, or something
/// like `pipe:[1234]`).
pub(crate) fn descriptor_path(fd: BorrowedFd<'_>) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()
}

/// Opens the file `fd` refers to anew through `/proc/self/fd/N`: a new open
/// file description, with an offset, flags and lock of its own, so that the
/// descriptor's own (a shell's offset, its `O_APPEND`, its lock) are left
/// alone. Never creates, truncates or appends. The access is checked against
/// the file's permissions, as for any open.
pub(crate) fn reopen(fd: BorrowedFd<'_>, write: bool) -> io::Result<File> {
    use rustix::fs::OFlags;
    let access = if write { OFlags::RDWR } else { OFlags::RDONLY };
    rustix::fs::open(
        format!("/proc/self/fd/{}", fd.as_raw_fd()),
        access | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map(File::from)
    .map_err(io::Error::from)
}

/// The kind of cross-process comparison that asks whether two descriptors
/// refer to one open file description (`KCMP_FILE` in `<linux/kcmp.h>`).
const KCMP_FILE: libc::c_int = 0;

/// Whether descriptor `their_fd` of process `pid` refers to the very open file
/// description that our `fd` does, from kcmp(2). `None` when the kernel will
/// not say: no kcmp (a kernel built without it, a seccomp filter, as in a
/// container's default profile), or no permission to look at `pid`.
fn kcmp_same_file(pid: u32, their_fd: RawFd, fd: BorrowedFd<'_>) -> Option<bool> {
    let pid = libc::pid_t::try_from(pid).ok()?;
    let me = libc::pid_t::try_from(std::process::id()).ok()?;
    let (theirs, ours) = (
        libc::c_ulong::try_from(their_fd).ok()?,
        libc::c_ulong::try_from(fd.as_raw_fd()).ok()?,
    );
    // SAFETY: kcmp takes plain integers (two PIDs, a type, two descriptor
    // numbers) and reads or writes no memory of ours.
    let rc = unsafe { libc::syscall(libc::SYS_kcmp, pid, me, KCMP_FILE, theirs, ours) };
    match rc {
        0 => Some(true),
        r if r > 0 => Some(false),
        _ => match io::Error::last_os_error().raw_os_error() {
            // No such descriptor in that process, or no such process: it
            // certainly does not share ours.
            Some(libc::EBADF | libc::ESRCH) => Some(false),
            _ => None,
        },
    }
}

/// Whether process `pid` has, at its descriptor `fd_number`, the very open
/// file that our `fd` refers to, which is the file `id` and holds its `flock`
/// lock in `mode`.
///
/// kcmp(2) says so exactly. Where it will not, an exclusive lock still tells:
/// only one open file can hold it, so if `pid`'s descriptor holds a `flock`
/// lock on the same inode (its fdinfo lists the locks of its own open file
/// only), that open file is ours. A shared lock proves nothing that way.
pub(crate) fn shares_locked_file(
    pid: u32,
    fd_number: RawFd,
    fd: BorrowedFd<'_>,
    mode: LockMode,
    id: &Identity,
) -> bool {
    if let Some(same) = kcmp_same_file(pid, fd_number, fd) {
        return same;
    }
    mode == LockMode::Exclusive && holds_the_exclusive_lock(pid, fd_number, id)
}

/// Whether descriptor `fd_number` of process `pid` is the file `id` and its
/// open file holds the file's exclusive `flock` lock.
fn holds_the_exclusive_lock(pid: u32, fd_number: RawFd, id: &Identity) -> bool {
    // stat() follows the magic link to the open file itself.
    let same_inode = std::fs::metadata(format!("/proc/{pid}/fd/{fd_number}"))
        .is_ok_and(|m| m.dev() == id.dev && m.ino() == id.ino);
    same_inode && descriptor_lock(Some(pid), fd_number, id.ino) == Some(LockMode::Exclusive)
}

/// The `flock` lock that the open file behind descriptor `fd_number` of
/// process `pid` (ours when `None`) holds on inode `ino`, from its fdinfo:
/// `None` when it holds none, or when that is not ours to read.
pub(crate) fn descriptor_lock(pid: Option<u32>, fd_number: RawFd, ino: u64) -> Option<LockMode> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/fdinfo/{fd_number}"),
        None => format!("/proc/self/fdinfo/{fd_number}"),
    };
    let info = read_proc(&path)?;
    fdinfo_flock(&String::from_utf8_lossy(&info), ino).map(|(mode, _)| mode)
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use super::*;
    use crate::sys::identity_of;

    #[test]
    fn tells_whether_two_descriptors_share_one_open_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lock");
        let locked = File::create(&path).unwrap();
        let other = File::open(&path).unwrap();
        let dup = locked.try_clone().unwrap();
        let me = std::process::id();
        let id = identity_of(&locked).unwrap();
        assert_eq!(
            descriptor_path(locked.as_fd()).as_deref(),
            Some(path.as_path())
        );
        let no = |fd: &File| fd.as_raw_fd();

        assert_eq!(kcmp_same_file(me, no(&dup), locked.as_fd()), Some(true));
        assert_eq!(kcmp_same_file(me, no(&other), locked.as_fd()), Some(false));
        assert_eq!(kcmp_same_file(me, 1 << 20, locked.as_fd()), Some(false));

        // Without kcmp, the exclusive lock tells: only the open file that
        // holds it lists it in its fdinfo.
        assert!(!holds_the_exclusive_lock(me, no(&dup), &id));
        locked.lock().unwrap();
        assert_eq!(
            descriptor_lock(None, no(&locked), id.ino),
            Some(LockMode::Exclusive)
        );
        assert!(holds_the_exclusive_lock(me, no(&dup), &id));
        assert!(!holds_the_exclusive_lock(me, no(&other), &id));
        locked.unlock().unwrap();
        locked.lock_shared().unwrap();
        other.lock_shared().unwrap();
        assert_eq!(
            descriptor_lock(None, no(&other), id.ino),
            Some(LockMode::Shared)
        );
        assert!(!holds_the_exclusive_lock(me, no(&other), &id));
    }

    #[test]
    fn a_reopened_file_is_a_new_open_file_of_the_same_inode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lock");
        let original = File::options()
            .append(true)
            .create(true)
            .open(&path)
            .unwrap();
        let again = reopen(original.as_fd(), true).unwrap();
        let me = std::process::id();
        assert!(
            identity_of(&again)
                .unwrap()
                .same_file(&identity_of(&original).unwrap())
        );
        assert_eq!(
            kcmp_same_file(me, again.as_raw_fd(), original.as_fd()),
            Some(false)
        );
        std::os::unix::fs::FileExt::write_all_at(&again, b"at zero", 0).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"at zero");
    }
}
