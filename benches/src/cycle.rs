//! The lock cycle (open, lock, unlock, close) of the raw syscalls, of std and
//! the crates people would otherwise pick, of Python's filelock, and of
//! ours; the heartbeat; and each syscall of our cycle on its own, which
//! explains where our cycle's time goes.

use std::fs::{File, OpenOptions};
use std::hint::black_box;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use lockfile::LockGuard;

use crate::python::PythonFileLock;
use crate::sys::{Fd, check, cpath};

/// One measured variant: `run(n)` performs `n` operations and returns the
/// elapsed nanoseconds (measured by the variant itself when it runs
/// elsewhere, as Python does).
pub(crate) struct Bench {
    pub(crate) name: &'static str,
    pub(crate) batch: usize,
    pub(crate) run: Box<dyn FnMut(usize) -> Result<f64>>,
}

impl std::fmt::Debug for Bench {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bench").field("name", &self.name).finish()
    }
}

/// Times `n` runs of `op`.
fn timed(n: usize, mut op: impl FnMut() -> Result<()>) -> Result<f64> {
    let start = Instant::now();
    for _ in 0..n {
        op()?;
    }
    Ok(start.elapsed().as_nanos() as f64)
}

pub(crate) const FLOOR: &str = "floor: open + flock(EX|NB) + flock(UN) + close";
pub(crate) const STD: &str = "std File::try_lock + unlock";
pub(crate) const FS2: &str = "fs2 0.4 try_lock_exclusive + unlock";
pub(crate) const FS4: &str = "fs4 1.1 try_lock + unlock";
pub(crate) const FD_LOCK: &str = "fd-lock 4 try_write + drop";
pub(crate) const PYTHON: &str = "Python filelock acquire + release";
pub(crate) const OURS: &str = "lockfile try_acquire + release";
pub(crate) const REPLICA: &str = "raw replica of our 8 syscalls (one statx after the lock, for type, inode and links; O_NOATIME)";
pub(crate) const REPLICA_PATH_STAT: &str = "raw replica of the previous 9 (statx of the descriptor before the lock and of the path after it)";
pub(crate) const REPLICA_PLAIN: &str = "raw replica of the first version's 9, with plain fstat/lstat (every field) and without O_NOATIME";
pub(crate) const FLOOR_HELD: &str = "floor, held: open + flock(EX|NB) fails + close";
pub(crate) const OURS_HELD: &str = "lockfile try_acquire, held (error names the holder)";
pub(crate) const HB_FLOOR: &str = "floor: futimens(fd, UTIME_NOW)";
pub(crate) const HB_OURS: &str = "lockfile heartbeat()";

/// The single syscalls, each timed on its own in the same rounds.
pub(crate) const SYS_OPEN_CLOSE: &str = "open(O_CREAT) + close of an existing file";
pub(crate) const SYS_FLOCK_PAIR: &str = "flock(EX|NB) + flock(UN)";
pub(crate) const SYS_FSTAT: &str = "fstat";
pub(crate) const SYS_LSTAT: &str = "lstat(path), which the link count replaced";
pub(crate) const SYS_PREAD: &str = "pread 4096 B (512 B file)";
pub(crate) const SYS_PWRITE_RECORD: &str = "pwrite 512 B record";
pub(crate) const SYS_PWRITE_FLAG: &str = "pwrite 5 B released flag";

fn rw_open(path: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .with_context(|| format!("open {}", path.display()))
}

