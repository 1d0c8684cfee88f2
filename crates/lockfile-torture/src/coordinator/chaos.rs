//! The chaos loop's strike: which process one SIGKILL hits, and the tally of
//! what the kills hit, which the summary needs to measure recovery.

use std::process::Child;
use std::sync::atomic::Ordering::SeqCst;

use anyhow::Result;

use super::fleet::{Kind, Worker};
use super::pidfd::{kill_and_wait, kill_group, open_pidfd};
use crate::board::{Board, Rng, now_ns, state};
use crate::worker::holding;

/// What the chaos loop did.
#[derive(Debug, Default)]
pub(super) struct Chaos {
    /// Kill time and lock of every library holder that died holding.
    pub(super) library_deaths: Vec<(u32, u64)>,
    /// The same for sections under `lockfile run`.
    pub(super) section_deaths: Vec<(u32, u64)>,
    /// The same for `lockfile run` wrappers killed while their command ran:
    /// with a lock file the command keeps the lock; with a lease it dies too,
    /// and the lease stands until its TTL runs out.
    pub(super) wrapper_deaths: Vec<(u32, u64)>,
    /// Of those, the kills of the wrapper's whole process group (lease mode).
    pub(super) groups_killed: u64,
    /// Library workers killed while waiting for a lock.
    pub(super) waiters_killed: u64,
    /// Kills that landed just after the victim left its section.
    pub(super) missed: u64,
}

impl Chaos {
    pub(super) fn holders_killed(&self) -> u64 {
        (self.library_deaths.len() + self.section_deaths.len() + self.wrapper_deaths.len()) as u64
    }
}

/// One SIGKILL: mostly a holder (a library worker in its section, a section
/// under `lockfile run`, or the `lockfile run` wrapper while its command
/// runs; with `groups`, sometimes the wrapper's whole process group),
/// sometimes a library worker that is waiting for a lock.
pub(super) fn strike(
    groups: bool,
    board: &Board,
    workers: &mut [Worker],
    rng: &mut Rng,
    chaos: &mut Chaos,
    spawn_worker: &dyn Fn(usize, Kind) -> Result<Child>,
) -> Result<()> {
    let live = |w: &&mut Worker| w.child.is_some();
    let waiters: Vec<usize> = workers
        .iter_mut()
        .filter(live)
        .filter(|w| {
            w.kind == Kind::Library && board.slot(w.slot).state.load(SeqCst) == state::WAITING
        })
        .map(|w| w.slot)
        .collect();
    let holders: Vec<usize> = workers
        .iter_mut()
        .filter(live)
        .filter(|w| holding(board.slot(w.slot)))
        .map(|w| w.slot)
        .collect();
    let pick = |v: &[usize], rng: &mut Rng| v[rng.below(v.len() as u64) as usize];
    let (index, holder) = if !waiters.is_empty() && (holders.is_empty() || rng.below(8) == 0) {
        (pick(&waiters, rng), false)
    } else if !holders.is_empty() {
        (pick(&holders, rng), true)
    } else {
        return Ok(());
    };
    let slot = board.slot(index);
    let lock = slot.lock.load(SeqCst);
    let w = workers
        .iter_mut()
        .find(|w| w.slot == index)
        .expect("a worker per slot");
    match w.kind {
        Kind::Library => {
            let child = w.child.as_mut().expect("live");
            let victim = child.id();
            let at = now_ns();
            child.kill()?;
            child.wait()?;
            let died_holding =
                slot.state.load(SeqCst) == state::HOLDING && slot.pid.load(SeqCst) == victim;
            match (holder, died_holding) {
                (_, true) => chaos.library_deaths.push((lock, at)),
                (false, false) => chaos.waiters_killed += 1,
                (true, false) => chaos.missed += 1,
            }
            // Carry on from the slot's count in a fresh process.
            if slot.done.load(SeqCst) < board.rounds.load(SeqCst) {
                w.child = Some(spawn_worker(index, Kind::Library)?);
            } else {
                w.child = None;
                w.finished = true;
            }
        }
        Kind::Run => {
            let section = slot.pid.load(SeqCst);
            let round = slot.section_round.load(SeqCst);
            let wrapper = slot.wrapper_pid.load(SeqCst);
            let wrapper_runs_it = wrapper != 0 && slot.wrapper_round.load(SeqCst) == round;
            if wrapper_runs_it && rng.below(2) == 0 {
                // The wrapper: with a lock file its command keeps the lock,
                // and must keep excluding everyone until it exits.
                let Some(pidfd) = open_pidfd(wrapper) else {
                    return Ok(());
                };
                let section_pidfd = open_pidfd(section);
                if !(holding(slot) && slot.section_round.load(SeqCst) == round) {
                    return Ok(());
                }
                let at = now_ns();
                if groups && rng.below(2) == 0 {
                    // The wrapper leads the group its command is in, and was
                    // holding a moment ago: a group id is not reused while
                    // a member lives, and the section still held.
                    kill_group(wrapper)?;
                    kill_and_wait(&pidfd)?;
                    if let Some(section) = &section_pidfd {
                        kill_and_wait(section)?;
                    }
                    chaos.groups_killed += 1;
                } else {
                    kill_and_wait(&pidfd)?;
                }
                if holding(slot) && slot.section_round.load(SeqCst) == round {
                    chaos.wrapper_deaths.push((lock, at));
                } else {
                    chaos.missed += 1;
                }
            } else {
                // The section, the process that holds the lock (and the
                // detector) under `lockfile run`.
                let Some(pidfd) = open_pidfd(section) else {
                    return Ok(());
                };
                if !(holding(slot) && slot.pid.load(SeqCst) == section) {
                    return Ok(());
                }
                let at = now_ns();
                kill_and_wait(&pidfd)?;
                if holding(slot) && slot.pid.load(SeqCst) == section {
                    chaos.section_deaths.push((lock, at));
                } else {
                    chaos.missed += 1;
                }
            }
        }
    }
    Ok(())
}
