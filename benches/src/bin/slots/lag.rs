//! Figure 1: the wake-up lag. Every slot of a set (and the plain lock) is
//! held by the holder, another process; the waiter, a third, waits for any
//! of them; the holder releases a random one (or a victim holding it is
//! SIGKILLed) at a CLOCK_MONOTONIC stamp, and the waiter stamps the moment
//! it holds it. Both stamps are the same kernel clock, so their difference
//! means the same in both processes.
//!
//! The floor of each round is the same handoff on one plain lock, the
//! waiter blocked in `LockOptions::acquire`: the kernel's own flock wait,
//! woken by the unlock itself. After a release, the raw replica of
//! `acquire_slot`'s syscalls waits too, twice: its inotify watch closed
//! before its stamp, as `acquire_slot` closes it before it returns, and
//! after (see `crate::replica`).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use lockfile_bench::stats::{Results, Rng};

use crate::child::Child;
use crate::procfs;

/// After the waiter is asleep in its wait, the release comes this long
/// later plus a random phase of up to [`PHASE`], as for a job that has
/// been waiting a while (its sweeps come a second apart: see the report).
const SETTLE: Duration = Duration::from_millis(5);
const PHASE: Duration = Duration::from_millis(20);

/// How the held slot comes free.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    /// The holder calls `release()`.
    Release,
    /// The holder is SIGKILLed: the kernel closes its descriptors.
    Kill,
}

impl Ending {
    pub(crate) const ALL: [Ending; 2] = [Ending::Release, Ending::Kill];
}

/// What the waiter waits for, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Waiter {
    /// One plain lock, in `LockOptions::acquire`: the floor.
    Plain,
    /// Any of N slots, in `LockOptions::acquire_slot`.
    Slots(u16),
    /// Any of N slots, by the raw replica of `acquire_slot`'s syscalls,
    /// its watch closed before the stamp (as `acquire_slot` does).
    Replica(u16),
    /// The same, its watch closed after the stamp.
    ReplicaLate(u16),
}

impl Waiter {
    pub(crate) fn label(self) -> String {
        match self {
            Waiter::Plain => {
                "floor: LockOptions::acquire of one plain lock (the kernel's flock wait)".to_owned()
            }
            Waiter::Slots(n) => format!("acquire_slot, any of N = {n}"),
            Waiter::Replica(n) => format!(
                "raw replica of acquire_slot's syscalls, N = {n}: its inotify watch closed before it returns (the library's first version)"
            ),
            Waiter::ReplicaLate(n) => {
                format!(
                    "… the same, its watch closed after it returns (as the library now does: once the guard lets go), N = {n}"
                )
            }
        }
    }

    /// The slot count of the commands: 0 for the plain lock.
    pub(crate) fn n(self) -> u16 {
        match self {
            Waiter::Plain => 0,
            Waiter::Slots(n) | Waiter::Replica(n) | Waiter::ReplicaLate(n) => n,
        }
    }

    /// How the waiter waits, as its command says.
    fn how(self) -> &'static str {
        match self {
            Waiter::Plain => "acquire",
            Waiter::Slots(_) => "slots",
            Waiter::Replica(_) => "replica",
            Waiter::ReplicaLate(_) => "replica-late",
        }
    }

    /// The waiters measured after each ending of a hold: every set, and,
    /// after a release, the replicas of each set of slots.
    pub(crate) fn after(ending: Ending, slots: &[u16]) -> Vec<Waiter> {
        let mut waiters = vec![Waiter::Plain];
        for &n in slots {
            waiters.push(Waiter::Slots(n));
            if ending == Ending::Release {
                waiters.extend([Waiter::Replica(n), Waiter::ReplicaLate(n)]);
            }
        }
        waiters
    }
}

/// The key of a series in the results.
pub(crate) fn key(ending: Ending, waiter: Waiter) -> String {
    format!("{ending:?}|{waiter:?}")
}

/// The files, the holder of them all, and the waiter.
#[derive(Debug)]
pub(crate) struct Lab {
    exe: PathBuf,
    holder: Child,
    waiter: Child,
    /// The plain lock first, then each set of slots, each in a directory of
    /// its own (a waiter watches its whole directory).
    pub(crate) waiters: Vec<(Waiter, PathBuf)>,
    slots: Vec<u16>,
}

