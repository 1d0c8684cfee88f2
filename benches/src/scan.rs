//! Scanning a directory of lock files, some held: `inspect_dir` against a
//! raw probe loop that does the least a scan can do.

use std::ffi::CStr;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use lockfile::{LockGuard, LockState};

use crate::sys::{Fd, cpath};

pub(crate) const FLOOR: &str =
    "floor: readdir + openat + flock(SH|NB) probe + read + decode_record + close";
pub(crate) const OURS: &str = "lockfile inspect_dir (no lock taken)";
pub(crate) const REPLICA: &str = "raw replica of our syscalls: readdir + openat (O_NOATIME) + statx + pread + decode_record + close";
/// The one syscall in which the floor and ours differ, each timed alone on
/// one open descriptor.
pub(crate) const PROBE_ALONE: &str = "the floor's probe alone: flock(SH|NB) + flock(UN)";
pub(crate) const STATX_ALONE: &str = "our statx alone (type, mode, size, times, inode)";
pub(crate) const DECODE_ALONE: &str = "decode_record of one record alone (both do it)";
pub(crate) const ONE_FLOOR: &str = "floor, one file: open + probe + read + decode_record + close";
pub(crate) const ONE_OURS: &str = "lockfile inspect() of one file (reads /proc/locks)";
pub(crate) const BUSY_FLOOR: &str = "floor, one file, on a busy host";
pub(crate) const BUSY_OURS: &str = "lockfile inspect() of one file, on a busy host";

fn name(i: usize) -> String {
    format!("job-{i:05}.lock")
}

/// A directory of `files` lock files holding released records, of which
/// every `files / held`-th is held by a child process until dropped.
#[derive(Debug)]
pub(crate) struct ScanDir {
    pub(crate) dir: PathBuf,
    pub(crate) files: usize,
    pub(crate) held: usize,
    holder: Child,
}

impl ScanDir {
    pub(crate) fn create(exe: &Path, dir: PathBuf, files: usize, held: usize) -> Result<ScanDir> {
        std::fs::create_dir_all(&dir)?;
        for i in 0..files {
            LockGuard::try_acquire(dir.join(name(i)))?.release()?;
        }
        let step = files / held.max(1);
        let mut holder = Command::new(exe)
            .arg("--child")
            .arg("holder")
            .arg(&dir)
            .arg(held.to_string())
            .arg(step.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("cannot start the child that holds the locks")?;
        let mut line = String::new();
        BufReader::new(holder.stdout.take().expect("piped")).read_line(&mut line)?;
        if line.trim() != "ready" {
            bail!("the holding child answered {line:?}");
        }
        Ok(ScanDir {
            dir,
            files,
            held,
            holder,
        })
    }

    /// A file that nobody holds, for the one-file rows.
    pub(crate) fn free_file(&self) -> PathBuf {
        self.dir.join(name(1))
    }
}

impl Drop for ScanDir {
    fn drop(&mut self) {
        // Closing its stdin tells the holder to exit.
        drop(self.holder.stdin.take());
        let _ = self.holder.wait();
    }
}

/// The holding child: takes `count` locks, says so, and keeps them until its
/// stdin closes.
pub(crate) fn holder_main(dir: PathBuf, count: usize, step: usize) -> Result<()> {
    let guards = (0..count)
        .map(|i| LockGuard::try_acquire(dir.join(name(i * step))))
        .collect::<Result<Vec<_>, _>>()?;
    println!("ready");
    std::io::stdout().flush()?;
    let mut rest = String::new();
    let _ = std::io::stdin().read_line(&mut rest);
    for guard in guards {
        guard.release()?;
    }
    Ok(())
}

/// Outcome of one scan, checked so that a broken scan is never timed.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    files: usize,
    held: usize,
}

/// Opens every `*.lock` entry of `dir` in readdir's order, as a raw loop
/// does (libc readdir, then openat with `flags`), and hands each to
/// `per_file`, which closes it by dropping it.
fn each_lock_file(
    dir: &Path,
    flags: libc::c_int,
    mut per_file: impl FnMut(Fd) -> Result<()>,
) -> Result<()> {
    let c = cpath(dir)?;
    // SAFETY: `c` is a NUL-terminated path; the stream is closed below.
    let stream = unsafe { libc::opendir(c.as_ptr()) };
    if stream.is_null() {
        bail!("opendir: {}", std::io::Error::last_os_error());
    }
    // SAFETY: `stream` is a live DIR*.
    let dir_fd = unsafe { libc::dirfd(stream) };
    let walked = (|| loop {
        // SAFETY: `stream` is a live DIR*; the entry it returns stays valid
        // until the next readdir on the same stream.
        let entry = unsafe { libc::readdir(stream) };
        if entry.is_null() {
            return Ok(());
        }
        // SAFETY: d_name is NUL-terminated within the entry.
        let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) };
        if !name.to_bytes().ends_with(b".lock") {
            continue;
        }
        // SAFETY: a NUL-terminated name relative to a live directory fd.
        let fd = unsafe { libc::openat(dir_fd, name.as_ptr(), flags) };
        if fd < 0 {
            bail!("openat: {}", std::io::Error::last_os_error());
        }
        per_file(Fd(fd))?;
    })();
    // SAFETY: closes the stream opened above, once.
    unsafe { libc::closedir(stream) };
    walked
}

