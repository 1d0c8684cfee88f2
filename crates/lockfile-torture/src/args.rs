//! The command line of every part the one binary plays: the coordinator's
//! knobs and the hidden roles it starts, each with its own options.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "lockfile-torture",
    about = "Multi-process torture test of lockfile locks and leases: exclusion under SIGKILL, reap and inspect, fencing",
    after_help = "Exit status: 0 when the run passed; 1 when it found an overlap, a fencing token out of order, a held lock unlinked or its record overwritten, an acquisition made to fail by inspect, an inspection that misreported a lock, or any unexpected error; 2 when it could not run."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) role: Option<Role>,

    #[command(flatten)]
    pub(crate) run: RunConfig,
}

/// The knobs of a run. The defaults take a few seconds on two cores.
#[derive(Debug, Clone, Args)]
pub(crate) struct RunConfig {
    /// Worker processes taking the locks.
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..=crate::board::MAX_SLOTS as i64))]
    pub(crate) workers: u32,

    /// How many of the workers go through the `lockfile run` command instead
    /// of the library (default: a third, at least one).
    #[arg(long)]
    pub(crate) run_workers: Option<u32>,

    /// Critical sections each worker completes.
    #[arg(long, default_value_t = 60)]
    pub(crate) rounds: u64,

    /// Lock files the workers share (each section takes one, at random).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub(crate) locks: u32,

    /// Stop after this many seconds even if rounds remain (default: no limit).
    #[arg(long)]
    pub(crate) seconds: Option<f64>,

    /// Milliseconds between two SIGKILLs of the chaos loop (0: no chaos).
    #[arg(long, default_value_t = 15)]
    pub(crate) kill_every: u64,

    /// The longest a critical section lasts, in microseconds (each lasts a
    /// random time up to this).
    #[arg(long, default_value_t = 1500)]
    pub(crate) hold_us: u64,

    /// The `lockfile` command (default: the one next to this executable).
    #[arg(long)]
    pub(crate) lockfile_bin: Option<PathBuf>,

    /// Self-test of the detector: library workers enter their critical
    /// section without taking the lock, so the run must report overlaps.
    #[arg(long, hide = true)]
    pub(crate) sabotage: bool,

    /// Self-test of the fencing judgment (with leases): library workers log
    /// their tokens in reverse order, so the run must report inversions.
    #[arg(long, hide = true)]
    pub(crate) sabotage_fencing: bool,

    /// Run in this (existing, empty) directory instead of a temporary one,
    /// and keep it.
    #[arg(long)]
    pub(crate) dir: Option<PathBuf>,

    #[command(flatten)]
    pub(crate) engine: EngineArgs,
}

/// Lease mode: the server whose leases the workers take instead of lock
/// files (`--locks` then counts lease names).
#[derive(Debug, Clone, Args)]
pub(crate) struct EngineArgs {
    /// Take leases on PostgreSQL at this URL (directly or through PgBouncer
    /// in transaction pooling mode), creating its tables first. Needs a
    /// build with the `postgres` feature, and a `lockfile` command with it.
    #[arg(long, value_name = "URL", conflicts_with_all = ["etcd", "redis"])]
    pub(crate) postgres: Option<String>,

    /// Take leases on etcd at these comma-separated endpoints. Needs a build
    /// with the `etcd` feature, and a `lockfile` command with it.
    #[arg(long, value_name = "ENDPOINTS", conflicts_with = "redis")]
    pub(crate) etcd: Option<String>,

    /// Take leases on Redis at this URL. Needs a build with the `redis`
    /// feature, and a `lockfile` command with it.
    #[arg(long, value_name = "URL")]
    pub(crate) redis: Option<String>,

    /// With leases: their time to live, in seconds. Short, so that holders
    /// killed by the chaos loop are taken over often.
    #[arg(long, default_value_t = 2.0)]
    pub(crate) ttl: f64,
}

/// The parts the coordinator starts; not for direct use.
#[derive(Debug, Subcommand)]
pub(crate) enum Role {
    /// A library worker.
    #[command(hide = true)]
    Worker(SlotArgs),
    /// A worker that takes the lock through `lockfile run`.
    #[command(hide = true)]
    Driver(DriverArgs),
    /// The command a driver runs under `lockfile run`.
    #[command(hide = true)]
    Section(SectionArgs),
    /// Reaps the lock directory in a loop.
    #[command(hide = true)]
    Reaper(ToolArgs),
    /// Inspects in a tight loop.
    #[command(hide = true)]
    Inspector(ToolArgs),
    /// Takes a lock nobody else takes, in a loop.
    #[command(hide = true)]
    Probe(DirArgs),
    /// A library worker taking leases.
    #[command(hide = true)]
    LeaseWorker(LeaseArgs<SlotArgs>),
    /// A worker that takes leases through `lockfile run`.
    #[command(hide = true)]
    LeaseDriver(LeaseArgs<DriverArgs>),
    /// The command a lease driver runs under `lockfile run`.
    #[command(hide = true)]
    LeaseSection(SectionArgs),
}

/// A lease role: its lock-file role's options and the leases'.
#[derive(Debug, Args)]
pub(crate) struct LeaseArgs<T: Args> {
    #[command(flatten)]
    pub(crate) role: T,
    #[command(flatten)]
    pub(crate) engine: EngineArgs,
}

#[derive(Debug, Args)]
pub(crate) struct DirArgs {
    #[arg(long)]
    pub(crate) dir: PathBuf,
}

#[derive(Debug, Args)]
pub(crate) struct SlotArgs {
    #[arg(long)]
    pub(crate) dir: PathBuf,
    #[arg(long)]
    pub(crate) slot: usize,
}

#[derive(Debug, Args)]
pub(crate) struct DriverArgs {
    #[arg(long)]
    pub(crate) dir: PathBuf,
    #[arg(long)]
    pub(crate) slot: usize,
    #[arg(long)]
    pub(crate) lockfile_bin: PathBuf,
}

#[derive(Debug, Args)]
pub(crate) struct SectionArgs {
    #[arg(long)]
    pub(crate) dir: PathBuf,
    #[arg(long)]
    pub(crate) slot: usize,
    #[arg(long)]
    pub(crate) lock: u32,
    #[arg(long)]
    pub(crate) round: u32,
}

#[derive(Debug, Args)]
pub(crate) struct ToolArgs {
    #[arg(long)]
    pub(crate) dir: PathBuf,
    #[arg(long)]
    pub(crate) lockfile_bin: PathBuf,
}
