//! Test support: the engine's options on a test server of the test's own,
//! and the small things every test file asks of it.
#![allow(dead_code, unreachable_pub)]

use std::time::{Duration, SystemTime};

use lockfile::history::{Outcome, RunEnd};
use lockfile_redis::{LeaseOptions, LeaseRequest};

pub use lockfile_test_support::Redis;

/// Lease options for `url` with this TTL, and a request timeout short
/// enough for a test and long enough for a loaded machine.
pub fn options(url: &str, ttl: Duration) -> LeaseOptions {
    let mut opts = LeaseOptions::new(url);
    opts.ttl(ttl)
        .request_timeout(Duration::from_secs(5))
        .job("test");
    opts
}

/// A request for the lease, without waiting.
pub fn request() -> LeaseRequest {
    let mut request = LeaseRequest::new();
    request.job("test");
    request
}

/// A run's end with `outcome`, started now.
pub fn end(outcome: Outcome) -> RunEnd {
    RunEnd {
        outcome,
        exit_code: Some(i32::from(outcome != Outcome::Succeeded)),
        signal: None,
        started_at: SystemTime::now(),
    }
}

/// The server's clock, as `TIME` says.
pub fn server_time(redis: &Redis) -> SystemTime {
    let out = redis.cli(&["TIME"]);
    let mut parts = out.split_whitespace();
    let secs: u64 = parts.next().unwrap().parse().unwrap();
    let micros: u64 = parts.next().unwrap().parse().unwrap();
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros)
}

/// The server's reply to `args`, trimmed.
pub fn reply(redis: &Redis, args: &[&str]) -> String {
    redis.cli(args).trim().to_owned()
}
