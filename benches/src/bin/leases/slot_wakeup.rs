//! `--slots` under a lease: how soon a waiter for any of N slot leases
//! takes the one a holder releases, on each engine, against a floor
//! measured in the same round: a waiter on one plain lease, woken the
//! engine's own way (etcd's watch, PostgreSQL's poll, Redis's Pub/Sub).
//!
//! A slot waiter tries every slot, then waits on one of them in turn with
//! the engine's own wait, for at most the poll interval (a second with the
//! 30 s TTL here), then tries them all again (`lockfile_lease::slots`): a
//! release of the slot it waits on wakes it at once, another within that
//! interval. The release comes a varying time after the waiter began, over
//! 0.1–1.3 s, so that the samples cover the whole interval.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use lockfile::slot::SlotCount;
use lockfile::wait::Wait;
use lockfile_bench::stats::Rng;
use lockfile_lease::{Engine, Lease, LeaseRequest};

use crate::servers::Servers;
use crate::takeover::{Kind, engine};

/// Long, so that the poll interval is its maximum, a second, and no lease
/// lapses during a sample.
const TTL: Duration = Duration::from_secs(30);
/// The slots of the set.
const SLOTS: u64 = 3;

/// One engine's lags, in seconds.
#[derive(Debug)]
pub(crate) struct SlotLags {
    pub(crate) kind: Kind,
    /// A waiter on one plain lease: the floor.
    pub(crate) plain: Vec<f64>,
    /// A waiter for any of [`SLOTS`] slots.
    pub(crate) slots: Vec<f64>,
}

/// `samples` of each, on every engine.
pub(crate) fn measure(servers: &Servers, samples: usize, rng: &mut Rng) -> Result<Vec<SlotLags>> {
    let mut out = Vec::new();
    for kind in Kind::ALL {
        let engine: Arc<dyn Engine> = Arc::from(engine(kind, servers.of(kind, false), TTL));
        let mut lags = SlotLags {
            kind,
            plain: Vec::new(),
            slots: Vec::new(),
        };
        for i in 0..samples {
            let name = format!(
                "bench-slot-wakeup-{}-{i}-{}",
                kind.name(),
                std::process::id()
            );
            let delay = Duration::from_millis(100 + rng.below(1_200));
            lags.plain
                .push(sample(&engine, &format!("{name}-plain"), None, delay, rng)?);
            let delay = Duration::from_millis(100 + rng.below(1_200));
            let n = SlotCount::new(SLOTS).expect("a valid count");
            lags.slots
                .push(sample(&engine, &name, Some(n), delay, rng)?);
        }
        out.push(lags);
    }
    Ok(out)
}

/// Every slot (or the one lease) held; a waiter; one holder released
/// `delay` after the waiter began: the time from the release to the
/// waiter's acquire returning.
fn sample(
    engine: &Arc<dyn Engine>,
    name: &str,
    slots: Option<SlotCount>,
    delay: Duration,
    rng: &mut Rng,
) -> Result<f64> {
    let take = move |engine: &dyn Engine, wait: Wait| -> lockfile_lease::Result<Box<dyn Lease>> {
        let mut request = LeaseRequest::new();
        request.wait(wait).ttl(TTL);
        match slots {
            Some(n) => lockfile_lease::slots::acquire_slot(engine, name, n, &request),
            None => engine.acquire(name, &request),
        }
    };
    let count = slots.map_or(1, |n| usize::from(n.get()));
    let mut held: Vec<Box<dyn Lease>> = (0..count)
        .map(|_| take(engine.as_ref(), Wait::No))
        .collect::<Result<_, _>>()
        .with_context(|| format!("cannot hold every slot of {name}"))?;
    let waiter = {
        let engine = Arc::clone(engine);
        let name = name.to_owned();
        std::thread::spawn(move || {
            let mut request = LeaseRequest::new();
            request.wait(Wait::Forever).ttl(TTL);
            let lease = match slots {
                Some(n) => lockfile_lease::slots::acquire_slot(engine.as_ref(), &name, n, &request),
                None => engine.acquire(&name, &request),
            };
            (lease, Instant::now())
        })
    };
    std::thread::sleep(delay);
    let victim = held.remove(rng.below(count as u64) as usize);
    let released_at = Instant::now();
    let _ = victim.release()?;
    let (lease, taken_at) = waiter.join().expect("the waiter does not panic");
    let lease = lease.context("the waiter's acquire")?;
    let lag = taken_at
        .saturating_duration_since(released_at)
        .as_secs_f64();
    let _ = lease.release()?;
    for lease in held {
        let _ = lease.release()?;
    }
    Ok(lag)
}
