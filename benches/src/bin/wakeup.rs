//! `wakeup`: how soon a waiting PostgreSQL lease acquire returns after the
//! holder's release commits, listening (LISTEN/NOTIFY on a direct
//! connection) and polling (every min(1 s, TTL/10)), against a floor
//! measured in the same round: the round trip of a trivial statement
//! (`SELECT 1`, unnamed, as the engine sends its statements) on a direct
//! connection to the same server.
//!
//! It starts its own PostgreSQL and PgBouncer (the engine's test servers:
//! `initdb`, `pg_ctl` and `pgbouncer` must be installed), unless given
//! `--url` (then the pooled variant is skipped). Each round measures every
//! variant once, in a freshly shuffled order:
//!
//! - `listen`: the waiter listens on the server; the holder releases on
//!   the server directly;
//! - `listen, release via PgBouncer`: the same, the holder going through
//!   PgBouncer in transaction pooling mode (the notification is sent at the
//!   pooled commit);
//! - `poll`: no listener; the waiter's poll is a second apart (TTL 30 s).
//!
//! The lag of one sample is from the holder's `release()` being called to
//! the waiter's `acquire()` returning: the release's commit falls in
//! between, so this bounds the lag after the commit from above, by the
//! release statement's own round trip (its median is printed too). Its
//! return is no bound: on a busy machine the holder's thread may see the
//! reply of its release after the waiter, woken by the notification, has
//! already taken the lease. The release is sent a varying time after the waiter starts
//! waiting (its listener subscribed, when it has one), spread over the
//! poll interval, so that the polling lag samples the whole interval.
//!
//! ```sh
//! cargo run --release -p lockfile-bench --bin wakeup              # 50 rounds, about 2 minutes
//! cargo run --release -p lockfile-bench --bin wakeup -- --rounds 5
//! cargo run --release -p lockfile-bench --bin wakeup -- --url postgres://USER@HOST/DB
//! ```

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use clap::Parser;
use lockfile::wait::Wait;
use lockfile_bench::stats;
use lockfile_postgres::{Engine, LeaseOptions, LeaseRequest};
use lockfile_test_support::postgres as pg;
use tokio_postgres::NoTls;

/// The holders' and the waiter's TTL: long, so that the poll interval is
/// its maximum, a second, and no lease lapses during a sample.
const TTL: Duration = Duration::from_secs(30);

/// Trivial statements per round for the floor.
const FLOOR_SAMPLES: usize = 21;

#[derive(Parser, Debug)]
#[command(about = "Wake-up lag of a waiting PostgreSQL lease acquire after a release")]
struct Args {
    /// Measured rounds (each one sample of every variant), after one
    /// warm-up round.
    #[arg(long, default_value_t = 50)]
    rounds: usize,
    /// A server to use (with the schema created, or creatable by this
    /// role) instead of starting one.
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// The shuffle seed (default: from the clock; printed).
    #[arg(long)]
    seed: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Variant {
    Listen,
    ListenPooledRelease,
    Poll,
}

impl Variant {
    fn label(self) -> &'static str {
        match self {
            Variant::Listen => "listen",
            Variant::ListenPooledRelease => "listen, release via PgBouncer",
            Variant::Poll => "poll (every 1 s)",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Variant::Listen => "wakeup-listen",
            Variant::ListenPooledRelease => "wakeup-listen-pooled",
            Variant::Poll => "wakeup-poll",
        }
    }
}

/// One variant's measurements, in seconds.
struct Samples {
    variant: Variant,
    lags: Vec<f64>,
    /// Each lag over the floor of its round.
    ratios: Vec<f64>,
    /// The holder's `release()` itself.
    releases: Vec<f64>,
}

/// The statements the bench itself sends: the floor, and whether the
/// waiter's listener is subscribed.
struct Probe {
    runtime: tokio::runtime::Runtime,
    client: tokio_postgres::Client,
}

