//! Figure 4: many held leases renewing against one server, through the
//! engine: the renewal's latency as its holder sees it, and the CPU the
//! servers spend on it.
//!
//! Each lease of every engine is a thread of its own with a runtime and a
//! connection of its own (etcd: one client, with its keepalive and watch
//! streams), as the engines make them; they renew every third of the TTL.
//! A renewal's latency is read from outside: the holder's
//! [`LeaseSignal::last_renewal`] is the send time of the last renewal that
//! succeeded, and moves when its answer has arrived; a poller looks at each
//! lease from the moment its next renewal is due until it moves. Its own
//! lateness (how late its 250 µs sleeps wake) bounds the resolution.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use lockfile::wait::Wait;
use lockfile_postgres::{Engine, Lease, LeaseRequest, LeaseSignal};

use crate::servers::{CpuTicks, Servers, percent_of_core};
use crate::takeover::Kind;

/// The threads that take (and later release) the leases at once.
const WORKERS: usize = 8;

/// How often the poller looks at the leases whose renewal is due.
const TICK: Duration = Duration::from_micros(250);

/// How often the probe sends its trivial round trip.
const PROBE_EVERY: Duration = Duration::from_millis(10);

/// CPU use over a window, as % of one core.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cpu {
    pub(crate) postgres: f64,
    pub(crate) bouncer: f64,
    pub(crate) etcd: f64,
    pub(crate) redis: f64,
    pub(crate) ours: f64,
}

impl Cpu {
    fn between(a: CpuTicks, b: CpuTicks, window: Duration) -> Cpu {
        Cpu {
            postgres: percent_of_core(a.postgres, b.postgres, window),
            bouncer: percent_of_core(a.bouncer, b.bouncer, window),
            etcd: percent_of_core(a.etcd, b.etcd, window),
            redis: percent_of_core(a.redis, b.redis, window),
            ours: percent_of_core(a.ours, b.ours, window),
        }
    }
}

/// What one engine's load measured.
#[derive(Debug)]
pub(crate) struct Load {
    pub(crate) kind: Kind,
    pub(crate) leases: usize,
    pub(crate) ttl: Duration,
    pub(crate) window: Duration,
    pub(crate) acquire_took: Duration,
    /// Each renewal's latency seen by its holder, ns.
    pub(crate) renewals: Vec<f64>,
    /// The probe's trivial round trips over the same window, ns.
    pub(crate) probe: Vec<f64>,
    /// How late the poller's ticks woke, ns.
    pub(crate) poll_late: Vec<f64>,
    /// Leases with failed renewals outstanding, and leases lost, at the end.
    pub(crate) failing: usize,
    pub(crate) lost: usize,
    pub(crate) idle: Option<Cpu>,
    pub(crate) loaded: Option<Cpu>,
}

/// `leases` leases of `kind` (PostgreSQL through PgBouncer) held for
/// `window` after one renewal interval of settling.
pub(crate) fn measure(
    kind: Kind,
    servers: &Servers,
    leases: usize,
    ttl: Duration,
    window: Duration,
) -> Result<Load> {
    let engine: Arc<dyn Engine> = match kind {
        Kind::Postgres => {
            let mut e = lockfile_postgres::LeaseOptions::new(&servers.bouncer_url);
            e.ttl(ttl);
            Arc::new(e)
        }
        Kind::Etcd => {
            let mut e = lockfile_etcd::LeaseOptions::new();
            e.endpoints([&servers.etcd_endpoint]).ttl(ttl);
            Arc::new(e)
        }
        Kind::Redis => {
            let mut e = lockfile_redis::LeaseOptions::new(&servers.redis_url);
            e.ttl(ttl);
            Arc::new(e)
        }
    };
    let procs = servers.processes();
    let idle_window = window.min(Duration::from_secs(5));
    let idle = procs.map(|p| {
        let before = p.ticks();
        std::thread::sleep(idle_window);
        Cpu::between(before, p.ticks(), idle_window)
    });

    let started = Instant::now();
    let held = acquire_all(&engine, kind, leases, ttl)?;
    let acquire_took = started.elapsed();
    let signals: Vec<LeaseSignal> = held.iter().flatten().map(|l| l.signal()).collect();
    let interval = signals.first().map_or(ttl, LeaseSignal::ttl) / 3;
    // Every lease renews once before the window opens.
    std::thread::sleep(interval);

    let stop = Arc::new(AtomicBool::new(false));
    let probe = {
        let stop = stop.clone();
        let server = servers.of(kind, true).to_owned();
        std::thread::spawn(move || probe(kind, &server, &stop))
    };
    let before = procs.map(|p| p.ticks());
    let opened = Instant::now();
    let (renewals, poll_late) = poll(&signals, interval, opened + window);
    let loaded = procs
        .zip(before)
        .map(|(p, b)| Cpu::between(b, p.ticks(), opened.elapsed()));
    stop.store(true, Ordering::Relaxed);
    let probe = probe
        .join()
        .map_err(|_| anyhow::anyhow!("the probe panicked"))??;
    let failing = signals.iter().filter(|s| s.failed_renewals() > 0).count();
    let lost = signals.iter().filter(|s| s.is_lost()).count();
    release_all(held)?;
    Ok(Load {
        kind,
        leases,
        ttl: signals.first().map_or(ttl, LeaseSignal::ttl),
        window,
        acquire_took,
        renewals,
        probe,
        poll_late,
        failing,
        lost,
        idle,
        loaded,
    })
}

