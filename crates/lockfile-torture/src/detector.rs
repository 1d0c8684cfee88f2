//! The detector: the proof of exclusivity, which uses none of this
//! project's code.
//!
//! Every lock (or lease name) `k` has a detector file outside anything the
//! code under test touches, which the process inside the critical section
//! locks with a plain flock(2) syscall, released by the kernel when that
//! process dies. A section that finds its detector held by a live process
//! has proof that two holders overlapped.
//!
//! One subtlety: a process that dies holding both the lock and the detector
//! releases them while it exits, in no guaranteed order, so the next holder
//! may find the detector still held by a process that is exiting. That
//! process runs no code any more, so it is not in a critical section: the
//! check waits for it. (For the same reason the detector is not taken by
//! running util-linux flock(1): a flock(1) child outlives a SIGKILLed
//! section by a moment and would hold the detector on behalf of the dead.)
//!
//! With leases, the detector file is also the fencing log: each section,
//! while it holds the detector, appends its fencing token, so the file is
//! the tokens in the detector's own order of sections, and each must be
//! larger than the one before it.

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::sync::atomic::Ordering::SeqCst;

use anyhow::{Context, Result};
use rustix::fs::FlockOperation;

use crate::board::{Board, MAX_SLOTS, state};

/// The size of one entry of the fencing log: a token, little-endian.
const TOKEN_BYTES: u64 = 8;

pub(crate) fn open_detector(path: &Path) -> Result<File> {
    File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .with_context(|| format!("open detector {}", path.display()))
}

/// Takes the detector of lock `k`, the proof of exclusivity. Returns whether
/// it was taken; counts an overlap when a live process holds it, and then
/// says what `holder` describes of the lock.
pub(crate) fn take_detector(
    board: &Board,
    index: usize,
    k: u32,
    detector: &File,
    holder: &dyn Fn() -> String,
) -> bool {
    let mut waited_for_exiting = false;
    loop {
        match rustix::fs::flock(detector, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {
                if waited_for_exiting {
                    board.detector_waits.fetch_add(1, SeqCst);
                }
                return true;
            }
            Err(rustix::io::Errno::WOULDBLOCK) => {}
            Err(e) => {
                board.error(format_args!("slot {index}: flock detector: {e}"));
                return false;
            }
        }
        let Ok(meta) = detector.metadata() else {
            board.error("fstat of a detector failed");
            return false;
        };
        let takers = flock_takers(meta.dev(), meta.ino());
        if takers.iter().all(|&pid| exiting(pid)) {
            // Empty: released since. All exiting: a dead holder's last
            // moment. Either way it comes free without anyone's help.
            waited_for_exiting |= !takers.is_empty();
            std::thread::yield_now();
            continue;
        }
        board.overlaps.fetch_add(1, SeqCst);
        let others: Vec<String> = (0..MAX_SLOTS)
            .filter(|&i| i != index)
            .map(|i| (i, board.slot(i)))
            .filter(|(_, s)| s.state.load(SeqCst) == state::HOLDING && s.lock.load(SeqCst) == k)
            .map(|(i, s)| format!("slot {i} pid {}", s.pid.load(SeqCst)))
            .collect();
        eprintln!(
            "lockfile-torture: OVERLAP: slot {index} (pid {}) holds lock {k} but its detector is held by live pid(s) {takers:?}; slots holding it too: [{}]; {}",
            std::process::id(),
            others.join(", "),
            holder()
        );
        return false;
    }
}

/// Appends `token` to the fencing log of lock `k`, which the caller holds the
/// detector of, and counts an inversion when it is not larger than the
/// token of the section before.
pub(crate) fn log_token(board: &Board, index: usize, k: u32, detector: &File, token: u64) {
    let len = match detector.metadata() {
        Ok(m) => m.len(),
        Err(e) => {
            board.error(format_args!("fstat the detector of lock {k}: {e}"));
            return;
        }
    };
    // A whole number of entries: each is one pwrite(2) of 8 bytes on a local
    // file, which a SIGKILL cannot cut in half.
    let last = len / TOKEN_BYTES * TOKEN_BYTES;
    if last > 0 {
        let mut before = [0; TOKEN_BYTES as usize];
        if let Err(e) = detector.read_exact_at(&mut before, last - TOKEN_BYTES) {
            board.error(format_args!("read the fencing log of lock {k}: {e}"));
            return;
        }
        let before = u64::from_le_bytes(before);
        if token <= before {
            board.fencing_inversions.fetch_add(1, SeqCst);
            eprintln!(
                "lockfile-torture: FENCING: slot {index} (pid {}) holds lock {k} with token {token}, not larger than the token {before} of the section before",
                std::process::id()
            );
        }
    }
    if let Err(e) = detector.write_all_at(&token.to_le_bytes(), last) {
        board.error(format_args!("write the fencing log of lock {k}: {e}"));
    }
}

/// The tokens a detector file logged, in the order of its sections.
pub(crate) fn logged_tokens(path: &Path) -> Result<Vec<u64>> {
    let bytes = std::fs::read(path).with_context(|| format!("read {}", path.display()))?;
    Ok(bytes
        .chunks_exact(TOKEN_BYTES as usize)
        .map(|c| u64::from_le_bytes(c.try_into().expect("chunks of 8 bytes")))
        .collect())
}

/// Entries of a fencing log not larger than the entry before them.
pub(crate) fn inversions(tokens: &[u64]) -> u64 {
    tokens.windows(2).filter(|w| w[1] <= w[0]).count() as u64
}

/// The processes that took a `flock` lock on (dev, ino), from `/proc/locks`
/// (waiters, marked `->`, excluded).
fn flock_takers(dev: u64, ino: u64) -> Vec<u32> {
    let want = format!(
        "{:02x}:{:02x}:{ino}",
        rustix::fs::major(dev),
        rustix::fs::minor(dev)
    );
    let Ok(text) = std::fs::read_to_string("/proc/locks") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            match f.as_slice() {
                [_, "FLOCK", _, _, pid, id, ..] if *id == want => pid.parse().ok(),
                _ => None,
            }
        })
        .collect()
}

/// Whether a process is gone, a zombie, or exiting (PF_EXITING in the flags
/// of `/proc/PID/stat`): it runs no code any more.
fn exiting(pid: u32) -> bool {
    const PF_EXITING: u64 = 0x4;
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    let Some(after_comm) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
        return false;
    };
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    // Fields 3 (state) and 9 (flags) of the whole line.
    let state = fields.first().copied().unwrap_or("");
    let flags: u64 = fields.get(6).and_then(|f| f.parse().ok()).unwrap_or(0);
    matches!(state, "Z" | "X" | "x") || flags & PF_EXITING != 0
}

#[cfg(test)]
mod tests {
    use super::inversions;

    #[test]
    fn an_inversion_is_a_token_not_larger_than_the_one_before() {
        assert_eq!(inversions(&[]), 0);
        assert_eq!(inversions(&[5]), 0);
        assert_eq!(inversions(&[1, 2, 9, 10]), 0);
        assert_eq!(inversions(&[1, 3, 3, 2, 4]), 2);
    }
}
