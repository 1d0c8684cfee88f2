//! Telling a forked child from the process it was forked from, without a
//! syscall.

use std::sync::OnceLock;
use std::sync::atomic::AtomicU32;

/// A word in a page that the kernel zeroes in every child forked from this
/// process (`MADV_WIPEONFORK`, Linux 4.14), or `None` where the kernel cannot
/// (an older kernel, a sandbox that refuses the mmap). Whoever sets it to a
/// non-zero value learns, by reading it back non-zero, that the process has
/// not forked since: a load instead of the getpid that the identity cache
/// would otherwise make on every acquire.
///
/// It says nothing about a child that shares our memory (`vfork`, or a
/// `clone` with `CLONE_VM` but not `CLONE_THREAD`): such a child may only
/// exec or exit, and never takes a lock through this crate before it does.
pub(in crate::sys) fn fork_witness() -> Option<&'static AtomicU32> {
    static WITNESS: OnceLock<Option<&'static AtomicU32>> = OnceLock::new();
    *WITNESS.get_or_init(map_wiped_page)
}

fn map_wiped_page() -> Option<&'static AtomicU32> {
    // SAFETY: a fresh anonymous private mapping of one page, which nothing
    // else knows about; madvise on exactly that range; munmap of it only when
    // it is not handed out.
    unsafe {
        let page = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if page == libc::MAP_FAILED {
            return None;
        }
        if libc::madvise(page, 4096, libc::MADV_WIPEONFORK) != 0 {
            libc::munmap(page, 4096);
            return None;
        }
        // SAFETY: the page is zeroed, aligned, never unmapped and lives
        // for the rest of the process; an AtomicU32 of zero is valid.
        Some(&*page.cast::<AtomicU32>())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;

    #[test]
    fn a_forked_child_sees_the_word_zeroed() {
        // A page of its own: the process's witness is the identity cache's.
        let Some(word) = map_wiped_page() else {
            eprintln!("skipped: this kernel has no MADV_WIPEONFORK");
            return;
        };
        word.store(7, Ordering::Relaxed);
        // SAFETY: the child only reads the word and calls _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
        if pid == 0 {
            let seen = word.load(Ordering::Relaxed);
            // SAFETY: _exit is async-signal-safe.
            unsafe { libc::_exit(seen as i32) };
        }
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status));
        assert_eq!(
            libc::WEXITSTATUS(status),
            0,
            "the child saw its parent's word"
        );
        assert_eq!(word.load(Ordering::Relaxed), 7, "the parent keeps its word");
    }

    /// The identity cache is dropped in a forked child, which must write its
    /// own PID, and a token of its own.
    #[test]
    fn a_forked_child_writes_its_own_identity() {
        let parent = crate::OwnerRecord::current(None, None);
        // SAFETY: the child computes a record, compares, and calls _exit; no lock
        // that another test thread could hold is taken for longer than a copy.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
        if pid == 0 {
            let child = crate::OwnerRecord::current(None, None);
            let wrong = [
                child.pid != std::process::id(),
                child.pid == parent.pid,
                child.token == parent.token,
                child.hostname != parent.hostname,
            ];
            let code = wrong
                .iter()
                .enumerate()
                .fold(0, |code, (bit, &wrong)| code | (i32::from(wrong) << bit));
            // SAFETY: _exit ends the child without running the parent's atexit
            // handlers or the test harness.
            unsafe { libc::_exit(code) };
        }
        let started = std::time::Instant::now();
        let mut status = 0;
        loop {
            // SAFETY: polls the child forked above.
            let waited = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if waited == pid {
                break;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "the forked child has not exited within a minute"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(libc::WIFEXITED(status), "child status {status:#x}");
        // Bits: 1 its PID is not its own, 2 it is its parent's, 4 so is its
        // token, 8 its hostname is not its parent's. (Its start time may be its
        // parent's: both count in clock ticks.)
        assert_eq!(
            libc::WEXITSTATUS(status),
            0,
            "the child wrote its parent's identity"
        );
    }
}
