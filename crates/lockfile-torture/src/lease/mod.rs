//! Lease mode: the workers take leases on a real server (PostgreSQL, etcd,
//! Redis)
//! instead of lock files, through the lease layer's `Engine` (library
//! workers) and through `lockfile run --postgres|--etcd|--redis` (drivers). The
//! detector and the chaos loop are the lock files' own; what differs is that
//! a SIGKILLed holder's lease stands until its TTL runs out, and that every
//! section logs its fencing token in the detector.

pub(crate) mod driver;
pub(crate) mod worker;

use std::time::Duration;

use anyhow::{Context, Result};
use lockfile_lease::Engine;

use crate::args::EngineArgs;

/// The server a lease run tortures.
#[derive(Debug, Clone)]
pub(crate) enum Server {
    /// PostgreSQL at this URL (directly or through PgBouncer).
    Postgres(String),
    /// etcd at these comma-separated endpoints.
    Etcd(String),
    /// Redis at this URL.
    Redis(String),
}

/// A lease run's server and TTL.
#[derive(Debug, Clone)]
pub(crate) struct Leases {
    pub(crate) server: Server,
    pub(crate) ttl: Duration,
}

impl Leases {
    /// What `args` ask for: `None` for a run on lock files.
    pub(crate) fn from_args(args: &EngineArgs) -> Result<Option<Leases>> {
        let server = match (&args.postgres, &args.etcd, &args.redis) {
            (Some(url), _, _) => Server::Postgres(url.clone()),
            (None, Some(endpoints), _) => Server::Etcd(endpoints.clone()),
            (None, None, Some(url)) => Server::Redis(url.clone()),
            (None, None, None) => return Ok(None),
        };
        let ttl = Duration::try_from_secs_f64(args.ttl)
            .ok()
            .filter(|t| !t.is_zero())
            .with_context(|| format!("--ttl {}: not a positive number of seconds", args.ttl))?;
        Ok(Some(Leases { server, ttl }))
    }

    /// The options that give the same server and TTL to a process of the
    /// run.
    pub(crate) fn args(&self) -> Vec<String> {
        self.server_and_ttl(self.ttl.as_secs_f64().to_string())
    }

    /// The options of `lockfile run` for the same server and TTL (whose
    /// `--ttl` takes a duration such as `2000ms`).
    pub(crate) fn run_args(&self) -> Vec<String> {
        self.server_and_ttl(format!("{}ms", self.ttl.as_millis()))
    }

    fn server_and_ttl(&self, ttl: String) -> Vec<String> {
        let (option, value) = match &self.server {
            Server::Postgres(url) => ("--postgres", url),
            Server::Etcd(endpoints) => ("--etcd", endpoints),
            Server::Redis(url) => ("--redis", url),
        };
        vec![option.to_owned(), value.clone(), "--ttl".to_owned(), ttl]
    }

    /// What the summary calls the server (never the URL, which may carry a
    /// password).
    pub(crate) fn server_kind(&self) -> &'static str {
        match self.server {
            Server::Postgres(_) => "PostgreSQL",
            Server::Etcd(_) => "etcd",
            Server::Redis(_) => "Redis",
        }
    }

    /// The engine for this server.
    pub(crate) fn engine(&self) -> Result<Box<dyn Engine>> {
        match &self.server {
            Server::Postgres(url) => postgres(url, self.ttl),
            Server::Etcd(endpoints) => etcd(endpoints, self.ttl),
            Server::Redis(url) => redis(url, self.ttl),
        }
    }

    /// Readies the server before the run, and proves it answers: creates the
    /// PostgreSQL engine's tables (as `lockfile postgres init` does), and
    /// inspects one lease.
    pub(crate) fn prepare(&self) -> Result<()> {
        #[cfg(feature = "postgres")]
        if let Server::Postgres(url) = &self.server {
            lockfile_postgres::LeaseOptions::new(url.clone())
                .init(None)
                .context("create the lease tables (lockfile postgres init)")?;
        }
        self.engine()?
            .inspect(&name(0))
            .with_context(|| format!("inspect a lease on {}", self.server_kind()))?;
        Ok(())
    }
}

/// The name of lease `k`.
pub(crate) fn name(k: u32) -> String {
    format!("torture-{k}")
}

#[cfg(feature = "postgres")]
fn postgres(url: &str, ttl: Duration) -> Result<Box<dyn Engine>> {
    let mut engine = lockfile_postgres::LeaseOptions::new(url);
    engine.ttl(ttl);
    Ok(Box::new(engine))
}

#[cfg(not(feature = "postgres"))]
fn postgres(_url: &str, _ttl: Duration) -> Result<Box<dyn Engine>> {
    anyhow::bail!(
        "--postgres needs a build with the `postgres` feature (cargo build -p lockfile-torture --features postgres)"
    )
}

#[cfg(feature = "etcd")]
fn etcd(endpoints: &str, ttl: Duration) -> Result<Box<dyn Engine>> {
    let mut engine = lockfile_etcd::LeaseOptions::new();
    engine
        .endpoints(
            endpoints
                .split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty()),
        )
        .ttl(ttl);
    Ok(Box::new(engine))
}

#[cfg(not(feature = "etcd"))]
fn etcd(_endpoints: &str, _ttl: Duration) -> Result<Box<dyn Engine>> {
    anyhow::bail!(
        "--etcd needs a build with the `etcd` feature (cargo build -p lockfile-torture --features etcd)"
    )
}

#[cfg(feature = "redis")]
fn redis(url: &str, ttl: Duration) -> Result<Box<dyn Engine>> {
    let mut engine = lockfile_redis::LeaseOptions::new(url);
    engine.ttl(ttl);
    Ok(Box::new(engine))
}

#[cfg(not(feature = "redis"))]
fn redis(_url: &str, _ttl: Duration) -> Result<Box<dyn Engine>> {
    anyhow::bail!(
        "--redis needs a build with the `redis` feature (cargo build -p lockfile-torture --features redis)"
    )
}
