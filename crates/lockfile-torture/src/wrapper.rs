//! What every driver shares, on lock files and on leases alike: one round's
//! `lockfile run` wrapper, and the section of this binary it runs.
//!
//! A driver is a subreaper: when the chaos loop kills a wrapper, the
//! wrapper's command (which may still hold the lock) becomes the driver's
//! child, and the driver waits for it before it exits.

use std::fs::File;
use std::io;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use anyhow::{Context, Result};
use rustix::process::{WaitOptions, WaitStatus};

use crate::board::{Board, Layout, Rng, Slot, now_ns, state};

/// The status of most sections under `lockfile run`: a job that "failed".
/// `lockfile run` records a success when its command exits 0, later holders
/// carry it, and reap keeps a stale file that carries one (the silence alarm
/// needs it), so sections that all succeeded would leave reap nothing to do.
/// One in eight succeeds.
pub(crate) const SECTION_FAILED: i32 = 42;

/// `lockfile run`'s status when the lock or lease is held by someone else.
pub(crate) const CONTENDED: i32 = 75;

/// `lockfile run`'s status when the chaos loop killed its command: 128 + 9.
pub(crate) const SECTION_KILLED: i32 = 137;

/// Runs round `round`'s wrapper `cmd` with its stderr in a fresh
/// `stderr_path`, shows it in `slot` for the chaos loop, and waits for it.
pub(crate) fn run_round(
    slot: &Slot,
    round: u32,
    cmd: &mut Command,
    lockfile_bin: &Path,
    stderr_path: &Path,
) -> Result<WaitStatus> {
    // A fresh file each time: an orphaned command of an earlier round may
    // still write to the previous one.
    let _ = std::fs::remove_file(stderr_path);
    let stderr = File::create(stderr_path)?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(stderr));
    slot.state.store(state::WAITING, SeqCst);
    let child = cmd
        .spawn()
        .with_context(|| format!("spawn {}", lockfile_bin.display()))?;
    let wrapper = child.id();
    slot.wrapper_round.store(round, SeqCst);
    slot.wrapper_pid.store(wrapper, SeqCst);
    let status = wait_for(wrapper)?;
    slot.wrapper_pid.store(0, SeqCst);
    Ok(status)
}

/// Waits for `pid`, reaping any orphan that exits meanwhile.
fn wait_for(pid: u32) -> Result<WaitStatus> {
    loop {
        match rustix::process::wait(WaitOptions::empty()) {
            Ok(Some((p, status))) if p.as_raw_nonzero().get() as u32 == pid => return Ok(status),
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(io::Error::from(e)).context("wait for `lockfile run`"),
        }
    }
}

/// Reports a wrapper of driver `index` that ended in a way no round
/// explains, with what it wrote to `stderr_path`.
pub(crate) fn report_failure(board: &Board, index: usize, status: WaitStatus, stderr_path: &Path) {
    let (code, sig) = (status.exit_status(), status.terminating_signal());
    let stderr = std::fs::read_to_string(stderr_path).unwrap_or_default();
    board.error(format_args!(
        "driver {index}: `lockfile run` ended with status {code:?}, signal {sig:?}: {}",
        stderr.trim()
    ));
}

/// Ends a driver: orphaned sections of killed wrappers are its children
/// now, and it waits for them.
pub(crate) fn finish_driver(slot: &Slot, failed: bool) -> i32 {
    while let Some((_, _)) = rustix::process::wait(WaitOptions::empty()).ok().flatten() {}
    slot.state.store(state::FINISHED, SeqCst);
    if failed { 3 } else { 0 }
}

/// Enters a section under `lockfile run`: logs the acquisition at the
/// moment the section began and shows slot `index` holding lock `k`.
pub(crate) fn enter_section(
    dir: &Path,
    index: usize,
    k: u32,
    round: u32,
) -> Result<(&'static Board, Layout)> {
    let entered = now_ns();
    let board = Board::open(dir)?;
    board.log_acquisition(k, entered);
    let layout = Layout {
        dir: dir.to_path_buf(),
    };
    let slot = board.slot(index);
    slot.section_round.store(round, SeqCst);
    slot.enter(k);
    Ok((board, layout))
}

/// Holds for a while and leaves slot `index`'s section; returns the
/// status the section exits with. The detector is released when the
/// section's process exits, while the wrapper still holds the lock or the
/// lease.
pub(crate) fn leave_section(board: &Board, index: usize, rng: &mut Rng) -> i32 {
    let slot = board.slot(index);
    let hold = board.hold_us.load(SeqCst);
    std::thread::sleep(Duration::from_micros(rng.below(hold + 1)));
    slot.done.fetch_add(1, SeqCst);
    slot.state.store(state::RELEASING, SeqCst);
    if rng.below(8) == 0 { 0 } else { SECTION_FAILED }
}
