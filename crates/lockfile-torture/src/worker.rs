//! The workers: library workers take the lock with `LockOptions`, drivers
//! through `lockfile run`, whose command is a `section` of this binary.
//!
//! The detector (the `detector` module): every critical section takes it.

use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use anyhow::{Context, Result};
use lockfile::{LockGuard, LockOptions};
use rustix::fs::FlockOperation;

use crate::board::{Board, Rng, Seat, Slot, now_ns, state};
use crate::detector::{open_detector, take_detector};
use crate::wrapper::{
    CONTENDED, SECTION_FAILED, SECTION_KILLED, enter_section, finish_driver, leave_section,
    report_failure, run_round,
};

/// A library worker: `rounds` critical sections, mixing `try_acquire`, timed
/// and blocking waits, some releases unlinking the file. Restarted by the
/// coordinator after a SIGKILL, it carries on from the slot's count.
pub(crate) fn library_worker(dir: &Path, index: usize) -> Result<i32> {
    let Seat {
        board,
        layout,
        slot,
        locks,
        rounds,
    } = Seat::open(dir, index)?;
    let detectors: Vec<File> = (0..locks)
        .map(|k| open_detector(&layout.detector(k)))
        .collect::<Result<_>>()?;
    let mut rng = Rng::new(index as u64);
    while slot.done.load(SeqCst) < rounds && !board.stopping() {
        let k = rng.below(u64::from(locks)) as u32;
        let path = layout.lock(k);
        if board.sabotage.load(SeqCst) != 0 {
            sabotaged_section(
                board,
                index,
                k,
                &detectors[k as usize],
                &|| inspected(&path),
                &mut rng,
            );
            continue;
        }
        let mut opts = LockOptions::new();
        opts.job(format!("torture-{index}"))
            .remove_on_release(rng.below(6) == 0);
        if rng.below(3) == 0 {
            opts.heartbeat_interval(Duration::from_millis(100));
        }
        slot.state.store(state::WAITING, SeqCst);
        let acquired = match rng.below(3) {
            0 => opts.try_acquire(&path),
            1 => opts
                .timeout(Duration::from_micros(200 + rng.below(20_000)))
                .acquire(&path),
            _ => opts.acquire(&path),
        };
        let guard = match acquired {
            Ok(guard) => guard,
            Err(e) if e.is_contended() => {
                slot.state.store(state::IDLE, SeqCst);
                std::thread::sleep(Duration::from_micros(rng.below(500)));
                continue;
            }
            Err(e) => {
                board.error(format_args!(
                    "worker {index}: acquire {}: {e}",
                    path.display()
                ));
                return Ok(3);
            }
        };
        board.log_acquisition(k, now_ns());
        slot.enter(k);

        let detector = &detectors[k as usize];
        let took_detector = take_detector(board, index, k, detector, &|| inspected(&path));
        check_guard(board, index, &guard, &path);
        let hold = board.hold_us.load(SeqCst);
        std::thread::sleep(Duration::from_micros(rng.below(hold + 1)));
        if rng.below(4) == 0
            && let Err(e) = guard.heartbeat()
        {
            board.error(format_args!("worker {index}: heartbeat: {e}"));
        }
        if took_detector && let Err(e) = rustix::fs::flock(detector, FlockOperation::Unlock) {
            board.error(format_args!("worker {index}: unlock detector: {e}"));
        }
        slot.done.fetch_add(1, SeqCst);
        slot.state.store(state::RELEASING, SeqCst);
        if let Err(e) = guard.release() {
            board.error(format_args!(
                "worker {index}: release {}: {e}",
                path.display()
            ));
        }
        slot.state.store(state::IDLE, SeqCst);
    }
    slot.state.store(state::FINISHED, SeqCst);
    Ok(0)
}

/// A critical section entered without the lock (the `--sabotage` self-test):
/// the detector must catch the overlaps this causes.
pub(crate) fn sabotaged_section(
    board: &Board,
    index: usize,
    k: u32,
    detector: &File,
    holder: &dyn Fn() -> String,
    rng: &mut Rng,
) {
    let slot = board.slot(index);
    slot.enter(k);
    let took = take_detector(board, index, k, detector, holder);
    std::thread::sleep(Duration::from_micros(
        rng.below(board.hold_us.load(SeqCst) + 1),
    ));
    if took {
        let _ = rustix::fs::flock(detector, FlockOperation::Unlock);
    }
    slot.done.fetch_add(1, SeqCst);
    slot.state.store(state::IDLE, SeqCst);
}

/// What `inspect` says of a lock file, for an overlap's message.
fn inspected(path: &Path) -> String {
    format!(
        "{}: {:?}",
        path.display(),
        lockfile::inspect(path).map(|r| (r.state, r.holders))
    )
}

/// Checks what a holder must see: the path still names the file it locked,
/// and the file holds its own record.
fn check_guard(board: &Board, index: usize, guard: &LockGuard, path: &Path) {
    let Ok(ours) = rustix::fs::fstat(guard) else {
        board.error("fstat of a held lock failed");
        return;
    };
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.dev() == ours.st_dev && m.ino() == ours.st_ino => {}
        other => {
            board.unlinked_while_held.fetch_add(1, SeqCst);
            eprintln!(
                "lockfile-torture: UNLINKED: slot {index} holds inode {} but {} is {:?}",
                ours.st_ino,
                path.display(),
                other.map(|m| m.ino())
            );
        }
    }
    let expected = guard.record().token;
    check_record(board, index, guard.as_fd(), &expected.to_string());
}