/// The floor: libc readdir, and per file openat + a shared non-blocking
/// flock probe + one read + the same JSON decode `inspect_dir` does
/// (`decode_record`) + close. No allocation but the decoder's.
fn floor_scan(dir: &Path) -> Result<Seen> {
    let mut seen = Seen { files: 0, held: 0 };
    let mut buf = [0u8; 4096];
    each_lock_file(dir, libc::O_RDONLY | libc::O_CLOEXEC, |fd| {
        if fd.flock(libc::LOCK_SH | libc::LOCK_NB).is_err() {
            seen.held += 1;
        }
        // SAFETY: reads into a live buffer of the given length.
        let n = unsafe { libc::read(fd.0, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            bail!("read: {}", std::io::Error::last_os_error());
        }
        if lockfile::record::decode_record(&buf[..n as usize]).is_ok() {
            seen.files += 1;
        }
        Ok(())
    })?;
    Ok(seen)
}

/// The raw replica of `inspect_dir`'s syscalls: as the floor, but with the
/// open flags and the statx that ours uses in place of the flock probe. It
/// cannot tell which files are held (that takes the kernel's lock table):
/// it counts every file as `held` unknown, and only its files are checked.
fn replica_scan(dir: &Path) -> Result<Seen> {
    let mut files = 0;
    let mut buf = [0u8; 4096];
    let flags = libc::O_RDONLY
        | libc::O_CLOEXEC
        | libc::O_NOFOLLOW
        | libc::O_NONBLOCK
        | libc::O_NOCTTY
        | libc::O_NOATIME;
    each_lock_file(dir, flags, |fd| {
        statx_of(&fd)?;
        // SAFETY: reads into a live buffer of the given length.
        let n = unsafe { libc::pread(fd.0, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            bail!("pread: {}", std::io::Error::last_os_error());
        }
        if lockfile::record::decode_record(&buf[..n as usize]).is_ok() {
            files += 1;
        }
        Ok(())
    })?;
    Ok(Seen { files, held: 0 })
}

/// The statx that `inspect` makes of each file (std's `File::metadata`).
fn statx_of(fd: &Fd) -> Result<()> {
    // SAFETY: an empty path with AT_EMPTY_PATH names the live descriptor;
    // statx writes into a live local.
    unsafe {
        let mut st: libc::statx = std::mem::zeroed();
        let ok = libc::statx(
            fd.0,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_STATX_SYNC_AS_STAT,
            libc::STATX_BASIC_STATS | libc::STATX_BTIME,
            &mut st,
        ) == 0;
        crate::sys::check(ok, "statx")
    }
}

/// `n` of the syscalls in which the floor and ours differ, or of the decode
/// both make, on one file, in nanoseconds.
pub(crate) fn alone(path: &Path, which: &str, n: usize) -> Result<f64> {
    let fd = Fd::open(&cpath(path)?, libc::O_RDONLY | libc::O_CLOEXEC)?;
    let record = std::fs::read(path)?;
    let start = Instant::now();
    for _ in 0..n {
        match which {
            PROBE_ALONE => {
                fd.flock(libc::LOCK_SH | libc::LOCK_NB)?;
                fd.flock(libc::LOCK_UN)?;
            }
            STATX_ALONE => statx_of(&fd)?,
            DECODE_ALONE => drop(lockfile::record::decode_record(&record)?),
            _ => bail!("unknown syscall row {which}"),
        }
    }
    Ok(start.elapsed().as_nanos() as f64)
}

fn ours_scan(dir: &Path) -> Result<Seen> {
    let reports = lockfile::inspect_dir(dir)?;
    let mut seen = Seen { files: 0, held: 0 };
    for report in &reports {
        let report = report.as_ref().map_err(|e| anyhow::anyhow!("{e}"))?;
        seen.files += usize::from(report.owner.is_some());
        seen.held += usize::from(report.state == LockState::Held);
    }
    Ok(seen)
}

/// Runs one scan of `which` and returns nanoseconds per file. The results
/// are dropped inside the timed region: a health check consumes them.
pub(crate) fn scan_per_file(scan: &ScanDir, which: &str) -> Result<f64> {
    let start = Instant::now();
    let seen = match which {
        FLOOR => floor_scan(&scan.dir)?,
        OURS => ours_scan(&scan.dir)?,
        REPLICA => replica_scan(&scan.dir)?,
        _ => bail!("unknown scan {which}"),
    };
    let ns = start.elapsed().as_nanos() as f64;
    let want = Seen {
        files: scan.files,
        held: if which == REPLICA { 0 } else { scan.held },
    };
    if seen != want {
        bail!("{which} saw {seen:?}, expected {want:?}");
    }
    Ok(ns / scan.files as f64)
}

/// `n` single-file probes of the floor's kind, in nanoseconds.
pub(crate) fn one_floor(path: &Path, n: usize) -> Result<f64> {
    let c = cpath(path)?;
    let mut buf = [0u8; 4096];
    let start = Instant::now();
    for _ in 0..n {
        let fd = Fd::open(&c, libc::O_RDONLY | libc::O_CLOEXEC)?;
        fd.flock(libc::LOCK_SH | libc::LOCK_NB)?;
        // SAFETY: reads into a live buffer of the given length.
        let got = unsafe { libc::read(fd.0, buf.as_mut_ptr().cast(), buf.len()) };
        if got <= 0 {
            bail!("read: {}", std::io::Error::last_os_error());
        }
        lockfile::record::decode_record(&buf[..got as usize])?;
    }
    Ok(start.elapsed().as_nanos() as f64)
}

/// `n` calls of `inspect` on one file, in nanoseconds.
pub(crate) fn one_ours(path: &Path, n: usize) -> Result<f64> {
    let start = Instant::now();
    for _ in 0..n {
        let report = lockfile::inspect(path)?;
        if report.state != LockState::Free {
            bail!("expected a free file, found {}", report.state);
        }
    }
    Ok(start.elapsed().as_nanos() as f64)
}
