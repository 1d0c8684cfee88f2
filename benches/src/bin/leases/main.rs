//! `leases`: the lease engines (PostgreSQL, etcd and Redis) against raw
//! round trips of their own statements, requests and scripts, measured in
//! one run on servers this program starts. See BENCHMARKS.md, "Leases:
//! PostgreSQL, etcd and Redis".
//!
//! Figures 1 and 2 are ratios against floors measured in the same rounds
//! (variants shuffled in every round, after a warm-up round); figure 3 is
//! measured against the TTL; figure 4 against a trivial round trip sent
//! over the same window; Redis's wake-up after a release against a `PING`
//! of the same round.

mod args;
mod load;
mod report;
mod roundtrips;
mod servers;
mod slot_wakeup;
mod takeover;
mod variant;
mod wakeup;

use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Parser as _;
use lockfile_bench::stats::Rng;

use crate::args::{Args, Figure, Size};
use crate::servers::Servers;
use crate::takeover::Kind;

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
    let given = (
        &args.postgres_url,
        &args.bouncer_url,
        &args.etcd_endpoint,
        &args.redis_url,
    );
    let servers = match given {
        (Some(pg), Some(bouncer), Some(etcd), Some(redis)) => Servers {
            postgres_url: pg.clone(),
            bouncer_url: bouncer.clone(),
            etcd_endpoint: etcd.clone(),
            redis_url: redis.clone(),
            redis_polling_url: None,
            socket_url: None,
            started: None,
        },
        _ => {
            eprintln!("starting PostgreSQL, PgBouncer, etcd and Redis...");
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
        loads.sort_by_key(|l| Kind::ALL.iter().position(|&k| k == l.kind));
        out.loads(&loads, servers.started.is_some());
    }
    if want(Figure::Wakeup) {
        eprintln!("Redis wake-ups after a release...");
        let w = wakeup::measure(&servers, size.wakeups, &mut rng)?;
        out.wakeups(&w);
    }
    if want(Figure::SlotWakeup) {
        eprintln!("slot waiters' wake-ups after a release, on each engine...");
        let lags = slot_wakeup::measure(&servers, size.slot_wakeups, &mut rng)?;
        out.slot_wakeups(&lags);
    }
    out.finish(started.elapsed());
    print!("{}", out.text);
    Ok(())
}