fn check_record(board: &Board, index: usize, fd: std::os::fd::BorrowedFd<'_>, token: &str) {
    let file = match fd.try_clone_to_owned() {
        Ok(fd) => File::from(fd),
        Err(e) => {
            board.error(format_args!("dup: {e}"));
            return;
        }
    };
    let mut buf = vec![0; 64 * 1024];
    let n = match file.read_at(&mut buf, 0) {
        Ok(n) => n,
        Err(e) => {
            board.error(format_args!("read the held lock file: {e}"));
            return;
        }
    };
    match lockfile::record::decode_record(&buf[..n]) {
        Ok(owner) if owner.token.to_string() == token => {}
        other => {
            board.record_mismatches.fetch_add(1, SeqCst);
            eprintln!(
                "lockfile-torture: RECORD: slot {index} holds the lock with token {token} but the file says {:?}",
                other.map(|o| (o.pid, o.token))
            );
        }
    }
}

/// A worker that takes the lock through `lockfile run`, whose command is
/// `lockfile-torture section ...` (see the `wrapper` module).
pub(crate) fn run_driver(dir: &Path, index: usize, lockfile_bin: &Path) -> Result<i32> {
    let Seat {
        board,
        layout,
        slot,
        locks,
        rounds,
    } = Seat::open(dir, index)?;
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
    let me = std::env::current_exe()?;
    let mut rng = Rng::new(1000 + index as u64);
    let stderr_path = layout.logs_dir().join(format!("run-{index}.stderr"));
    let mut round: u32 = 0;
    let mut failed = false;
    while slot.done.load(SeqCst) < rounds && !board.stopping() {
        round += 1;
        let k = rng.below(u64::from(locks)) as u32;
        let lock = layout.lock(k);
        let mut cmd = Command::new(lockfile_bin);
        cmd.arg("run");
        match rng.below(3) {
            0 => {
                cmd.arg("-n");
            }
            1 => {
                cmd.args(["-w", &format!("0.{:03}", 1 + rng.below(50))]);
            }
            _ => {}
        }
        cmd.args([
            "--job",
            &format!("torture-run-{index}"),
            "--heartbeat",
            "0.05",
        ])
        .arg(&lock)
        .arg("--")
        .arg(&me)
        .arg("section")
        .arg("--dir")
        .arg(dir)
        .args(["--slot", &index.to_string()])
        .args(["--lock", &k.to_string()])
        .args(["--round", &round.to_string()]);
        let status = run_round(slot, round, &mut cmd, lockfile_bin, &stderr_path)?;
        match (status.exit_status(), status.terminating_signal()) {
            // Done, or the lock was busy (-n, or -w ran out).
            (Some(0 | SECTION_FAILED), _) => {}
            (Some(CONTENDED), _) => std::thread::sleep(Duration::from_micros(rng.below(500))),
            // The chaos loop killed the section, or the wrapper itself.
            (Some(SECTION_KILLED), _) | (None, Some(9)) => {}
            _ => {
                report_failure(board, index, status, &stderr_path);
                failed = true;
                break;
            }
        }
    }
    Ok(finish_driver(slot, failed))
}

/// The critical section under `lockfile run`: runs with the lock inherited
/// from the wrapper, and takes the detector itself.
pub(crate) fn section(dir: &Path, index: usize, k: u32, round: u32) -> Result<i32> {
    let (board, layout) = enter_section(dir, index, k, round)?;
    let path = layout.lock(k);
    let detector = open_detector(&layout.detector(k))?;
    take_detector(board, index, k, &detector, &|| inspected(&path));
    check_inherited(board, index, &path)?;
    let mut rng = Rng::new(2000 + index as u64);
    Ok(leave_section(board, index, &mut rng))
}

/// What a section under `lockfile run` must see: a descriptor of the file the
/// path names (inherited from the wrapper), and the wrapper's record in it.
fn check_inherited(board: &Board, index: usize, path: &Path) -> Result<()> {
    let token = std::env::var("LOCKFILE_TOKEN").context("LOCKFILE_TOKEN is not set")?;
    let at_path = std::fs::symlink_metadata(path);
    let lock_fd = fds_of(std::process::id()).into_iter().find(|(_, m)| {
        at_path
            .as_ref()
            .is_ok_and(|p| p.dev() == m.dev() && p.ino() == m.ino())
    });
    match lock_fd {
        Some((fd, _)) => {
            // SAFETY: `fd` was listed in /proc/self/fd a moment ago and this
            // single-threaded process closes nothing meanwhile; the borrow
            // ends before this function returns.
            let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
            check_record(board, index, borrowed, &token);
        }
        None => {
            board.unlinked_while_held.fetch_add(1, SeqCst);
            eprintln!(
                "lockfile-torture: UNLINKED: the section of slot {index} holds no descriptor of the file {} names ({:?})",
                path.display(),
                at_path.as_ref().map(|m| m.ino())
            );
        }
    }
    Ok(())
}

/// The descriptors of a process and the files they refer to.
fn fds_of(pid: u32) -> Vec<(i32, std::fs::Metadata)> {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let fd: i32 = e.file_name().to_str()?.parse().ok()?;
            // stat() follows the magic link to the open file itself.
            let meta = std::fs::metadata(e.path()).ok()?;
            Some((fd, meta))
        })
        .collect()
}

/// Whether `slot` shows a holder inside its section right now.
pub(crate) fn holding(slot: &Slot) -> bool {
    slot.state.load(SeqCst) == state::HOLDING
}
