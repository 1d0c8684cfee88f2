//! Small platform helpers: a monotonic clock that means the same in every
//! process, CPU pinning, resource usage, and the name of a filesystem.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use anyhow::{Context, Result, bail};

pub(crate) use lockfile_bench::clock::mono_ns;

/// The CPUs this process may run on (sched_getaffinity), in order.
pub(crate) fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a live, writable cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    if rc != 0 {
        return vec![0];
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: CPU_ISSET reads one bit of the live set, within its size.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// Restricts the thread `tid` (0: the calling thread; a process's main thread
/// id is its pid) to the given CPUs.
pub(crate) fn pin(tid: libc::pid_t, cpus: &[usize]) -> Result<()> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        // SAFETY: CPU_SET writes one bit of the live local set; `cpu` is
        // below the number of CPUs, far below CPU_SETSIZE.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `set` is a live, initialised cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_setaffinity(tid, std::mem::size_of_val(&set), &set) };
    if rc != 0 {
        return Err(io::Error::last_os_error()).context(format!("sched_setaffinity({cpus:?})"));
    }
    Ok(())
}

/// User plus system CPU time this process has used, in nanoseconds
/// (getrusage(RUSAGE_SELF)).
pub(crate) fn cpu_time_ns() -> u64 {
    // SAFETY: rusage is plain data, written by getrusage before it is read.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a live, writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let us = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000 + tv.tv_usec as u64;
    (us(ru.ru_utime) + us(ru.ru_stime)) * 1000
}

/// A raw file descriptor that is closed on drop, for the floors, which must
/// not pay for anything std adds.
#[derive(Debug)]
pub(crate) struct Fd(pub(crate) libc::c_int);

impl Fd {
    pub(crate) fn open(path: &CString, flags: libc::c_int) -> Result<Fd> {
        // SAFETY: `path` is NUL-terminated; the mode is read only with O_CREAT.
        let fd = unsafe { libc::open(path.as_ptr(), flags, 0o644) };
        if fd < 0 {
            return Err(io::Error::last_os_error()).context(format!("open({path:?})"));
        }
        Ok(Fd(fd))
    }

    pub(crate) fn flock(&self, op: libc::c_int) -> io::Result<()> {
        // SAFETY: flock on a descriptor we own; no memory is involved.
        match unsafe { libc::flock(self.0, op) } {
            0 => Ok(()),
            _ => Err(io::Error::last_os_error()),
        }
    }
}

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: the descriptor is owned by this value and closed once.
        unsafe { libc::close(self.0) };
    }
}

/// The path as a C string, for the raw loops.
pub(crate) fn cpath(path: &Path) -> Result<CString> {
    Ok(CString::new(path.as_os_str().as_bytes())?)
}

/// Fails unless a raw syscall returned what it should.
pub(crate) fn check(ok: bool, what: &str) -> Result<()> {
    if !ok {
        bail!("{what}: {}", io::Error::last_os_error());
    }
    Ok(())
}