impl Probe {
    fn connect(url: &str) -> Result<Probe> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let client = runtime.block_on(async {
            let (client, connection) = tokio_postgres::connect(url, NoTls)
                .await
                .context("connecting to the server")?;
            tokio::spawn(connection);
            anyhow::Ok(client)
        })?;
        Ok(Probe { runtime, client })
    }

    /// The median round trip of `SELECT 1`, in seconds.
    fn floor(&self) -> Result<f64> {
        let mut times = Vec::with_capacity(FLOOR_SAMPLES);
        for _ in 0..FLOOR_SAMPLES {
            let started = Instant::now();
            self.runtime
                .block_on(self.client.query_typed("SELECT 1", &[]))?;
            times.push(started.elapsed().as_secs_f64());
        }
        Ok(stats::median(&times))
    }

    /// Sessions subscribed to the default schema's channel.
    fn listeners(&self) -> Result<i64> {
        let rows = self.runtime.block_on(self.client.query_typed(
            "SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN \"lockfile.leases\"'",
            &[],
        ))?;
        Ok(rows[0].get(0))
    }

    /// Waits up to 30 s until `listeners()` is `count`.
    fn await_listeners(&self, count: i64) -> Result<()> {
        let until = Instant::now() + Duration::from_secs(30);
        while self.listeners()? != count {
            if Instant::now() > until {
                bail!("the waiter's listener never became {count}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }
}

/// One sample: the lag and the release's own time, in seconds.
fn sample(
    variant: Variant,
    holder: &LeaseOptions,
    waiter: &LeaseOptions,
    probe: &Probe,
    phase: Duration,
) -> Result<(f64, f64)> {
    let name = variant.name();
    let held = Engine::acquire(holder, name, LeaseRequest::new().job("wakeup"))?;
    let listening = variant != Variant::Poll;
    if listening {
        probe.await_listeners(0)?;
    }
    let waiting = {
        let waiter = waiter.clone();
        std::thread::spawn(move || -> Result<Instant> {
            let mut request = LeaseRequest::new();
            request
                .job("wakeup")
                .ttl(TTL)
                .wait(Wait::up_to(Some(Duration::from_secs(60))));
            let lease = Engine::acquire(&waiter, name, &request)?;
            let acquired = Instant::now();
            anyhow::ensure!(
                !lease.release()?.was_lost(),
                "the lease was lost before its release"
            );
            Ok(acquired)
        })
    };
    if listening {
        probe.await_listeners(1)?;
    }
    std::thread::sleep(phase);
    let releasing = Instant::now();
    anyhow::ensure!(
        !held.release()?.was_lost(),
        "the lease was lost before its release"
    );
    let released = releasing.elapsed().as_secs_f64();
    let acquired = waiting.join().expect("the waiter's thread")?;
    Ok((
        acquired.saturating_duration_since(releasing).as_secs_f64(),
        released,
    ))
}

fn main() -> Result<()> {
    let args = Args::parse();
    let mut server = None;
    let (direct, pooled) = match &args.url {
        Some(url) => (url.clone(), None),
        None => {
            let mut pg = pg::Postgres::start();
            let urls = (pg.url(), Some(pg.bouncer_url()));
            server = Some(pg);
            urls
        }
    };
    let engine = |url: &str| {
        let mut opts = LeaseOptions::new(url);
        opts.ttl(TTL);
        opts
    };
    engine(&direct).init(None).context("creating the schema")?;
    let holder_direct = engine(&direct);
    let holder_pooled = pooled.as_deref().map(engine);
    let mut listening = engine(&direct);
    listening.listen(direct.clone());
    let polling = engine(&direct);
    let probe = Probe::connect(&direct)?;

    let mut variants = vec![Variant::Listen, Variant::Poll];
    if holder_pooled.is_some() {
        variants.push(Variant::ListenPooledRelease);
    }
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let mut rng = stats::Rng::new(seed);
    let mut samples: Vec<Samples> = variants
        .iter()
        .map(|v| Samples {
            variant: *v,
            lags: Vec::new(),
            ratios: Vec::new(),
            releases: Vec::new(),
        })
        .collect();
    let mut floors = Vec::new();
    for round in 0..=args.rounds {
        let floor = probe.floor()?;
        // Spread over the poll interval, from 50 ms on (the waiter's first
        // attempt is over by then).
        let phase = Duration::from_millis(50 + (round as u64 * 379) % 1000);
        let mut order = variants.clone();
        rng.shuffle(&mut order);
        for variant in order {
            let (holder, waiter) = match variant {
                Variant::Listen => (&holder_direct, &listening),
                Variant::ListenPooledRelease => {
                    (holder_pooled.as_ref().expect("a bouncer"), &listening)
                }
                Variant::Poll => (&holder_direct, &polling),
            };
            let (lag, release) = sample(variant, holder, waiter, &probe, phase)?;
            // Round 0 warms up.
            if round > 0 {
                let entry = samples.iter_mut().find(|s| s.variant == variant).unwrap();
                entry.lags.push(lag);
                entry.ratios.push(lag / floor);
                entry.releases.push(release);
            }
        }
        if round > 0 {
            floors.push(floor);
        }
    }
    drop(server);

    println!(
        "**lockfile wakeup: {} measured rounds after 1 warm-up round, variants shuffled in every round (seed {seed})**\n",
        args.rounds
    );
    println!(
        "Lag: from the holder calling `release()` to the waiter's `acquire()` returning (the release's commit falls in between). Floor: the median round trip of `SELECT 1` on a direct connection, in the same round: median {:.3} ms.\n",
        stats::median(&floors) * 1e3
    );
    println!("| variant | median | p95 | max | median × floor | `release()` itself, median |");
    println!("|---|---:|---:|---:|---:|---:|");
    for s in &samples {
        let max = s.lags.iter().copied().fold(0.0, f64::max);
        println!(
            "| {} | {:.2} ms | {:.2} ms | {:.2} ms | {:.0}× | {:.2} ms |",
            s.variant.label(),
            stats::median(&s.lags) * 1e3,
            stats::percentile(&s.lags, 95.0) * 1e3,
            max * 1e3,
            stats::median(&s.ratios),
            stats::median(&s.releases) * 1e3,
        );
    }
    Ok(())
}
