//! Figures 2 and 3: the CPU a waiter uses while nothing comes free, and
//! what one sweep and one `try_acquire_slot` cost at N, against the raw
//! probe of the same N held files, measured in the same rounds.

use std::ffi::CString;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use lockfile::LockOptions;
use lockfile::slot::{SlotCount, slot_path};
use lockfile_bench::stats::{Results, Rng};

use crate::child::Child;
use crate::lag::{Lab, Waiter, text};
use crate::{procfs, sys};

/// One waiter's long wait.
#[derive(Debug)]
pub(crate) struct Waiting {
    pub(crate) waiter: Waiter,
    /// CPU used over the window, in nanoseconds.
    pub(crate) cpu_ns: f64,
    pub(crate) wall_ns: f64,
    /// Its voluntary context switches: at least one per wake-up.
    pub(crate) wakeups: u64,
}

impl Waiting {
    /// CPU per second of waiting, in nanoseconds: one sweep's worth.
    pub(crate) fn per_second(&self) -> f64 {
        self.cpu_ns / self.wall_ns * 1e9
    }
}

/// One waiter of each kind (the plain lock and every set), all at once,
/// each a process of its own, each in a directory of its own, waiting over
/// the same `window` with every slot held and nothing released.
pub(crate) fn cpu_while_waiting(lab: &Lab, exe: &Path, window: Duration) -> Result<Vec<Waiting>> {
    let mut children = Vec::new();
    for (waiter, path) in &lab.waiters {
        let mut child = Child::start(exe, "waiter", &[])?;
        let how = if *waiter == Waiter::Plain {
            "acquire"
        } else {
            "slots"
        };
        child.expect(
            &["wait", text(path)?, &waiter.n().to_string(), how],
            "waiting",
        )?;
        procfs::await_asleep(child.pid(), *waiter == Waiter::Plain)?;
        children.push((*waiter, child));
    }
    let reading = |child: &Child| -> Result<(u64, u64, u64)> {
        let pid = child.pid();
        let cpu = procfs::cpu_ns(pid).context("no CPU time in /proc")?;
        let switches = procfs::voluntary_switches(pid).context("no context switches in /proc")?;
        Ok((cpu, switches, sys::mono_ns()))
    };
    let before = children
        .iter()
        .map(|(_, c)| reading(c))
        .collect::<Result<Vec<_>>>()?;
    std::thread::sleep(window);
    let mut waits = Vec::new();
    for ((waiter, child), (cpu0, sw0, t0)) in children.iter().zip(before) {
        let (cpu1, sw1, t1) = reading(child)?;
        waits.push(Waiting {
            waiter: *waiter,
            cpu_ns: cpu1.saturating_sub(cpu0) as f64,
            wall_ns: t1.saturating_sub(t0) as f64,
            wakeups: sw1.saturating_sub(sw0),
        });
    }
    // Dropping them kills them, still waiting.
    drop(children);
    Ok(waits)
}

/// What is timed at N, in this process, every slot held by the holder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// The floor: the raw probe of the N held files, one after another.
    Probe,
    /// `try_acquire_slot` with every slot held: N attempts, then one more
    /// round that names each holder in the error.
    AllHeld,
    /// `try_acquire_slot` with only the last slot free: N − 1 held slots
    /// tried before it.
    LastFree,
}

impl Op {
    pub(crate) const ALL: [Op; 3] = [Op::Probe, Op::AllHeld, Op::LastFree];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Op::Probe => {
                "floor: raw probe of the N held files (open read-only, fstat, flock(LOCK_EX, non-blocking), close)"
            }
            Op::AllHeld => "try_acquire_slot, every slot held (its error names each holder)",
            Op::LastFree => "try_acquire_slot, only the last slot free (takes it)",
        }
    }
}

pub(crate) fn cost_key(op: Op, n: u16) -> String {
    format!("{op:?}|{n}")
}

/// The key of one read of /proc/locks, the sweep's possible replacement.
pub(crate) const PROC_LOCKS: &str = "read /proc/locks";
/// The lines of /proc/locks (an extra figure).
pub(crate) const PROC_LOCKS_LINES: &str = "lines of /proc/locks";

/// Every (op, N) pair and one read of /proc/locks, once per round in a
/// fresh shuffled order, after one warm-up round.
pub(crate) fn measure(lab: &mut Lab, rounds: usize, rng: &mut Rng) -> Result<Results> {
    let sets: Vec<(u16, String, Vec<CString>)> = lab
        .waiters
        .iter()
        .filter_map(|(w, path)| match w {
            Waiter::Slots(n) => Some((*n, path)),
            _ => None,
        })
        .map(|(n, path)| {
            let files = (0..n)
                .map(|k| sys::cpath(&slot_path(path, k)))
                .collect::<Result<Vec<_>>>()?;
            Ok((n, text(path)?.to_owned(), files))
        })
        .collect::<Result<_>>()?;
    let mut variants: Vec<Option<(Op, usize)>> = vec![None];
    for set in 0..sets.len() {
        variants.extend(Op::ALL.map(|op| Some((op, set))));
    }
    let mut results = Results::default();
    for round in 0..=rounds {
        rng.shuffle(&mut variants);
        if round > 0 {
            results.start_round();
        }
        for &variant in &variants {
            let Some((op, set)) = variant else {
                let started = Instant::now();
                let locks = std::fs::read_to_string("/proc/locks")?;
                let took = started.elapsed();
                if round > 0 {
                    results.record(PROC_LOCKS, took.as_nanos() as f64);
                    results.record_extra(PROC_LOCKS_LINES, locks.lines().count() as f64);
                }
                continue;
            };
            let (n, path, files) = &sets[set];
            let took = once(lab, op, *n, path, files)?;
            if round > 0 {
                results.record(&cost_key(op, *n), took.as_nanos() as f64);
            }
        }
    }
    Ok(results)
}

/// One timed operation on the set of `n` slots at `path`.
fn once(lab: &mut Lab, op: Op, n: u16, path: &str, files: &[CString]) -> Result<Duration> {
    let count = SlotCount::new(u64::from(n)).context("a slot count")?;
    match op {
        Op::Probe => {
            let started = Instant::now();
            for file in files {
                sys::probe_held(file)?;
            }
            Ok(started.elapsed())
        }
        Op::AllHeld => {
            let started = Instant::now();
            let outcome = LockOptions::new().try_acquire_slot(path, count);
            let took = started.elapsed();
            match outcome {
                Err(e) if e.is_contended() => Ok(took),
                Err(e) => Err(e.into()),
                Ok(guard) => bail!("took {:?} of a set whose every slot is held", guard.slot()),
            }
        }
        Op::LastFree => {
            let last = (n - 1).to_string();
            lab.holder().expect(&["give", path, &last], "ok")?;
            let started = Instant::now();
            let guard = LockOptions::new().try_acquire_slot(path, count)?;
            let took = started.elapsed();
            let index = guard.slot().map(|s| s.index);
            guard.release()?;
            if index != Some(n - 1) {
                bail!("took slot {index:?} of {n}, and only the last was free");
            }
            let n = n.to_string();
            lab.holder().expect(&["take", path, &n, &last], "ok")?;
            Ok(took)
        }
    }
}
