//! A worker that takes leases through `lockfile run --postgres|--etcd|--redis`,
//! whose command is a `lease-section` of this binary.
//!
//! Each wrapper starts in a process group of its own, which its command
//! joins, so that the chaos loop can kill the whole run at once as well as
//! the wrapper alone. Either way the command dies (by the parent-death
//! signal when only the wrapper is killed) and the lease stands until its
//! TTL runs out: the next holder's takeover time.

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use anyhow::{Context, Result};

use super::{Leases, name};
use crate::board::{Rng, Seat};
use crate::detector::{log_token, open_detector, take_detector};
use crate::wrapper::{
    CONTENDED, SECTION_FAILED, SECTION_KILLED, enter_section, finish_driver, leave_section,
    report_failure, run_round,
};

/// `lockfile run`'s status when it stopped COMMAND because the lease was
/// lost (or about to be).
const LEASE_LOST: i32 = 79;

pub(crate) fn lease_driver(
    dir: &Path,
    index: usize,
    lockfile_bin: &Path,
    leases: &Leases,
) -> Result<i32> {
    let Seat {
        board,
        layout,
        slot,
        locks,
        rounds,
    } = Seat::open(dir, index)?;
    // The commands of killed wrappers become our children: we reap them.
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
    let me = std::env::current_exe()?;
    let mut rng = Rng::new(4000 + index as u64);
    let stderr_path = layout.logs_dir().join(format!("lease-run-{index}.stderr"));
    let ttl_ms = leases.ttl.as_millis() as u64;
    let mut round: u32 = 0;
    let mut failed = false;
    while slot.done.load(SeqCst) < rounds && !board.stopping() {
        round += 1;
        let k = rng.below(u64::from(locks)) as u32;
        let mut cmd = Command::new(lockfile_bin);
        cmd.arg("run").args(leases.run_args());
        // A third try, a third wait less than a TTL, a third wait long
        // enough to outlast a dead holder.
        match rng.below(3) {
            0 => {
                cmd.arg("-n");
            }
            1 => {
                let ms = 10 + rng.below(ttl_ms);
                cmd.args(["-w", &format!("{}.{:03}", ms / 1000, ms % 1000)]);
            }
            _ => {
                let ms = 3 * ttl_ms;
                cmd.args(["-w", &format!("{}.{:03}", ms / 1000, ms % 1000)]);
            }
        }
        cmd.args(["--job", &format!("torture-run-{index}")])
            .arg(name(k))
            .arg("--")
            .arg(&me)
            .arg("lease-section")
            .arg("--dir")
            .arg(dir)
            .args(["--slot", &index.to_string()])
            .args(["--lock", &k.to_string()])
            .args(["--round", &round.to_string()]);
        // Its own process group, which the section joins (see above).
        cmd.process_group(0);
        let status = run_round(slot, round, &mut cmd, lockfile_bin, &stderr_path)?;
        match (status.exit_status(), status.terminating_signal()) {
            // Done, or the lease was held (-n, or -w ran out).
            (Some(0 | SECTION_FAILED), _) => {}
            (Some(CONTENDED), _) => std::thread::sleep(Duration::from_micros(rng.below(2000))),
            // The chaos loop killed the section, or the wrapper itself.
            (Some(SECTION_KILLED), _) | (None, Some(9)) => {}
            (Some(LEASE_LOST), _) => {
                board.leases_lost.fetch_add(1, SeqCst);
                let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
                eprintln!(
                    "lockfile-torture: LOST: `lockfile run` of driver {index} lost its lease on {}: {}",
                    name(k),
                    stderr.trim()
                );
            }
            _ => {
                report_failure(board, index, status, &stderr_path);
                failed = true;
                break;
            }
        }
    }
    Ok(finish_driver(slot, failed))
}

/// The critical section under `lockfile run`: takes the detector and logs
/// the fencing token the wrapper passed in LOCKFILE_FENCING_TOKEN.
pub(crate) fn lease_section(dir: &Path, index: usize, k: u32, round: u32) -> Result<i32> {
    let (board, layout) = enter_section(dir, index, k, round)?;
    let token: u64 = std::env::var("LOCKFILE_FENCING_TOKEN")
        .context("LOCKFILE_FENCING_TOKEN is not set")?
        .parse()
        .context("LOCKFILE_FENCING_TOKEN is not a number")?;
    let detector = open_detector(&layout.detector(k))?;
    let holder = || format!("{} (`lockfile run` section, token {token})", name(k));
    if take_detector(board, index, k, &detector, &holder) {
        log_token(board, index, k, &detector, token);
    }
    let mut rng = Rng::new(5000 + index as u64);
    Ok(leave_section(board, index, &mut rng))
}
