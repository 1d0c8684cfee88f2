//! Taking any one of N slots (see [`crate::slot`]): each slot is a lock file
//! taken by the one path every lock takes; this file only chooses which to
//! try, and waits for any of them.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use super::probe::{Probe, probe};
use crate::error::Operation;
use crate::guard::LockGuard;
use crate::record::Slot;
use crate::slot::{SlotCount, SlotHolder, slot_of, slot_path};
use crate::sys::{DirWatch, LockMode};
use crate::{Error, LockOptions, Result, Wait};

/// How often a waiter tries every slot, whatever inotify said.
const SWEEP: Duration = Duration::from_secs(1);
/// How often it tries them without inotify.
const POLL: Duration = Duration::from_millis(100);
/// How long it naps after a wake-up for files that are none of its slots
/// (a busy shared directory), so that others' writes cannot keep it busy.
const IDLE_NAP: Duration = Duration::from_millis(10);

impl LockOptions {
    /// Takes one of `slots` slots of the lock file `path` (see
    /// [`crate::slot`] for the files and what N means), waiting while every
    /// one is held: as long as it takes, or up to
    /// [`timeout`](LockOptions::timeout). The guard's
    /// [`slot`](LockGuard::slot) says which; its [`path`](LockGuard::path)
    /// is that slot's file.
    ///
    /// A slot's record is what tells it from a plain lock, so it is never
    /// taken without one: [`record_optional`](Self::record_optional) is
    /// ignored.
    ///
    /// # Errors
    ///
    /// [`Error::SlotsHeld`] when the timeout passed (naming every slot's
    /// holder); an [`Error`] naming the slot's file when one cannot be
    /// opened, locked or written; [`Error::Io`] with
    /// [`io::ErrorKind::InvalidInput`] for a shared lock or a tick's claim,
    /// which slots do not take.
    ///
    /// # Examples
    ///
    /// ```
    /// # fn main() -> Result<(), lockfile::Error> {
    /// use lockfile::LockOptions;
    /// use lockfile::slot::SlotCount;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("gpu.lock");
    /// let two = SlotCount::new(2).unwrap();
    /// let first = LockOptions::new().try_acquire_slot(&path, two)?;
    /// let second = LockOptions::new().try_acquire_slot(&path, two)?;
    /// assert_eq!((first.slot().unwrap().index, second.slot().unwrap().index), (0, 1));
    /// let third = LockOptions::new().try_acquire_slot(&path, two).unwrap_err();
    /// assert!(third.is_contended()); // "all 2 slots of `…/gpu.lock` are held: slot 0 by pid …"
    /// # Ok(())
    /// # }
    /// ```
    pub fn acquire_slot(&self, path: impl AsRef<Path>, slots: SlotCount) -> Result<LockGuard> {
        lock_slot(self, path.as_ref(), slots, Wait::up_to(self.timeout))
    }

    /// Takes one of `slots` slots of the lock file `path` if any is free,
    /// without waiting. See [`acquire_slot`](Self::acquire_slot).
    ///
    /// # Errors
    ///
    /// [`Error::SlotsHeld`] naming every slot's holder when all are held; as
    /// [`acquire_slot`](Self::acquire_slot) otherwise.
    pub fn try_acquire_slot(&self, path: impl AsRef<Path>, slots: SlotCount) -> Result<LockGuard> {
        lock_slot(self, path.as_ref(), slots, Wait::No)
    }
}