type Held = Vec<Vec<Box<dyn Lease>>>;

fn acquire_all(engine: &Arc<dyn Engine>, kind: Kind, leases: usize, ttl: Duration) -> Result<Held> {
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let engine = engine.clone();
            std::thread::spawn(move || -> Result<Vec<Box<dyn Lease>>> {
                (w..leases)
                    .step_by(WORKERS)
                    .map(|i| {
                        let mut request = LeaseRequest::new();
                        request
                            .ttl(ttl)
                            .wait(Wait::Until(Instant::now() + Duration::from_secs(30)));
                        let name = format!("bench-load-{}-{i}", kind.name());
                        engine
                            .acquire(&name, &request)
                            .with_context(|| format!("cannot take lease {name}"))
                    })
                    .collect()
            })
        })
        .collect();
    let mut held = Vec::new();
    let mut failed = None;
    for w in workers {
        match w.join() {
            Ok(Ok(mine)) => held.push(mine),
            Ok(Err(e)) => failed = Some(e),
            Err(_) => failed = Some(anyhow::anyhow!("a worker panicked")),
        }
    }
    if let Some(e) = failed {
        let _ = release_all(held);
        return Err(e);
    }
    Ok(held)
}

fn release_all(held: Held) -> Result<()> {
    let workers: Vec<_> = held
        .into_iter()
        .map(|mine| {
            std::thread::spawn(move || -> Result<()> {
                for lease in mine {
                    anyhow::ensure!(
                        !lease.release()?.was_lost(),
                        "the lease was lost before its release"
                    );
                }
                Ok(())
            })
        })
        .collect();
    for w in workers {
        w.join()
            .map_err(|_| anyhow::anyhow!("a worker panicked"))?
            .context("cannot release a lease")?;
    }
    Ok(())
}

/// Watches every lease until `until`: returns each renewal's latency (from
/// its send time to when the poller saw it) and the poller's lateness.
fn poll(signals: &[LeaseSignal], interval: Duration, until: Instant) -> (Vec<f64>, Vec<f64>) {
    let mut last: Vec<Instant> = signals.iter().map(LeaseSignal::last_renewal).collect();
    // Due times, soonest first.
    let mut due: BinaryHeap<Reverse<(Instant, usize)>> = last
        .iter()
        .enumerate()
        .map(|(i, &l)| Reverse((l + interval, i)))
        .collect();
    let mut pending: Vec<usize> = Vec::new();
    let (mut latencies, mut late) = (Vec::new(), Vec::new());
    let opened = Instant::now();
    loop {
        let slept = Instant::now();
        std::thread::sleep(TICK);
        let now = Instant::now();
        late.push((now - slept).saturating_sub(TICK).as_nanos() as f64);
        if now >= until {
            break;
        }
        while let Some(&Reverse((at, i))) = due.peek() {
            if at > now {
                break;
            }
            due.pop();
            pending.push(i);
        }
        pending.retain(|&i| {
            let renewed = signals[i].last_renewal();
            if renewed <= last[i] {
                return !signals[i].is_lost();
            }
            // A renewal sent before the window opened is not counted.
            if renewed >= opened {
                latencies.push((now - renewed).as_nanos() as f64);
            }
            last[i] = renewed;
            due.push(Reverse((renewed + interval, i)));
            false
        });
    }
    (latencies, late)
}

/// A trivial round trip every 10 ms until stopped: `SELECT 1` through
/// PgBouncer, a range read of one key in etcd, or a `PING` to Redis.
fn probe(kind: Kind, server: &str, stop: &AtomicBool) -> Result<Vec<f64>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut samples = Vec::new();
    match kind {
        Kind::Postgres => rt.block_on(async {
            let client = crate::roundtrips::pg_connect(server).await?;
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                client.query_typed("SELECT 1", &[]).await?;
                samples.push(t.elapsed().as_nanos() as f64);
                tokio::time::sleep(PROBE_EVERY).await;
            }
            anyhow::Ok(())
        })?,
        Kind::Etcd => rt.block_on(async {
            let mut client = etcd_client::Client::connect([server], None).await?;
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                client.get("bench/probe", None).await?;
                samples.push(t.elapsed().as_nanos() as f64);
                tokio::time::sleep(PROBE_EVERY).await;
            }
            anyhow::Ok(())
        })?,
        Kind::Redis => rt.block_on(async {
            let client = redis::Client::open(server)?;
            let mut c = client.get_multiplexed_async_connection().await?;
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                redis::cmd("PING").query_async::<()>(&mut c).await?;
                samples.push(t.elapsed().as_nanos() as f64);
                tokio::time::sleep(PROBE_EVERY).await;
            }
            anyhow::Ok(())
        })?,
    }
    if samples.is_empty() {
        bail!("the probe made no round trip");
    }
    Ok(samples)
}
