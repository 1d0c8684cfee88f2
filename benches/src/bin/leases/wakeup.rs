//! Redis's wake-up after a release: how soon a waiting acquire returns
//! once the holder releases, subscribed to the lease's release channel
//! (the release script's `PUBLISH` wakes it) and polling (as a user
//! refused `SUBSCRIBE`: every min(1 s, TTL/10), here 1 s), against a floor
//! measured in the same round: the median round trip of a `PING`.
//!
//! As the PostgreSQL `wakeup` program measures it: the lag of one sample
//! runs from the holder calling `release()` to the waiter's `acquire()`
//! returning; the release is sent a varying time after the waiter starts
//! waiting (once it is subscribed, when it subscribes), spread over the
//! poll interval, so that the polling lag samples the whole interval.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use lockfile::wait::Wait;
use lockfile_bench::stats::{self, Rng};
use lockfile_redis::{Engine, LeaseOptions, LeaseRequest};
use redis::aio::MultiplexedConnection;
use tokio::runtime::Runtime;

use crate::servers::Servers;

/// The holders' and the waiter's TTL: long, so that the poll interval is
/// its maximum, a second, and no lease lapses during a sample.
const TTL: Duration = Duration::from_secs(30);

/// `PING`s per round for the floor.
const FLOOR_SAMPLES: usize = 21;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Variant {
    Subscribed,
    Polling,
}

impl Variant {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Variant::Subscribed => "subscribed (Pub/Sub: the release's PUBLISH)",
            Variant::Polling => "poll (every 1 s: a user refused SUBSCRIBE)",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Variant::Subscribed => "wakeup-subscribed",
            Variant::Polling => "wakeup-polling",
        }
    }
}

/// One variant's measurements, in seconds.
#[derive(Debug)]
pub(crate) struct Samples {
    pub(crate) variant: Variant,
    pub(crate) lags: Vec<f64>,
    /// Each lag over the floor of its round.
    pub(crate) ratios: Vec<f64>,
    /// The holder's `release()` itself.
    pub(crate) releases: Vec<f64>,
}

/// What the figure measured.
#[derive(Debug)]
pub(crate) struct Wakeups {
    pub(crate) rounds: usize,
    /// The floor of every measured round, in seconds.
    pub(crate) floors: Vec<f64>,
    pub(crate) samples: Vec<Samples>,
}

/// The bench's own connection: the floor, and the channel's subscribers.
struct Probe {
    rt: Runtime,
    c: MultiplexedConnection,
}

impl Probe {
    fn connect(url: &str) -> Result<Probe> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let c = rt.block_on(async {
            redis::Client::open(url)?
                .get_multiplexed_async_connection()
                .await
        })?;
        Ok(Probe { rt, c })
    }

    /// The median round trip of `PING`, in seconds.
    fn floor(&mut self) -> Result<f64> {
        let mut times = Vec::with_capacity(FLOOR_SAMPLES);
        for _ in 0..FLOOR_SAMPLES {
            let started = Instant::now();
            self.rt
                .block_on(redis::cmd("PING").query_async::<()>(&mut self.c))?;
            times.push(started.elapsed().as_secs_f64());
        }
        Ok(stats::median(&times))
    }

    /// Subscribers of the release channel of lease `name`.
    fn subscribers(&mut self, name: &str) -> Result<i64> {
        let channel = format!("{}{{{name}}}:released", lockfile_redis::DEFAULT_PREFIX);
        let (_, count): (String, i64) = self.rt.block_on(
            redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(&channel)
                .query_async(&mut self.c),
        )?;
        Ok(count)
    }

    /// Waits up to 30 s until `subscribers(name)` is `count`.
    fn await_subscribers(&mut self, name: &str, count: i64) -> Result<()> {
        let until = Instant::now() + Duration::from_secs(30);
        while self.subscribers(name)? != count {
            if Instant::now() > until {
                bail!("the waiter's subscribers never became {count}");
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
    probe: &mut Probe,
    phase: Duration,
) -> Result<(f64, f64)> {
    let name = variant.name();
    let held = Engine::acquire(holder, name, LeaseRequest::new().job("wakeup"))?;
    probe.await_subscribers(name, 0)?;
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
            ensure!(
                !lease.release()?.was_lost(),
                "the lease was lost before its release"
            );
            Ok(acquired)
        })
    };
    if variant == Variant::Subscribed {
        probe.await_subscribers(name, 1)?;
    }
    std::thread::sleep(phase);
    // The polling waiter must not have subscribed.
    if variant == Variant::Polling {
        ensure!(
            probe.subscribers(name)? == 0,
            "the polling waiter subscribed: its user may SUBSCRIBE"
        );
    }
    let releasing = Instant::now();
    ensure!(
        !held.release()?.was_lost(),
        "the lease was lost before its release"
    );
    let released = releasing.elapsed().as_secs_f64();
    let acquired = waiting
        .join()
        .map_err(|_| anyhow::anyhow!("the waiter panicked"))??;
    Ok((
        acquired.saturating_duration_since(releasing).as_secs_f64(),
        released,
    ))
}

/// `rounds` rounds after a warm-up, each one sample of every variant in a
/// shuffled order (polling only on a server started here, where this
/// program made the user refused `SUBSCRIBE`).
pub(crate) fn measure(servers: &Servers, rounds: usize, rng: &mut Rng) -> Result<Wakeups> {
    let engine = |url: &str| {
        let mut opts = LeaseOptions::new(url);
        opts.ttl(TTL);
        opts
    };
    let holder = engine(&servers.redis_url);
    let subscribed = engine(&servers.redis_url);
    let polling = servers.redis_polling_url.as_deref().map(engine);
    let mut variants = vec![Variant::Subscribed];
    if polling.is_some() {
        variants.push(Variant::Polling);
    }
    let mut probe = Probe::connect(&servers.redis_url).context("cannot connect to Redis")?;
    let mut samples: Vec<Samples> = variants
        .iter()
        .map(|&variant| Samples {
            variant,
            lags: Vec::new(),
            ratios: Vec::new(),
            releases: Vec::new(),
        })
        .collect();
    let mut floors = Vec::new();
    for round in 0..=rounds {
        let floor = probe.floor()?;
        // Spread over the poll interval, from 50 ms on (the waiter's first
        // attempt is over by then).
        let phase = Duration::from_millis(50 + (round as u64 * 379) % 1000);
        let mut order = variants.clone();
        rng.shuffle(&mut order);
        for variant in order {
            let waiter = match variant {
                Variant::Subscribed => &subscribed,
                Variant::Polling => polling.as_ref().expect("a polling user"),
            };
            eprintln!("  wake-up {} {round}/{rounds}", variant.name());
            let (lag, release) = sample(variant, &holder, waiter, &mut probe, phase)?;
            // Round 0 warms up.
            if round > 0 {
                let entry = samples
                    .iter_mut()
                    .find(|s| s.variant == variant)
                    .expect("every variant has its samples");
                entry.lags.push(lag);
                entry.ratios.push(lag / floor);
                entry.releases.push(release);
            }
        }
        if round > 0 {
            floors.push(floor);
        }
    }
    Ok(Wakeups {
        rounds,
        floors,
        samples,
    })
}
