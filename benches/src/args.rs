//! The command line, and how much of each section it asks to measure.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "compare",
    about = "Measure lockfile against raw syscalls and its peers, in one run, as ratios to floors measured in the same rounds."
)]
pub(crate) struct Args {
    /// The short run CI uses to keep this program from rotting (well under
    /// a minute); figures are rougher.
    #[arg(long)]
    pub(crate) quick: bool,

    /// Measured rounds, after one warm-up round (default: 3 quick, 10 full).
    #[arg(long)]
    pub(crate) rounds: Option<usize>,

    /// The `lockfile` binary for the whole-process rows (default: next to
    /// this program, i.e. target/release/lockfile for a release build). They
    /// run a copy of it, as an install writes one, and the file itself.
    #[arg(long, value_name = "PATH")]
    pub(crate) lockfile_bin: Option<PathBuf>,

    /// Lock files in the scanned directory.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) files: usize,

    /// How many of them a child process holds.
    #[arg(long, default_value_t = 100)]
    pub(crate) held: usize,

    /// Unrelated locks that a child holds elsewhere on the host while
    /// `inspect` of one file is timed again, since it reads the kernel's
    /// whole lock table (default: 10000, 1000 with --quick).
    #[arg(long)]
    pub(crate) unrelated: Option<usize>,

    /// Processes named by the records of the planted scan's many-processes
    /// row (default: one per file, 1500; 100 with --quick).
    #[arg(long)]
    pub(crate) planters: Option<usize>,

    /// Open descriptors of each of those processes (default: 1000; the one
    /// process of the one-process row has 19000, or as many as the limit on
    /// open files allows).
    #[arg(long, default_value_t = 1_000)]
    pub(crate) planter_descriptors: usize,

    /// Seed for the shuffles (default: from the clock; printed).
    #[arg(long)]
    pub(crate) seed: Option<u64>,

    /// Only these sections (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub(crate) only: Vec<Section>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Section {
    Cycle,
    Handoff,
    Scan,
    Planted,
    Process,
}

/// How much to measure.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Size {
    pub(crate) rounds: usize,
    /// Rounds of the lock-cycle section: short rounds, many of them, so
    /// that each variant's batch runs close in time to its floor's.
    pub(crate) cycle_rounds: usize,
    /// Lock cycles (and single syscalls) per variant per round.
    pub(crate) batch: usize,
    /// Handoffs per (placement, variant) per round.
    pub(crate) handoffs: usize,
    /// The long wait over which the waiter's CPU use is measured.
    pub(crate) cpu_wait: Duration,
    /// Process runs per program per round.
    pub(crate) processes: usize,
    /// `inspect` calls on one file per round.
    pub(crate) inspects: usize,
}

impl Size {
    pub(crate) fn new(args: &Args) -> Size {
        let mut size = if args.quick {
            Size {
                rounds: 3,
                cycle_rounds: 9,
                batch: 500,
                handoffs: 15,
                cpu_wait: Duration::from_millis(500),
                processes: 10,
                inspects: 100,
            }
        } else {
            Size {
                rounds: 10,
                cycle_rounds: 30,
                batch: 2_000,
                handoffs: 60,
                cpu_wait: Duration::from_secs(3),
                processes: 40,
                inspects: 500,
            }
        };
        if let Some(rounds) = args.rounds {
            size.rounds = rounds.max(1);
            size.cycle_rounds = 3 * size.rounds;
        }
        size
    }
}
