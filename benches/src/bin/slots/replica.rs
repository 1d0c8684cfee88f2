//! The raw replica of a slot waiter: the syscalls `acquire_slot` makes, in
//! its order, without the library. An inotify watch of the directory
//! (files written, or closed after being written); a read-only probe of
//! every slot; poll(2) until an event names a slot or a second has passed;
//! a probe of the slots named, and of every slot each second; the free one
//! opened read-write and locked, its record read and written back; the
//! watch closed.
//!
//! Two ways to end: closing the watch before the stamp, as `acquire_slot`
//! does before it returns, and after it, as a waiter would that handed its
//! watch's close to someone else. Their difference is what the close costs
//! the lag.

use std::collections::BTreeSet;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use lockfile::slot::{slot_of, slot_path};

use crate::sys::{cpath, mono_ns, probe};

/// How often a waiter tries every slot, whatever inotify said (the
/// library's own period).
const SWEEP: Duration = Duration::from_secs(1);

/// When the replica closes its watch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Close {
    /// Before the stamp, as `acquire_slot` does.
    Before,
    /// After the stamp.
    After,
}

/// A descriptor that is closed on drop: the held slot, or the watch.
#[derive(Debug)]
pub(crate) struct Fd(libc::c_int);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: the descriptor is owned by this value and closed once.
        unsafe { libc::close(self.0) };
    }
}

fn check(rc: libc::c_int, what: &str) -> Result<libc::c_int> {
    if rc < 0 {
        return Err(io::Error::last_os_error()).context(what.to_owned());
    }
    Ok(rc)
}

/// Waits for any of the `n` slots of `path`: the stamp of the moment it
/// holds one, its index, and the held slot's descriptor (closing it
/// releases the slot).
pub(crate) fn wait(path: &Path, n: u16, close: Close) -> Result<(u64, u16, Fd)> {
    let dir = cpath(path.parent().context("a file in a directory")?)?;
    let base = path.file_name().context("a file name")?.to_owned();
    let files = (0..n)
        .map(|k| cpath(&slot_path(path, k)))
        .collect::<Result<Vec<_>>>()?;
    // SAFETY: no pointer is involved.
    let watch = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
    let watch = Fd(check(watch, "inotify_init1")?);
    let mask = libc::IN_CLOSE_WRITE | libc::IN_MODIFY | libc::IN_ONLYDIR;
    // SAFETY: `dir` is NUL-terminated; the descriptor is ours.
    let added = unsafe { libc::inotify_add_watch(watch.0, dir.as_ptr(), mask) };
    check(added, "inotify_add_watch")?;
    let all = || (0..n).collect::<BTreeSet<u16>>();
    let mut due = all();
    let mut swept_at = Instant::now();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        for &k in &due {
            let file = &files[usize::from(k)];
            if !probe(file)? {
                continue;
            }
            if let Some(held) = take(file)? {
                let at = match close {
                    Close::Before => {
                        drop(watch);
                        mono_ns()
                    }
                    Close::After => {
                        let at = mono_ns();
                        drop(watch);
                        at
                    }
                };
                return Ok((at, k, held));
            }
        }
        due.clear();
        let nap = SWEEP.saturating_sub(swept_at.elapsed());
        let mut fds = [libc::pollfd {
            fd: watch.0,
            events: libc::POLLIN,
            revents: 0,
        }];
        // SAFETY: one live pollfd, its count passed.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), 1, nap.as_millis() as libc::c_int) };
        if ready > 0 {
            read_events(watch.0, &mut buf, &mut |name| {
                if let Some(k) = slot_of(&base, name).filter(|&k| k < n) {
                    due.insert(k);
                }
            })?;
        }
        if swept_at.elapsed() >= SWEEP {
            due = all();
            swept_at = Instant::now();
        }
    }
}

/// Every event queued on the watch: the name of each file it concerns.
fn read_events(fd: libc::c_int, buf: &mut [u8], seen: &mut dyn FnMut(&OsStr)) -> Result<()> {
    const HEADER: usize = std::mem::size_of::<libc::inotify_event>();
    loop {
        // SAFETY: `buf` is live and writable for its length.
        let got = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if got < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::WouldBlock {
                return Ok(());
            }
            return Err(e).context("read(inotify)");
        }
        let events = &buf[..got as usize];
        let mut at = 0;
        while at + HEADER <= events.len() {
            // inotify(7): wd, mask, cookie, then the name's length, all
            // 32-bit, then the name, padded with NULs.
            let len = u32::from_ne_bytes(events[at + 12..at + 16].try_into()?) as usize;
            let name = &events[at + HEADER..at + HEADER + len];
            let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(len)];
            if !name.is_empty() {
                seen(OsStr::from_bytes(name));
            }
            at += HEADER + len;
        }
    }
}

/// The try of a free slot: open read-write, flock(LOCK_EX | LOCK_NB), and,
/// once held, its record read and written back (the same bytes: the holder
/// takes the file back after us). `None` when someone took it first.
fn take(file: &CString) -> Result<Option<Fd>> {
    let flags = libc::O_RDWR
        | libc::O_NOFOLLOW
        | libc::O_NONBLOCK
        | libc::O_NOCTTY
        | libc::O_CLOEXEC
        | libc::O_NOATIME;
    // SAFETY: `file` is NUL-terminated; no mode is read without O_CREAT.
    let fd = unsafe { libc::open(file.as_ptr(), flags) };
    let fd = Fd(check(fd, "open")?);
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(fd.0, libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Ok(None);
    }
    let mut record = [0u8; 4096];
    // SAFETY: a live stat buffer, a descriptor we own and a buffer of the
    // length passed; the write is of the bytes just read.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        check(libc::fstat(fd.0, &mut st), "fstat")?;
        let len = libc::pread(fd.0, record.as_mut_ptr().cast(), record.len(), 0);
        if len <= 0 {
            bail!("the slot file {file:?} held no record");
        }
        if libc::pwrite(fd.0, record.as_ptr().cast(), len as usize, 0) != len {
            bail!("pwrite({file:?})");
        }
    }
    Ok(Some(fd))
}
