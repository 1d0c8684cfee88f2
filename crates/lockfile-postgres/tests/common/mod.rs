//! Test support: a real PostgreSQL and PgBouncer per test, and the etcd
//! engine's black-hole proxy.
#![allow(dead_code, unreachable_pub)]

pub mod events;
pub mod pg;
/// A loopback TCP proxy that can stop forwarding without closing anything.
#[path = "../../../lockfile-etcd/tests/common/proxy.rs"]
pub mod proxy;

use std::time::Duration;

use lockfile_postgres::LeaseOptions;

/// Lease options for `url` with this TTL, after creating the schema there.
pub fn engine(url: &str, ttl: Duration) -> LeaseOptions {
    let mut opts = LeaseOptions::new(url);
    opts.ttl(ttl).request_timeout(Duration::from_secs(2));
    opts.init(None).expect("lockfile postgres init");
    opts
}
