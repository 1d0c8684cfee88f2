//! What the tests of this workspace's crates share (not published): the
//! real servers they start, the network fault they arrange, and the small
//! helpers each would otherwise write again.
//!
//! - `etcd.rs`, `postgres/`: a real etcd, PostgreSQL (with TLS, a steppable
//!   clock) and PgBouncer per test, on loopback ports, stopped when dropped;
//! - `redis.rs`: a real Redis per test, and `redis-cli` to act on it;
//! - `ca.rs`: a test CA and certificates for the TLS servers;
//! - `proxy.rs`: a loopback proxy that turns into a black hole;
//! - `marked.rs`: a child process that says what it does in `@@` lines;
//! - `stopped.rs`: whether a process has stopped, and stopping a writer
//!   outside its write;
//! - `wait.rs`: waiting for a condition, with one patience;
//! - `foreign.rs`: files that are not ours, and their fingerprints;
//! - `port.rs`: a free loopback port.
//!
//! Only std, tempfile and rustix, so that a crate's tests pull in no client
//! they do not build already (each says with a client of its own when a
//! server answers).

// Servers and proxies of a test's own, never printed.
#![allow(missing_debug_implementations)]

pub mod ca;
pub mod etcd;
pub mod foreign;
pub mod marked;
pub mod port;
pub mod postgres;
pub mod proxy;
pub mod redis;
pub mod stopped;
pub mod wait;

pub use etcd::Etcd;
pub use postgres::Postgres;
pub use proxy::Proxy;
pub use redis::Redis;
pub use wait::{wait_until, within};
