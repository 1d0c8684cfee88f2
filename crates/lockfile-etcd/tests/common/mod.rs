//! Test support: a real etcd per test (the workspace's test server), the
//! monotonic clock shared by every process on the host, and raw etcd access
//! for arranging faults.
#![allow(dead_code, unreachable_pub)]

pub mod child;

use std::time::{Duration, Instant};

use lockfile_etcd::LeaseOptions;

pub use lockfile_test_support::Etcd;

/// The test server, as this crate's tests start and use it.
pub trait EtcdExt {
    /// Starts a single-member etcd and waits until the crate's own inspect
    /// gets an answer.
    fn start() -> Etcd;

    /// Lease options pointing at this server.
    fn options(&self, ttl: Duration) -> LeaseOptions;
}

impl EtcdExt for Etcd {
    fn start() -> Etcd {
        Etcd::start_until(|endpoint| {
            let mut probe = LeaseOptions::new();
            probe
                .endpoints([endpoint])
                .request_timeout(Duration::from_millis(500));
            probe.inspect("ready-probe").is_ok()
        })
    }

    fn options(&self, ttl: Duration) -> LeaseOptions {
        let mut opts = LeaseOptions::new();
        opts.endpoints([self.endpoint()]).ttl(ttl);
        opts
    }
}

/// The system-wide monotonic clock in nanoseconds: comparable between
/// processes on one host, unlike `Instant`, which cannot be sent.
pub fn mono_ns() -> i128 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    i128::from(t.tv_sec) * 1_000_000_000 + i128::from(t.tv_nsec)
}

/// An `Instant` on the system-wide monotonic clock.
pub fn to_mono(at: Instant) -> i128 {
    let (now, mono) = (Instant::now(), mono_ns());
    if at <= now {
        mono - (now - at).as_nanos() as i128
    } else {
        mono + (at - now).as_nanos() as i128
    }
}

/// Nanoseconds as seconds, for messages.
pub fn secs(ns: i128) -> f64 {
    ns as f64 / 1e9
}

/// Runs raw etcd calls (to arrange faults the crate would never cause).
pub fn raw<T>(
    endpoint: &str,
    f: impl AsyncFnOnce(&mut etcd_client::Client) -> Result<T, etcd_client::Error>,
) -> T {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("build a runtime");
    runtime.block_on(async {
        let mut client = etcd_client::Client::connect([endpoint], None)
            .await
            .expect("connect to etcd");
        f(&mut client).await.expect("raw etcd call")
    })
}