impl Lab {
    pub(crate) fn start(exe: &Path, dir: &Path, slots: &[u16]) -> Result<Lab> {
        let mut waiters = vec![(Waiter::Plain, dir.join("plain").join("job.lock"))];
        for &n in slots {
            let path = dir.join(format!("n{n}")).join("job.lock");
            waiters.push((Waiter::Slots(n), path));
        }
        let files: u64 = slots.iter().map(|&n| u64::from(n)).sum::<u64>() + 1;
        let mut holder = Child::start(exe, "holder", &[OsStr::new(&(files + 64).to_string())])?;
        for (waiter, path) in &waiters {
            let parent = path.parent().expect("a file in a directory");
            std::fs::create_dir_all(parent)?;
            holder.expect(&["hold", text(path)?, &waiter.n().to_string()], "ok")?;
        }
        let waiter = Child::start(exe, "waiter", &[])?;
        Ok(Lab {
            exe: exe.to_owned(),
            holder,
            waiter,
            waiters,
            slots: slots.to_vec(),
        })
    }

    /// The set's lock file: the plain lock's, or slot 0's.
    pub(crate) fn path(&self, waiter: Waiter) -> &Path {
        &self
            .waiters
            .iter()
            .find(|(w, _)| w.n() == waiter.n())
            .expect("a set of every waiter")
            .1
    }

    pub(crate) fn slots(&self) -> &[u16] {
        &self.slots
    }

    pub(crate) fn holder(&mut self) -> &mut Child {
        &mut self.holder
    }

    /// One handoff: the lag in nanoseconds.
    fn sample(&mut self, ending: Ending, waiter: Waiter, rng: &mut Rng) -> Result<f64> {
        let n = waiter.n();
        let k = rng.below(u64::from(n.max(1))).to_string();
        let path = text(self.path(waiter))?.to_owned();
        let (path, n) = (path.as_str(), n.to_string());
        let victim = match ending {
            Ending::Release => None,
            Ending::Kill => {
                self.holder.expect(&["give", path, &k], "ok")?;
                let args = [path, &n, &k].map(OsStr::new);
                let victim = Child::start(&self.exe, "victim", &args)?;
                if victim.answer()? != "ok" {
                    bail!("the victim did not take slot {k} of {path}");
                }
                Some(victim)
            }
        };
        self.waiter
            .expect(&["wait", path, &n, waiter.how()], "waiting")?;
        procfs::await_asleep(self.waiter.pid(), waiter == Waiter::Plain)?;
        let phase = rng.below(PHASE.as_micros() as u64);
        std::thread::sleep(SETTLE + Duration::from_micros(phase));
        let freed_at: u64 = match victim {
            None => self.holder.ask(&["release", path, &k])?.parse()?,
            Some(victim) => victim.kill()?,
        };
        let answer = self.waiter.answer()?;
        let (held_at, index) = answer
            .split_once('\t')
            .with_context(|| format!("the waiter answered {answer:?}"))?;
        if index != k {
            bail!("the waiter took slot {index} of {path}, and slot {k} was the one freed");
        }
        let held_at: u64 = held_at.parse()?;
        self.holder.expect(&["take", path, &n, &k], "ok")?;
        Ok(held_at.saturating_sub(freed_at) as f64)
    }
}

/// Every (ending, waiter) pair once per round, in a fresh shuffled order,
/// after one warm-up round.
pub(crate) fn measure(lab: &mut Lab, rounds: usize, rng: &mut Rng) -> Result<Results> {
    let variants: Vec<(Ending, Waiter)> = Ending::ALL
        .into_iter()
        .flat_map(|e| {
            Waiter::after(e, lab.slots())
                .into_iter()
                .map(move |w| (e, w))
        })
        .collect();
    let mut results = Results::default();
    for round in 0..=rounds {
        let mut order = variants.clone();
        rng.shuffle(&mut order);
        if round > 0 {
            results.start_round();
        }
        for (ending, waiter) in order {
            let lag = lab.sample(ending, waiter, rng)?;
            if round > 0 {
                results.record_samples(&key(ending, waiter), &[lag]);
            }
        }
    }
    Ok(results)
}

/// A path as the commands carry it.
pub(crate) fn text(path: &Path) -> Result<&str> {
    path.to_str()
        .with_context(|| format!("a path that is not UTF-8: {}", path.display()))
}
