//! `async_waiters`: 1,000 waiters in one process, as tasks in
//! `LockOptions::acquire_async` (the core's `tokio` feature: one waiter
//! thread for the whole process, woken by inotify) against as many threads
//! blocked in `LockOptions::acquire` (the kernel's own flock wait), in one
//! run. See BENCHMARKS.md, "Async waiters".
//!
//! For each layout (every waiter on one lock file; spread over 10 files in
//! 5 directories) and each kind, a run starts the waiters while this
//! process holds the files, lets the files go once every one waits, and
//! measures every handoff's lag (a release's CLOCK_MONOTONIC stamp to the
//! next holder's) and the process's peak thread count. Each round runs
//! every variant once, in a shuffled order; the ratio is the async lag over
//! the blocking one of the same round.
//!
//! ```sh
//! cargo run --release -p lockfile-bench --bin async_waiters              # full size, under a minute
//! cargo run --release -p lockfile-bench --bin async_waiters -- --quick   # a few seconds
//! ```

mod chain;
mod procfs;
mod report;

use std::time::Instant;

use anyhow::{Context as _, Result};
use clap::Parser;
use lockfile_bench::clock::mono_ns;
use lockfile_bench::stats::{Results, Rng};

use crate::chain::{Kind, Layout};
use crate::report::{Report, Run, lag_key, threads_key, through_key};

#[derive(Debug, Parser)]
#[command(
    name = "async_waiters",
    about = "Measure 1,000 async waiters in one process against as many threads blocked in the kernel's flock wait, in one run."
)]
struct Args {
    /// The short run CI uses to keep this program from rotting (a few
    /// seconds); figures are rougher.
    #[arg(long)]
    quick: bool,

    /// Measured rounds, each one run of every variant, after one warm-up
    /// round (default: 3 quick, 30 full).
    #[arg(long)]
    rounds: Option<usize>,

    /// Waiters per run.
    #[arg(long, default_value_t = 1000)]
    waiters: usize,

    /// Seed for the shuffles (default: from the clock; printed).
    #[arg(long)]
    seed: Option<u64>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let rounds = args
        .rounds
        .unwrap_or(if args.quick { 3 } else { 30 })
        .max(1);
    let waiters = args.waiters.max(1);
    let seed = args
        .seed
        .unwrap_or_else(|| mono_ns() ^ u64::from(std::process::id()));
    let mut rng = Rng::new(seed);
    let tmp = tempfile::Builder::new()
        .prefix("lockfile-bench-async-")
        .tempdir()
        .context("cannot create a temporary directory")?;
    let started = Instant::now();
    let filesystem = lockfile_bench::fs::filesystem_of(tmp.path()).context("statfs")?;
    let mut report = Report::new(&Run {
        quick: args.quick,
        rounds,
        waiters,
        seed,
        filesystem: &filesystem,
    });
    let mut variants: Vec<(Kind, Layout)> = Layout::ALL
        .into_iter()
        .flat_map(|l| [(Kind::Blocking, l), (Kind::Async, l)])
        .collect();
    let mut results = Results::default();
    let mut run = 0;
    for round in 0..=rounds {
        eprintln!("round {round} of {rounds} (0: warm-up)...");
        rng.shuffle(&mut variants);
        if round > 0 {
            results.start_round();
        }
        for &(kind, layout) in &variants {
            run += 1;
            let dir = tmp.path().join(format!("run{run}"));
            let measured = chain::run(&dir, kind, layout, waiters)
                .with_context(|| format!("{kind:?} waiters on {}", layout.label()))?;
            if round > 0 {
                results.record_samples(&lag_key(kind, layout), &measured.lags);
                results.record(&through_key(kind, layout), measured.all_through_ns);
                results.record_extra(&threads_key(kind, layout), measured.peak_threads as f64);
            }
        }
    }
    for layout in Layout::ALL {
        report.layout(&results, layout, waiters);
    }
    report.finish(started.elapsed());
    print!("{}", report.text);
    Ok(())
}
