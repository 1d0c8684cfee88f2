//! `slots`: waiting for any one of N slots (`LockOptions::acquire_slot`,
//! which sleeps on an inotify watch of the directory and tries every slot
//! once a second anyway) against the kernel's own wait on one lock
//! (`LockOptions::acquire`), measured in one run. See BENCHMARKS.md,
//! "Slots: waiting for any of N".
//!
//! 1. The wake-up lag: every slot held by a holder in another process, a
//!    waiter in a third; a random slot freed by the holder's `release()`,
//!    or by the SIGKILL of a victim holding it; the lag from the freeing
//!    stamp to the waiter's, each round against the same handoff on one
//!    plain lock (the floor), and against the raw replica of
//!    `acquire_slot`'s syscalls.
//! 2. The CPU a waiter uses while nothing comes free, over a window.
//! 3. What a sweep and a `try_acquire_slot` cost at N, against the raw
//!    probe of the same N held files, and one read of /proc/locks.
//!
//! ```sh
//! cargo run --release -p lockfile-bench --bin slots              # full size, under a minute
//! cargo run --release -p lockfile-bench --bin slots -- --quick   # about 10 s
//! ```

mod child;
mod cost;
mod lag;
mod procfs;
mod replica;
mod report;
mod roles;
mod sys;

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use clap::Parser;
use lockfile::slot::SlotCount;
use lockfile_bench::stats::Rng;

use crate::lag::{Ending, Lab, Waiter};
use crate::report::{Report, Run};

#[derive(Debug, Parser)]
#[command(
    name = "slots",
    about = "Measure waiting for any of N slots against the kernel's own wait on one lock, in one run."
)]
struct Args {
    /// The short run CI uses to keep this program from rotting (a few
    /// seconds); figures are rougher.
    #[arg(long)]
    quick: bool,

    /// Measured rounds of the wake-up lag, each one handoff of every
    /// variant, after one warm-up round (default: 10 quick, 50 full).
    #[arg(long)]
    rounds: Option<usize>,

    /// The window over which the waiters' CPU is measured, in seconds
    /// (default: 3 quick, 10 full).
    #[arg(long)]
    window: Option<u64>,

    /// Rounds of the costs at N (default: 5 quick, 20 full).
    #[arg(long)]
    cost_rounds: Option<usize>,

    /// The numbers of slots measured (1 to 1024).
    #[arg(long, value_delimiter = ',', default_values_t = [1u16, 16, 128, 1024])]
    slots: Vec<u16>,

    /// Seed for the shuffles and the slots freed (default: from the clock;
    /// printed).
    #[arg(long)]
    seed: Option<u64>,
}

fn main() -> Result<()> {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("--child") {
        return match &argv[2..] {
            [role, open_files] if role == "holder" => roles::holder_main(open_files.parse()?),
            [role] if role == "waiter" => roles::waiter_main(),
            [role, path, n, k] if role == "victim" => roles::victim_main(path, n, k),
            other => bail!("unknown child role {other:?}"),
        };
    }
    let args = Args::parse();
    let mut slots = args.slots.clone();
    slots.sort_unstable();
    slots.dedup();
    if let Some(&n) = slots
        .iter()
        .find(|&&n| SlotCount::new(u64::from(n)).is_none())
    {
        bail!("--slots {n}: a number of slots is 1 to 1024");
    }
    let q = args.quick;
    let rounds = args.rounds.unwrap_or(if q { 10 } else { 50 }).max(1);
    let cost_rounds = args.cost_rounds.unwrap_or(if q { 5 } else { 20 }).max(1);
    let window = Duration::from_secs(args.window.unwrap_or(if q { 3 } else { 10 }).max(1));
    let seed = args
        .seed
        .unwrap_or_else(|| sys::mono_ns() ^ u64::from(std::process::id()));
    let mut rng = Rng::new(seed);
    let exe = std::env::current_exe().context("cannot find this program")?;
    let tmp = tempfile::Builder::new()
        .prefix("lockfile-bench-slots-")
        .tempdir()
        .context("cannot create a temporary directory")?;
    let started = Instant::now();
    let filesystem = lockfile_bench::fs::filesystem_of(tmp.path()).context("statfs")?;
    let mut report = Report::new(&Run {
        quick: q,
        rounds,
        cost_rounds,
        seed,
        filesystem: &filesystem,
    });

    eprintln!("holding every slot of N = {slots:?}...");
    let mut lab = Lab::start(&exe, tmp.path(), &slots)?;
    eprintln!("handoffs...");
    let lags = lag::measure(&mut lab, rounds, &mut rng)?;
    for ending in Ending::ALL {
        report.lags(&lags, ending, &Waiter::after(ending, &slots));
    }
    eprintln!("waiting {} s...", window.as_secs());
    let waits = cost::cpu_while_waiting(&lab, &exe, window)?;
    report.cpu(&waits, window);
    eprintln!("costs at N...");
    let costs = cost::measure(&mut lab, cost_rounds, &mut rng)?;
    report.costs(&costs, &waits);
    drop(lab);
    report.finish(started.elapsed());
    print!("{}", report.text);
    Ok(())
}
