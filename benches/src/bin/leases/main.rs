//! `leases`: the lease engines (PostgreSQL, and etcd beside it) against raw
//! round trips of their own statements and requests, measured in one run on
//! servers this program starts. See BENCHMARKS.md, "Leases: PostgreSQL and
//! etcd".
//!
//! Figures 1 and 2 are ratios against floors measured in the same rounds
//! (variants shuffled in every round, after a warm-up round); figure 3 is
//! measured against the TTL; figure 4 against a trivial round trip sent
//! over the same window.

mod load;
#[allow(dead_code, unreachable_pub, clippy::all)]
#[path = "../../../../crates/lockfile-postgres/tests/common/pg.rs"]
mod pg;
mod report;
mod roundtrips;
mod servers;
// The engine's own statements, so that the floor sends exactly what it
// sends.
#[allow(dead_code)]
#[path = "../../../../crates/lockfile-postgres/src/sql.rs"]
mod sql;
mod takeover;

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Parser, ValueEnum};
use lockfile_bench::stats::Rng;

use crate::servers::Servers;
use crate::takeover::Kind;

#[derive(Debug, Parser)]
#[command(
    name = "leases",
    about = "Measure the PostgreSQL and etcd lease engines against raw round trips of their own statements, in one run."
)]
struct Args {
    /// The short run CI uses to keep this program from rotting (well under
    /// a minute); figures are rougher.
    #[arg(long)]
    quick: bool,

    /// Measured rounds of figures 1 and 2, after one warm-up round
    /// (default: 3 quick, 10 full).
    #[arg(long)]
    rounds: Option<usize>,

    /// Operations per variant per round (default: 5 quick, 20 full).
    #[arg(long)]
    batch: Option<usize>,

    /// Takeovers after SIGKILL per engine (default: 2 quick, 20 full).
    #[arg(long)]
    takeovers: Option<usize>,

    /// The TTL of the takeover's leases, in milliseconds (etcd grants whole
    /// seconds, at least 2).
    #[arg(long, default_value_t = 2_000)]
    takeover_ttl_ms: u64,

    /// Leases held at once by the load figure (default: 50 quick, 1000
    /// full).
    #[arg(long)]
    leases: Option<usize>,

    /// The load's TTL in seconds (renewed every third of it; default: 3
    /// quick, 10 full).
    #[arg(long)]
    load_ttl: Option<u64>,

    /// How long the load is measured, in seconds (default: 3 quick, 20
    /// full).
    #[arg(long)]
    window: Option<u64>,

    /// The PostgreSQL server's URL, with the lease schema's owner (the
    /// schema is created). With --bouncer-url and --etcd-endpoint: servers
    /// of your own instead of this program's. Their CPU is not measured.
    #[arg(long, value_name = "URL", requires_all = ["bouncer_url", "etcd_endpoint"])]
    postgres_url: Option<String>,

    /// The same database through PgBouncer in transaction pooling mode.
    #[arg(long, value_name = "URL", requires_all = ["postgres_url", "etcd_endpoint"])]
    bouncer_url: Option<String>,

    /// An etcd endpoint (`http://host:2379`).
    #[arg(long, value_name = "URL", requires_all = ["postgres_url", "bouncer_url"])]
    etcd_endpoint: Option<String>,

    /// Seed for the shuffles (default: from the clock; printed).
    #[arg(long)]
    seed: Option<u64>,

    /// Only these figures (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<Figure>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Figure {
    /// Acquire + release, and the renewal, against raw round trips.
    Roundtrip,
    /// Takeover after the holder's SIGKILL.
    Takeover,
    /// Many leases renewing against one server.
    Load,
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
}

impl Size {
    fn new(args: &Args) -> Size {
        let q = args.quick;
        Size {
            rounds: args.rounds.unwrap_or(if q { 3 } else { 10 }).max(1),
            batch: args.batch.unwrap_or(if q { 5 } else { 20 }).max(1),
            takeovers: args.takeovers.unwrap_or(if q { 2 } else { 20 }).max(1),
            takeover_ttl: Duration::from_millis(args.takeover_ttl_ms.max(1)),
            leases: args.leases.unwrap_or(if q { 50 } else { 1_000 }).max(1),
            load_ttl: Duration::from_secs(args.load_ttl.unwrap_or(if q { 3 } else { 10 }).max(1)),
            window: Duration::from_secs(args.window.unwrap_or(if q { 3 } else { 20 }).max(1)),
        }
    }
}

fn main() -> Result<()> {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("--child") {
        return match &argv[2..] {
            [role, kind, name, ttl_ms] if role == "holder" => {
                takeover::holder_main(kind, name, ttl_ms)
            }
            other => bail!("unknown child role {other:?}"),
        };
    }
    let args = Args::parse();
    let size = Size::new(&args);
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            ^ u64::from(std::process::id())
    });
    let mut rng = Rng::new(seed);
    let want = |f: Figure| args.only.is_empty() || args.only.contains(&f);
    let exe = std::env::current_exe().context("cannot find this program")?;

    let started = Instant::now();
    let servers = match (&args.postgres_url, &args.bouncer_url, &args.etcd_endpoint) {
        (Some(pg), Some(bouncer), Some(etcd)) => Servers {
            postgres_url: pg.clone(),
            bouncer_url: bouncer.clone(),
            etcd_endpoint: etcd.clone(),
            socket_url: None,
            started: None,
        },
        _ => {
            eprintln!("starting PostgreSQL, PgBouncer and etcd...");
            Servers::start()?
        }
    };
    servers.init_schema()?;
    let versions = report::Versions::read(&servers)?;
    let mut out = report::Report::new(args.quick, &size, seed, &versions);

    if want(Figure::Roundtrip) {
        eprintln!("acquire + release and renewals...");
        let results = roundtrips::measure(&servers, size.rounds, size.batch, &mut rng)?;
        out.roundtrips(&results);
    }
    if want(Figure::Takeover) {
        eprintln!("takeovers after SIGKILL...");
        let t = takeover::measure(&servers, &exe, size.takeover_ttl, size.takeovers, &mut rng)?;
        out.takeovers(&t, size.takeover_ttl);
    }
    if want(Figure::Load) {
        let mut loads = Vec::new();
        let mut kinds = Kind::ALL;
        rng.shuffle(&mut kinds);
        for kind in kinds {
            eprintln!("{} leases renewing on {}...", size.leases, kind.name());
            loads.push(load::measure(
                kind,
                &servers,
                size.leases,
                size.load_ttl,
                size.window,
            )?);
        }
        loads.sort_by_key(|l| l.kind != Kind::Postgres);
        out.loads(&loads, servers.started.is_some());
    }
    out.finish(started.elapsed());
    print!("{}", out.text);
    Ok(())
}