/// Everything the lock-cycle table measures. Files live in `dir`, one per
/// variant, each in its steady state (created, and for ours holding a
/// released record) before the first round.
pub(crate) fn benches(
    dir: &Path,
    batch: usize,
    python: Option<PythonFileLock>,
) -> Result<(Vec<Bench>, Holdings)> {
    let file = |name: &str| -> PathBuf { dir.join(name) };
    let mut out = Vec::new();

    let floor = cpath(&file("floor.lock"))?;
    out.push(Bench {
        name: FLOOR,
        batch,
        run: Box::new(move |n| {
            timed(n, || {
                let fd = Fd::open(&floor, libc::O_CREAT | libc::O_CLOEXEC)?;
                fd.flock(libc::LOCK_EX | libc::LOCK_NB)?;
                fd.flock(libc::LOCK_UN)?;
                drop(fd);
                Ok(())
            })
        }),
    });

    let std_path = file("std.lock");
    out.push(Bench {
        name: STD,
        batch,
        run: Box::new(move |n| {
            timed(n, || {
                let f = rw_open(&std_path)?;
                f.try_lock()?;
                f.unlock()?;
                Ok(())
            })
        }),
    });

    let fs2_path = file("fs2.lock");
    out.push(Bench {
        name: FS2,
        batch,
        run: Box::new(move |n| {
            timed(n, || {
                let f = rw_open(&fs2_path)?;
                fs2::FileExt::try_lock_exclusive(&f)?;
                fs2::FileExt::unlock(&f)?;
                Ok(())
            })
        }),
    });

    let fs4_path = file("fs4.lock");
    out.push(Bench {
        name: FS4,
        batch,
        run: Box::new(move |n| {
            timed(n, || {
                let f = rw_open(&fs4_path)?;
                fs4::FileExt::try_lock(&f).map_err(|e| anyhow::anyhow!("fs4: {e}"))?;
                fs4::FileExt::unlock(&f)?;
                Ok(())
            })
        }),
    });

    let fd_lock_path = file("fd-lock.lock");
    out.push(Bench {
        name: FD_LOCK,
        batch,
        run: Box::new(move |n| {
            timed(n, || {
                let mut lock = fd_lock::RwLock::new(rw_open(&fd_lock_path)?);
                drop(lock.try_write()?);
                Ok(())
            })
        }),
    });

    if let Some(mut py) = python {
        // A Python cycle costs tens of microseconds: fewer per batch keeps
        // its share of the round's time in proportion.
        out.push(Bench {
            name: PYTHON,
            batch: (batch / 20).max(10),
            run: Box::new(move |n| py.run(n)),
        });
    }

    let ours = file("ours.lock");
    LockGuard::try_acquire(&ours)?.release()?;
    let ours_for_bench = ours.clone();
    out.push(Bench {
        name: OURS,
        batch,
        run: Box::new(move |n| {
            timed(n, || {
                LockGuard::try_acquire(&ours_for_bench)?.release()?;
                Ok(())
            })
        }),
    });

    // Our record, as the replica writes it: the real bytes of a real record.
    let record = std::fs::read(&ours)?;
    if record.len() != 512 {
        bail!("expected a 512-byte record, found {} bytes", record.len());
    }
    let replica_path = file("replica.lock");
    std::fs::write(&replica_path, &record)?;
    for (name, replica, file_name) in [
        // The syscalls as a first version issued them: stats that ask for
        // every field (timestamps included, so the kernel gives the next
        // write a fine-grained mtime and logs the inode), and reads that
        // update atime.
        (REPLICA_PLAIN, Replica::Plain, "replica-plain.lock"),
        // Lean flags, and the stat of the path that the link count replaced.
        (
            REPLICA_PATH_STAT,
            Replica::PathStat,
            "replica-path-stat.lock",
        ),
        // Ours: lean flags, one stat.
        (REPLICA, Replica::Ours, "replica-lean.lock"),
    ] {
        let path = file(file_name);
        std::fs::write(&path, &record)?;
        let path = cpath(&path)?;
        let record = record.clone();
        out.push(Bench {
            name,
            batch,
            run: Box::new(move |n| {
                let mut buf = [0u8; 4096];
                timed(n, || replica_cycle(&path, &record, &mut buf, replica))
            }),
        });
    }

    // Contention: this process holds the lock through one open file
    // description; a second open conflicts with it as another process would.
    let held_floor_path = file("held-floor.lock");
    let held_floor_holder = rw_open(&held_floor_path)?;
    held_floor_holder.try_lock()?;
    let held_floor = cpath(&held_floor_path)?;
    out.push(Bench {
        name: FLOOR_HELD,
        batch,
        run: Box::new(move |n| {
            timed(n, || {
                let fd = Fd::open(&held_floor, libc::O_CREAT | libc::O_CLOEXEC)?;
                match fd.flock(libc::LOCK_EX | libc::LOCK_NB) {
                    Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => Ok(()),
                    other => bail!("expected EWOULDBLOCK, got {other:?}"),
                }
            })
        }),
    });
    let held_ours_path = file("held-ours.lock");
    let held_ours_guard = LockGuard::try_acquire(&held_ours_path)?;
    out.push(Bench {
        name: OURS_HELD,
        batch,
        run: Box::new(move |n| {
            timed(n, || match LockGuard::try_acquire(&held_ours_path) {
                Err(e) if e.is_contended() => Ok(()),
                other => bail!("expected contention, got {other:?}"),
            })
        }),
    });

    // Heartbeat: ours, and the bare syscall it wraps, on the same descriptor.
    let hb_guard = std::rc::Rc::new(LockGuard::try_acquire(file("heartbeat.lock"))?);
    let hb = std::rc::Rc::clone(&hb_guard);
    out.push(Bench {
        name: HB_FLOOR,
        batch,
        run: Box::new(move |n| {
            let fd = hb.as_raw_fd();
            let now = [libc::timespec {
                tv_sec: 0,
                tv_nsec: libc::UTIME_NOW,
            }; 2];
            timed(n, || {
                // SAFETY: `fd` is the guard's, kept open by the `Rc` this
                // closure holds; `now` is a live array of two timespecs.
                check(unsafe { libc::futimens(fd, now.as_ptr()) } == 0, "futimens")
            })
        }),
    });
    let hb = std::rc::Rc::clone(&hb_guard);
    out.push(Bench {
        name: HB_OURS,
        batch,
        run: Box::new(move |n| {
            timed(n, || {
                hb.heartbeat()?;
                Ok(())
            })
        }),
    });

    out.extend(syscall_benches(dir, batch)?);

    Ok((
        out,
        Holdings {
            _files: vec![held_floor_holder],
            _guards: vec![held_ours_guard],
            heartbeat: hb_guard,
        },
    ))
}

