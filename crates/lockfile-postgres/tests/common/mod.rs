//! Test support: the engine's options on the workspace's test server, and
//! the engine's events as a test captures them.
#![allow(dead_code, unreachable_pub)]

pub mod events;

use std::time::Duration;

use lockfile_postgres::LeaseOptions;

/// Lease options for `url` with this TTL, after creating the schema there.
pub fn engine(url: &str, ttl: Duration) -> LeaseOptions {
    let mut opts = LeaseOptions::new(url);
    opts.ttl(ttl).request_timeout(Duration::from_secs(2));
    opts.init(None).expect("lockfile postgres init");
    opts
}
