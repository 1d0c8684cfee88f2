//! The command line, and how much of each figure it asks to measure.

use std::time::Duration;

use clap::{Parser, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "leases",
    about = "Measure the PostgreSQL, etcd and Redis lease engines against raw round trips of their own statements, in one run."
)]
pub(crate) struct Args {
    /// The short run CI uses to keep this program from rotting (well under
    /// a minute); figures are rougher.
    #[arg(long)]
    pub(crate) quick: bool,

    /// Measured rounds of figures 1 and 2, after one warm-up round
    /// (default: 3 quick, 10 full).
    #[arg(long)]
    pub(crate) rounds: Option<usize>,

    /// Operations per variant per round (default: 5 quick, 20 full).
    #[arg(long)]
    pub(crate) batch: Option<usize>,

    /// Takeovers after SIGKILL per engine (default: 2 quick, 20 full).
    #[arg(long)]
    pub(crate) takeovers: Option<usize>,

    /// The TTL of the takeover's leases, in milliseconds (etcd grants whole
    /// seconds, at least 2).
    #[arg(long, default_value_t = 2_000)]
    pub(crate) takeover_ttl_ms: u64,

    /// Leases held at once by the load figure (default: 50 quick, 1000
    /// full).
    #[arg(long)]
    pub(crate) leases: Option<usize>,

    /// The load's TTL in seconds (renewed every third of it; default: 3
    /// quick, 10 full).
    #[arg(long)]
    pub(crate) load_ttl: Option<u64>,

    /// How long the load is measured, in seconds (default: 3 quick, 20
    /// full).
    #[arg(long)]
    pub(crate) window: Option<u64>,

    /// The PostgreSQL server's URL, with the lease schema's owner (the
    /// schema is created). With --bouncer-url, --etcd-endpoint and
    /// --redis-url: servers of your own instead of this program's. Their
    /// CPU is not measured.
    #[arg(long, value_name = "URL", requires_all = ["bouncer_url", "etcd_endpoint", "redis_url"])]
    pub(crate) postgres_url: Option<String>,

    /// The same database through PgBouncer in transaction pooling mode.
    #[arg(long, value_name = "URL", requires_all = ["postgres_url", "etcd_endpoint", "redis_url"])]
    pub(crate) bouncer_url: Option<String>,

    /// An etcd endpoint (`http://host:2379`).
    #[arg(long, value_name = "URL", requires_all = ["postgres_url", "bouncer_url", "redis_url"])]
    pub(crate) etcd_endpoint: Option<String>,

    /// A Redis primary (`redis://[USER:PASSWORD@]host:6379`), whose
    /// `maxmemory-policy` keeps lease keys. The polling wake-up is not
    /// measured on it (it needs a user refused `SUBSCRIBE`).
    #[arg(long, value_name = "URL", requires_all = ["postgres_url", "bouncer_url", "etcd_endpoint"])]
    pub(crate) redis_url: Option<String>,

    /// Measured rounds of the Redis wake-up figure, each one release per
    /// variant (default: 3 quick, 50 full).
    #[arg(long)]
    pub(crate) wakeups: Option<usize>,

    /// Seed for the shuffles (default: from the clock; printed).
    #[arg(long)]
    pub(crate) seed: Option<u64>,

    /// Only these figures (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub(crate) only: Vec<Figure>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Figure {
    /// Acquire + release, and the renewal, against raw round trips.
    Roundtrip,
    /// Takeover after the holder's SIGKILL.
    Takeover,
    /// Many leases renewing against one server.
    Load,
    /// A waiting Redis acquire's wake-up after the holder's release.
    Wakeup,
    /// A waiter for any of N slot leases, on each engine (`--slots`).
    SlotWakeup,
}

/// How much to measure.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Size {
    pub(crate) rounds: usize,
    pub(crate) batch: usize,
    pub(crate) takeovers: usize,
    pub(crate) takeover_ttl: Duration,
    pub(crate) leases: usize,
    pub(crate) load_ttl: Duration,
    pub(crate) window: Duration,
    pub(crate) wakeups: usize,
    pub(crate) slot_wakeups: usize,
}

impl Size {
    pub(crate) fn new(args: &Args) -> Size {
        let q = args.quick;
        Size {
            rounds: args.rounds.unwrap_or(if q { 3 } else { 10 }).max(1),
            batch: args.batch.unwrap_or(if q { 5 } else { 20 }).max(1),
            takeovers: args.takeovers.unwrap_or(if q { 2 } else { 20 }).max(1),
            takeover_ttl: Duration::from_millis(args.takeover_ttl_ms.max(1)),
            leases: args.leases.unwrap_or(if q { 50 } else { 1_000 }).max(1),
            load_ttl: Duration::from_secs(args.load_ttl.unwrap_or(if q { 3 } else { 10 }).max(1)),
            window: Duration::from_secs(args.window.unwrap_or(if q { 3 } else { 20 }).max(1)),
            wakeups: args.wakeups.unwrap_or(if q { 3 } else { 50 }).max(1),
            slot_wakeups: if q { 2 } else { 15 },
        }
    }
}