/// What the benches hold for as long as they run: the held locks, and the
/// heartbeat's guard, which the allocation count uses too.
#[derive(Debug)]
pub(crate) struct Holdings {
    _files: Vec<File>,
    _guards: Vec<LockGuard>,
    pub(crate) heartbeat: std::rc::Rc<LockGuard>,
}

/// Which syscalls a replica issues.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Replica {
    /// Ours: open with `O_NOATIME`, flock, statx of the descriptor (type,
    /// inode, links), pread, pwrite, pwrite, flock(UN), close.
    Ours,
    /// The previous version: a statx of the descriptor (type, inode) before
    /// the lock and one of the path after it.
    PathStat,
    /// The first version: as `PathStat`, with stats that ask for every field
    /// and without `O_NOATIME`.
    Plain,
}

/// The syscalls of a cycle, issued raw, in the order the library issues
/// them: what the cycle would cost with no user-space work at all.
fn replica_cycle(
    path: &std::ffi::CString,
    record: &[u8],
    buf: &mut [u8; 4096],
    replica: Replica,
) -> Result<()> {
    let noatime = if replica == Replica::Plain {
        0
    } else {
        libc::O_NOATIME
    };
    let fd = Fd::open(
        path,
        libc::O_RDWR
            | libc::O_CREAT
            | libc::O_CLOEXEC
            | libc::O_NOFOLLOW
            | libc::O_NONBLOCK
            | libc::O_NOCTTY
            | noatime,
    )?;
    let mask = match replica {
        Replica::Ours => libc::STATX_TYPE | libc::STATX_INO | libc::STATX_NLINK,
        Replica::PathStat => libc::STATX_TYPE | libc::STATX_INO,
        Replica::Plain => libc::STATX_BASIC_STATS,
    };
    // SAFETY: each call gets a descriptor we own, NUL-terminated paths, and
    // pointers to live locals or to slices of the stated length.
    unsafe {
        let mut st: libc::statx = std::mem::zeroed();
        let mut stat_fd = || {
            check(
                libc::statx(fd.0, c"".as_ptr(), libc::AT_EMPTY_PATH, mask, &mut st) == 0,
                "statx fd",
            )
        };
        if replica == Replica::Ours {
            fd.flock(libc::LOCK_EX | libc::LOCK_NB)?;
            stat_fd()?;
        } else {
            stat_fd()?;
            fd.flock(libc::LOCK_EX | libc::LOCK_NB)?;
            check(
                libc::statx(
                    libc::AT_FDCWD,
                    path.as_ptr(),
                    libc::AT_SYMLINK_NOFOLLOW,
                    mask,
                    &mut st,
                ) == 0,
                "statx path",
            )?;
        }
        check(
            libc::pread(fd.0, buf.as_mut_ptr().cast(), buf.len(), 0) == record.len() as isize,
            "pread",
        )?;
        check(
            libc::pwrite(fd.0, record.as_ptr().cast(), record.len(), 0) == record.len() as isize,
            "pwrite",
        )?;
        check(
            libc::pwrite(fd.0, record[23..].as_ptr().cast(), 5, 23) == 5,
            "pwrite flag",
        )?;
    }
    fd.flock(libc::LOCK_UN)?;
    Ok(())
}

