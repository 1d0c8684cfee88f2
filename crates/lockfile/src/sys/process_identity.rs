//! What this process looks like in an owner record, read once and cached.

use std::sync::{Arc, Mutex};

use super::{boot_id, own_start_time, pid_namespace};

/// What this process looks like in an owner record.
#[derive(Debug)]
pub(crate) struct ProcessIdentity {
    pub(crate) pid: u32,
    // Shared with every record this process writes, so that a record costs
    // no allocation for them.
    pub(crate) hostname: Arc<str>,
    pub(crate) boot_id: Option<Arc<str>>,
    pub(crate) pid_namespace: Option<u64>,
    pub(crate) start_time: Option<u64>,
}

/// The calling process's identity, read once and cached. A forked child
/// never writes its parent's identity: its PID no longer matches the
/// cached one, and the cache is read again. One getpid per call, which is
/// cheaper than anything that would spare it.
pub(crate) fn process_identity() -> Arc<ProcessIdentity> {
    static CACHE: Mutex<Option<Arc<ProcessIdentity>>> = Mutex::new(None);
    let pid = std::process::id();
    let mut cached = CACHE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(id) = &*cached
        && id.pid == pid
    {
        return Arc::clone(id);
    }
    let id = Arc::new(ProcessIdentity {
        pid,
        hostname: hostname().into(),
        boot_id: boot_id().map(Arc::from),
        pid_namespace: pid_namespace(None),
        start_time: own_start_time(),
    });
    *cached = Some(Arc::clone(&id));
    id
}

fn hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
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
