//! The processes that run beside the workers: a reaper, an inspector, and a
//! probe that measures whether inspecting ever makes an acquisition fail.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use anyhow::{Context, Result};
use lockfile::inspect::Finding;
use lockfile::{LockOptions, LockReport, LockState, ReapOptions};

use crate::board::{Board, Layout, Rng};

/// Reaps the lock directory with removal on, in a loop, until the run stops.
/// Every 20th pass goes through `lockfile reap --fix --json` instead.
pub(crate) fn reaper(dir: &Path, lockfile_bin: &Path) -> Result<i32> {
    let board = Board::open(dir)?;
    let layout = Layout {
        dir: dir.to_path_buf(),
    };
    let locks = layout.locks_dir();
    let mut pass: u64 = 0;
    while !board.stopping() {
        pass += 1;
        let removed = match pass % 20 {
            0 => reap_with_cli(board, lockfile_bin, &locks)?,
            _ => match lockfile::reap(&locks, ReapOptions::new().remove(true)) {
                Ok(report) => {
                    for e in report.entries.iter().filter(|e| e.state.is_none()) {
                        // A file that vanished between listing and opening is
                        // reported as absent, not as an error; anything else
                        // that cannot be inspected is unexpected.
                        board.error(format_args!(
                            "reap could not inspect {}: {}",
                            e.path.display(),
                            e.reason
                        ));
                    }
                    report.removed() as u64
                }
                Err(e) => {
                    board.error(format_args!("reap {}: {e}", locks.display()));
                    0
                }
            },
        };
        board.reaped.fetch_add(removed, SeqCst);
        board.reap_passes.fetch_add(1, SeqCst);
    }
    Ok(0)
}