/// Each syscall of our cycle on its own, on a descriptor kept open.
fn syscall_benches(dir: &Path, batch: usize) -> Result<Vec<Bench>> {
    let path = dir.join("syscalls.lock");
    let record = std::fs::read(dir.join("replica.lock"))?;
    std::fs::write(&path, &record)?;
    let c = cpath(&path)?;
    let file = std::rc::Rc::new(rw_open(&path)?);
    let mut out = Vec::new();

    let open_path = c.clone();
    out.push(Bench {
        name: SYS_OPEN_CLOSE,
        batch,
        run: Box::new(move |n| {
            timed(n, || {
                drop(Fd::open(&open_path, libc::O_CREAT | libc::O_CLOEXEC)?);
                Ok(())
            })
        }),
    });
    let f = std::rc::Rc::clone(&file);
    out.push(Bench {
        name: SYS_FLOCK_PAIR,
        batch,
        run: Box::new(move |n| {
            let fd = f.as_raw_fd();
            timed(n, || {
                // SAFETY: `fd` belongs to the File kept alive by `f`.
                unsafe {
                    check(libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) == 0, "flock")?;
                    check(libc::flock(fd, libc::LOCK_UN) == 0, "flock un")
                }
            })
        }),
    });
    let f = std::rc::Rc::clone(&file);
    out.push(Bench {
        name: SYS_FSTAT,
        batch,
        run: Box::new(move |n| {
            let fd = f.as_raw_fd();
            timed(n, || {
                // SAFETY: a live stat buffer, a descriptor kept alive by `f`.
                unsafe {
                    let mut st: libc::stat = std::mem::zeroed();
                    check(libc::fstat(fd, black_box(&mut st)) == 0, "fstat")
                }
            })
        }),
    });
    out.push(Bench {
        name: SYS_LSTAT,
        batch,
        run: Box::new(move |n| {
            timed(n, || {
                // SAFETY: a live stat buffer and a NUL-terminated path.
                unsafe {
                    let mut st: libc::stat = std::mem::zeroed();
                    check(libc::lstat(c.as_ptr(), black_box(&mut st)) == 0, "lstat")
                }
            })
        }),
    });
    let f = std::rc::Rc::clone(&file);
    out.push(Bench {
        name: SYS_PREAD,
        batch,
        run: Box::new(move |n| {
            let mut buf = [0u8; 4096];
            timed(n, || {
                let got = f.read_at(black_box(&mut buf), 0)?;
                check(got == 512, "pread")
            })
        }),
    });
    let f = std::rc::Rc::clone(&file);
    let rec = record.clone();
    out.push(Bench {
        name: SYS_PWRITE_RECORD,
        batch,
        run: Box::new(move |n| timed(n, || Ok(f.write_all_at(black_box(&rec), 0)?))),
    });
    let f = file;
    out.push(Bench {
        name: SYS_PWRITE_FLAG,
        batch,
        run: Box::new(move |n| timed(n, || Ok(f.write_all_at(black_box(&record[23..28]), 23)?))),
    });
    Ok(out)
}

/// Allocations per heartbeat and per lock cycle, counted by the program's
/// global allocator around a loop of each.
pub(crate) fn count_allocations(dir: &Path, heartbeat: &LockGuard) -> Result<(f64, f64)> {
    const N: u64 = 1000;
    heartbeat.heartbeat()?;
    let before = crate::alloc::counting(true);
    for _ in 0..N {
        heartbeat.heartbeat()?;
    }
    let hb = crate::alloc::counting(false) - before;

    let path = dir.join("ours.lock");
    LockGuard::try_acquire(&path)?.release()?;
    let before = crate::alloc::counting(true);
    for _ in 0..N {
        LockGuard::try_acquire(&path)?.release()?;
    }
    let cycle = crate::alloc::counting(false) - before;
    Ok((hb as f64 / N as f64, cycle as f64 / N as f64))
}
