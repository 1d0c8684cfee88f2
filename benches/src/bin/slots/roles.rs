//! The child processes, each this program re-executed with a hidden role:
//!
//! - `holder`: holds the plain lock and every slot of every set, and
//!   releases, gives up or takes back one of them when told;
//! - `waiter`: waits for the plain lock or for any slot of a set when told
//!   (through the library, or by the raw replica of `acquire_slot`), stamps
//!   the moment it holds it, lets it go and answers the stamp;
//! - `victim`: takes one free slot (or the plain lock) and holds it until
//!   it is SIGKILLed.
//!
//! Commands and answers are lines, their fields separated by tabs. A slot
//! count of 0 names the plain lock (a `LockOptions::acquire` waiter).

use std::collections::HashMap;
use std::io::{BufRead as _, Write as _};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use lockfile::slot::{SlotCount, slot_path};
use lockfile::{LockGuard, LockOptions};

use crate::replica::{self, Close};
use crate::sys::{allow_open_files, mono_ns};

/// Slot counts as the commands carry them: 0 for the plain lock.
fn count(n: u16) -> Result<SlotCount> {
    SlotCount::new(u64::from(n)).with_context(|| format!("{n} is no number of slots"))
}

/// Takes slot `k` of `path` (or the plain lock when `n` is 0), not waiting.
///
/// A holder takes its slot's file by its name: filling N slots one
/// `try_acquire_slot` after another would try N²/2 held slots (minutes at
/// N = 1,024). What the waiter meets is the same: a held lock file, then
/// the same release (the record marked released, the unlock, the close).
fn take(path: &Path, n: u16, k: u16) -> Result<LockGuard> {
    if n > 0 && k >= n {
        bail!("slot {k} of {n}");
    }
    Ok(LockOptions::new().try_acquire(slot_path(path, k))?)
}

fn fields(line: &str) -> Vec<&str> {
    line.split('\t').collect()
}

/// The holder's side. `hold PATH N`: take every slot (answer `ok`);
/// `release PATH K`: stamp and release slot K (answer the stamp);
/// `give PATH K`: release it unstamped (answer `ok`); `take PATH N K`: take
/// it back (answer `ok`).
pub(crate) fn holder_main(open_files: u64) -> Result<()> {
    allow_open_files(open_files)?;
    let mut sets: HashMap<PathBuf, Vec<Option<LockGuard>>> = HashMap::new();
    let mut out = std::io::stdout().lock();
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let mut slot = |path: &str, k: &str| -> Result<LockGuard> {
            let k: usize = k.parse()?;
            sets.get_mut(Path::new(path))
                .and_then(|set| set.get_mut(k)?.take())
                .with_context(|| format!("slot {k} of {path} is not held"))
        };
        let answer = match fields(&line)[..] {
            ["hold", path, n] => {
                let n: u16 = n.parse()?;
                let guards = (0..n.max(1))
                    .map(|k| take(Path::new(path), n, k).map(Some))
                    .collect::<Result<Vec<_>>>()?;
                sets.insert(PathBuf::from(path), guards);
                "ok".to_owned()
            }
            ["release", path, k] => {
                let guard = slot(path, k)?;
                let at = mono_ns();
                guard.release()?;
                at.to_string()
            }
            ["give", path, k] => {
                slot(path, k)?.release()?;
                "ok".to_owned()
            }
            ["take", path, n, k] => {
                let k: u16 = k.parse()?;
                let guard = take(Path::new(path), n.parse()?, k)?;
                let set = sets.get_mut(Path::new(path)).context("no such set")?;
                set[usize::from(k)] = Some(guard);
                "ok".to_owned()
            }
            _ => bail!("the holder got {line:?}"),
        };
        writeln!(out, "{answer}")?;
        out.flush()?;
    }
    Ok(())
}

/// The waiter's side. `wait PATH N HOW`: answer `waiting`, wait, stamp
/// the moment it holds the lock or a slot, release it, and answer `STAMP
/// INDEX`. HOW is `acquire` (the plain lock, `LockOptions::acquire`: the
/// kernel's flock wait), `slots` (any of N, `acquire_slot`), or the raw
/// replica of `acquire_slot`, `replica` (its watch closed before the
/// stamp, as `acquire_slot` closes it before it returns) or `replica-late`
/// (closed after the stamp). Released before the answer, so that the holder
/// can take the slot back at once; the stamp comes first.
pub(crate) fn waiter_main() -> Result<()> {
    let mut out = std::io::stdout().lock();
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let ["wait", path, n, how] = fields(&line)[..] else {
            bail!("the waiter got {line:?}");
        };
        let n: u16 = n.parse()?;
        writeln!(out, "waiting")?;
        out.flush()?;
        let (held_at, index) = match how {
            "acquire" | "slots" => {
                let guard = if how == "acquire" {
                    LockOptions::new().acquire(path)?
                } else {
                    LockOptions::new().acquire_slot(path, count(n)?)?
                };
                let held_at = mono_ns();
                let index = guard.slot().map_or(0, |s| s.index);
                guard.release()?;
                (held_at, index)
            }
            "replica" | "replica-late" => {
                let close = if how == "replica" {
                    Close::Before
                } else {
                    Close::After
                };
                let (held_at, index, held) = replica::wait(Path::new(path), n, close)?;
                drop(held);
                (held_at, index)
            }
            _ => bail!("the waiter got {line:?}"),
        };
        writeln!(out, "{held_at}\t{index}")?;
        out.flush()?;
    }
    Ok(())
}

/// The victim's side: takes slot K of N (the plain lock when N is 0),
/// answers `ok`, and holds it until it is killed.
pub(crate) fn victim_main(path: &str, n: &str, k: &str) -> Result<()> {
    let guard = take(Path::new(path), n.parse()?, k.parse()?)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "ok")?;
    out.flush()?;
    // Until the kill (or this program's end closes our stdin).
    for line in std::io::stdin().lock().lines() {
        line?;
    }
    drop(guard);
    Ok(())
}