fn reap_with_cli(board: &Board, bin: &Path, locks: &Path) -> Result<u64> {
    let out = Command::new(bin)
        .args(["reap", "--fix", "--json"])
        .arg(locks)
        .output()
        .with_context(|| format!("run {}", bin.display()))?;
    if !out.status.success() {
        board.error(format_args!(
            "`lockfile reap --fix` exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
        return Ok(0);
    }
    let entries: serde_json::Value = serde_json::from_slice(&out.stdout)
        .context("`lockfile reap --json` printed something that is not JSON")?;
    Ok(entries
        .as_array()
        .map_or(0, |a| a.iter().filter(|e| e["action"] == "removed").count()) as u64)
}

/// Inspects, in a tight loop: the probe's lock and directory (checked against
/// what the probe says it is doing), and the workers' locks and directory
/// (checked for `stale` verdicts on live owners). Every 50th loop also runs
/// `lockfile inspect --json` on the probe's directory.
pub(crate) fn inspector(dir: &Path, lockfile_bin: &Path) -> Result<i32> {
    let board = Board::open(dir)?;
    let layout = Layout {
        dir: dir.to_path_buf(),
    };
    let probe_lock = layout.probe_lock();
    let probe_dir = layout.probe_dir();
    let locks: Vec<_> = (0..board.locks.load(SeqCst))
        .map(|k| layout.lock(k))
        .collect();
    let mut round: u64 = 0;
    while !board.stopping() {
        round += 1;
        let before = probe_phase(board);
        let report = lockfile::inspect(&probe_lock);
        let after = probe_phase(board);
        judge_probe(board, &report, before, after, "inspect");
        let reports = lockfile::inspect_dir(&probe_dir);
        let last = probe_phase(board);
        match reports {
            Ok(reports) => {
                for r in reports {
                    if r.as_ref().is_ok_and(|r| r.path == probe_lock) {
                        judge_probe(board, &r, after, last, "inspect_dir");
                    } else if let Err(e) = r {
                        board.error(format_args!("inspect_dir {}: {e}", probe_dir.display()));
                    }
                }
            }
            Err(e) => board.error(format_args!("inspect_dir {}: {e}", probe_dir.display())),
        }
        for path in &locks {
            match lockfile::inspect(path) {
                Ok(r) => judge_worker_lock(board, &r),
                Err(e) => board.error(format_args!("inspect {}: {e}", path.display())),
            }
        }
        match lockfile::inspect_dir(layout.locks_dir()) {
            Ok(reports) => {
                for r in reports {
                    match r {
                        Ok(r) => judge_worker_lock(board, &r),
                        Err(e) => board.error(format_args!("inspect_dir: {e}")),
                    }
                }
            }
            Err(e) => board.error(format_args!("inspect_dir: {e}")),
        }
        board.inspections.fetch_add(4 + locks.len() as u64, SeqCst);
        if round.is_multiple_of(50) {
            let out = Command::new(lockfile_bin)
                .args(["inspect", "--json"])
                .arg(&probe_dir)
                .output()
                .with_context(|| format!("run {}", lockfile_bin.display()))?;
            // 0-2 are monitoring verdicts (the directory holds litter on
            // purpose); 3 means a file could not be inspected.
            if !matches!(out.status.code(), Some(0..=2))
                || serde_json::from_slice::<serde_json::Value>(&out.stdout).is_err()
            {
                board.error(format_args!(
                    "`lockfile inspect --json` exited with {}: {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            board.inspections.fetch_add(1, SeqCst);
        }
    }
    Ok(0)
}

/// The probe's phase counter and its token. The probe stores the token
/// before it enters the held phase, so a token read after the counter showed
/// "held" belongs to that phase, unless the counter moved on meanwhile (and
/// then the caller ignores the observation).
fn probe_phase(board: &Board) -> (u64, u64) {
    let seq = board.probe_seq.load(SeqCst);
    (seq, board.probe_token.load(SeqCst))
}

/// When the probe stayed in one phase for the whole inspection, the report
/// must say exactly that: held by the probe with its token, or not held.
fn judge_probe(
    board: &Board,
    report: &lockfile::Result<LockReport>,
    (before, token): (u64, u64),
    (after, _): (u64, u64),
    how: &str,
) {
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            board.error(format_args!("{how} of the probe's lock: {e}"));
            return;
        }
    };
    if before != after {
        return;
    }
    let right = match before % 4 {
        0 => matches!(report.state, LockState::Free | LockState::Absent),
        2 => {
            report.state == LockState::Held
                && report
                    .owner
                    .as_ref()
                    .is_some_and(|o| o.token.as_u128() as u64 == token)
        }
        _ => true,
    };
    if !right {
        board.probe_contradictions.fetch_add(1, SeqCst);
        eprintln!(
            "lockfile-torture: INSPECT WRONG: {how} said {} ({:?}) while the probe was {} throughout",
            report.state,
            report.owner.as_ref().map(|o| o.token),
            if before % 4 == 0 {
                "not holding"
            } else {
                "holding"
            }
        );
    }
}

/// A `stale` verdict means "nobody holds it and the owner never released":
/// with an owner that is alive (no `owner_dead` finding) it names a lock
/// whose holder was taking it while inspect looked, since every worker
/// releases what it takes unless it is killed.
fn judge_worker_lock(board: &Board, report: &LockReport) {
    if report.state != LockState::Stale {
        return;
    }
    board.stale_reports.fetch_add(1, SeqCst);
    let alive = !report
        .findings
        .iter()
        .any(|f| matches!(f, Finding::OwnerDead { .. }));
    if alive {
        let n = board.stale_while_owner_alive.fetch_add(1, SeqCst);
        if n < 3 {
            eprintln!(
                "lockfile-torture: INSPECT WRONG: inspect called {} stale while its owner (pid {:?}) was alive",
                report.path.display(),
                report.owner.as_ref().map(|o| o.pid)
            );
        }
    }
}

/// Takes a lock that no other process takes, in a loop, while the inspector
/// inspects it: every failure to take it is caused by inspecting.
///
/// `probe_seq` tells the inspector what the probe is doing: `seq % 4` is
/// 0 free, 1 acquiring, 2 held (record written), 3 releasing.
pub(crate) fn probe(dir: &Path) -> Result<i32> {
    let board = Board::open(dir)?;
    let layout = Layout {
        dir: dir.to_path_buf(),
    };
    let path = layout.probe_lock();
    let mut rng = Rng::new(7);
    while !board.stopping() {
        board.probe_attempts.fetch_add(1, SeqCst);
        board.probe_seq.fetch_add(1, SeqCst); // acquiring
        let acquired = LockOptions::new()
            .job("probe")
            .remove_on_release(rng.below(8) == 0)
            .try_acquire(&path);
        match acquired {
            Ok(guard) => {
                board
                    .probe_token
                    .store(guard.record().token.as_u128() as u64, SeqCst);
                board.probe_seq.fetch_add(1, SeqCst); // held
                std::thread::sleep(Duration::from_micros(rng.below(200)));
                board.probe_seq.fetch_add(1, SeqCst); // releasing
                if let Err(e) = guard.release() {
                    board.error(format_args!("probe release: {e}"));
                }
                board.probe_seq.fetch_add(1, SeqCst); // free
            }
            Err(e) if e.is_contended() => {
                board.probe_failures.fetch_add(1, SeqCst);
                eprintln!("lockfile-torture: PROBE FAILED: {e}");
                board.probe_seq.fetch_add(3, SeqCst); // free
            }
            Err(e) => {
                board.error(format_args!("probe acquire: {e}"));
                board.probe_seq.fetch_add(3, SeqCst);
            }
        }
        std::thread::sleep(Duration::from_micros(rng.below(200)));
    }
    Ok(0)
}