fn lock_slot(opts: &LockOptions, path: &Path, count: SlotCount, wait: Wait) -> Result<LockGuard> {
    let refuse = |why: &str| {
        Err(Error::Io {
            op: Operation::Lock,
            path: path.to_owned(),
            source: io::Error::new(io::ErrorKind::InvalidInput, why.to_owned()),
        })
    };
    if opts.shared {
        return refuse("a slot is taken exclusively: slots and a shared lock do not go together");
    }
    if opts.claim_tick.is_some() {
        return refuse(
            "a tick's claim lives in one lock file, and slots are many: slots do not claim ticks",
        );
    }
    if opts.evict_after.is_some() {
        // Slots are tried one at a time: an eviction would stop a hung
        // holder of one slot while another slot is free.
        return refuse("slots do not evict: a hung slot's holder is for `check` to report");
    }
    let started = Instant::now();
    let mut opts = opts.clone();
    opts.record_optional = false;
    // The watch comes first, so that a slot freed during the first round of
    // attempts still wakes the wait that follows it.
    let mut watch = match wait {
        Wait::No => None,
        _ => DirWatch::new()
            .and_then(|mut w| w.watch(crate::paths::parent_dir(path)).map(|_| w))
            .ok(),
    };
    let base = path.file_name().unwrap_or(OsStr::new(""));
    let all = || (0..count.get()).collect::<BTreeSet<u16>>();
    let mut due = all();
    // The first round and the sweeps try every slot; a round that inotify
    // asked for tries only the slots it named that look free.
    let mut sweep = true;
    let mut swept_at = started;
    // What each slot's last attempt found, for the error that names them.
    let mut found: Vec<Option<Found>> = (0..count.get()).map(|_| None).collect();
    loop {
        for &index in &due {
            let file = slot_path(path, index);
            // A waiter looks before it tries: its look is read-only, and wakes
            // no other waiter (see `crate::slot`).
            if wait != Wait::No {
                match probe(&file, LockMode::Exclusive) {
                    Probe::Free => {}
                    Probe::Held => continue,
                    Probe::Unknown if !sweep => continue,
                    Probe::Unknown => {}
                }
            }
            match try_slot(&mut opts, &file, index, count) {
                Ok(mut guard) => {
                    guard.keep_retired_watch(watch.and_then(DirWatch::retire));
                    return Ok(guard);
                }
                Err(what) => found[usize::from(index)] = Some(what),
            }
        }
        let now = Instant::now();
        let left = match wait {
            Wait::No => return Err(not_taken(path, count, found, None)),
            Wait::Until(deadline) if deadline <= now => {
                return last_round(&mut opts, path, count, watch, now - started);
            }
            Wait::Until(deadline) => deadline - now,
            Wait::Forever => SWEEP,
        };
        due.clear();
        sweep = false;
        match &mut watch {
            Some(w) => {
                let nap = left.min(SWEEP.saturating_sub(swept_at.elapsed()));
                let listening = Instant::now();
                let woke = w.wait(nap, &mut |_, name| {
                    if let Some(index) = slot_of(base, name).filter(|&i| i < count.get()) {
                        due.insert(index);
                    }
                });
                match woke {
                    Ok(overflowed) if overflowed || swept_at.elapsed() >= SWEEP => sweep = true,
                    // Woken early for others' files: a nap (within the
                    // time it was to listen) before listening again.
                    Ok(_) if due.is_empty() => {
                        let rest = nap.saturating_sub(listening.elapsed());
                        std::thread::sleep(IDLE_NAP.min(rest));
                    }
                    Ok(_) => {}
                    // A watch that fails once is given up for the polls.
                    Err(_) => {
                        watch = None;
                        sweep = true;
                    }
                }
            }
            None => {
                std::thread::sleep(left.min(POLL));
                sweep = true;
            }
        }
        if sweep {
            due = all();
            swept_at = Instant::now();
        }
    }
}

/// What an attempt on a slot found instead of taking it.
enum Found {
    Held(SlotHolder),
    Failed(Error),
}

/// One attempt on slot `index`'s file: the guard, or what is in the way.
fn try_slot(
    opts: &mut LockOptions,
    file: &Path,
    index: u16,
    count: SlotCount,
) -> std::result::Result<LockGuard, Found> {
    opts.slot = Some(Slot {
        index,
        of: count.get(),
    });
    match super::lock(opts, file, Wait::No) {
        Ok(guard) => Ok(guard),
        Err(Error::Contended { owner, holders, .. }) => Err(Found::Held(SlotHolder {
            slot: index,
            owner,
            holders,
        })),
        Err(e) => Err(Found::Failed(e)),
    }
}

/// The end of a bounded wait: one last attempt on each slot, which takes
/// one that came free meanwhile, else the error that names them.
fn last_round(
    opts: &mut LockOptions,
    path: &Path,
    count: SlotCount,
    watch: Option<DirWatch>,
    waited: Duration,
) -> Result<LockGuard> {
    let mut found = Vec::with_capacity(usize::from(count.get()));
    for index in 0..count.get() {
        match try_slot(opts, &slot_path(path, index), index, count) {
            Ok(mut guard) => {
                guard.keep_retired_watch(watch.and_then(DirWatch::retire));
                return Ok(guard);
            }
            Err(what) => found.push(Some(what)),
        }
    }
    Err(not_taken(path, count, found, Some(waited)))
}

/// Why no slot was taken: the first slot that could not be tried at all
/// (its error names its file: a planted file, a FIFO, a full disk), else
/// every slot held, naming each holder.
fn not_taken(
    path: &Path,
    count: SlotCount,
    found: Vec<Option<Found>>,
    waited: Option<Duration>,
) -> Error {
    let mut holders = Vec::with_capacity(found.len());
    for what in found.into_iter().flatten() {
        match what {
            Found::Failed(e) => return e,
            Found::Held(holder) => holders.push(holder),
        }
    }
    Error::SlotsHeld {
        path: path.to_owned(),
        count: count.get(),
        waited,
        holders,
    }
}
