//! Leases instead of lock files: `inspect` and `check` against a lease
//! engine, for jobs that may run on several hosts, and the engine a lease
//! run holds (`run::hold::lease`).
//!
//! Everything here drives the lease layer's traits (`Engine`, `Lease`);
//! [`engine`] is the one place that knows which engines exist. A new engine
//! is its crate, an option in [`EngineArgs`], and one arm below.

use lockfile_lease::Engine;

use crate::cli::EngineArgs;
use crate::exit;

pub(crate) mod inspect;
pub(crate) mod postgres;

/// The engine `args` asks for, or the status to exit with after saying why
/// there is none. `listen` is where a waiting PostgreSQL acquire listens
/// for releases (`run`'s --postgres-listen).
pub(crate) fn engine(args: &EngineArgs, listen: Option<String>) -> Result<Box<dyn Engine>, i32> {
    if let Some(endpoints) = &args.etcd {
        #[cfg(feature = "etcd")]
        {
            let engine = lockfile_etcd::LeaseOptions::new()
                .endpoints(list(endpoints))
                .clone();
            if let Err(lockfile_lease::Error::InvalidOptions { reason, .. }) = engine.check() {
                errln!("lockfile: --etcd: {reason}");
                return Err(exit::USAGE);
            }
            return Ok(Box::new(engine));
        }
        #[cfg(not(feature = "etcd"))]
        {
            let _ = endpoints;
            return Err(not_built("--etcd", "etcd"));
        }
    }
    if let Some(url) = &args.postgres_url() {
        #[cfg(feature = "postgres")]
        {
            let mut engine = lockfile_postgres::LeaseOptions::new(url.clone());
            if let Some(schema) = &args.postgres_schema {
                engine.schema(schema.clone());
            }
            if let Some(listen) = listen {
                engine.listen(listen);
            }
            // The URL is read here once for every command, so that one
            // that cannot be read is a usage error naming the byte at
            // fault, never echoed.
            if let Err(lockfile_lease::Error::InvalidOptions { reason, .. }) = engine.check() {
                errln!("lockfile: --postgres: {reason}");
                return Err(exit::USAGE);
            }
            return Ok(Box::new(engine));
        }
        #[cfg(not(feature = "postgres"))]
        {
            let _ = (url, listen);
            return Err(not_built("--postgres", "postgres"));
        }
    }
    if let Some(url) = &args.redis_url() {
        #[cfg(feature = "redis")]
        {
            let mut engine = lockfile_redis::LeaseOptions::new(url.clone());
            if let Some(prefix) = &args.redis_prefix {
                engine.prefix(prefix.clone());
            }
            if let Some(ca) = &args.redis_ca {
                engine.ca(ca.clone());
            }
            // As redis-cli takes it; the URL's password wins.
            if let Some(password) = std::env::var_os("REDISCLI_AUTH") {
                engine.password(password.to_string_lossy());
            }
            if let Err(lockfile_lease::Error::InvalidOptions { reason, .. }) = engine.check() {
                errln!("lockfile: --redis: {reason}");
                return Err(exit::USAGE);
            }
            return Ok(Box::new(engine));
        }
        #[cfg(not(feature = "redis"))]
        {
            let _ = url;
            return Err(not_built("--redis", "redis"));
        }
    }
    errln!("lockfile: no lease engine was chosen (--etcd, --postgres or --redis)");
    Err(exit::USAGE)
}

/// Says that `option` needs a build with `feature`; the usage status.
#[cfg_attr(
    all(feature = "etcd", feature = "postgres", feature = "redis"),
    allow(dead_code)
)]
fn not_built(option: &str, feature: &str) -> i32 {
    errln!(
        "lockfile: {option} needs a build with the `{feature}` feature (cargo install --features {feature})"
    );
    exit::USAGE
}

/// A comma-separated list, blanks trimmed and empty items dropped.
#[cfg_attr(not(feature = "etcd"), allow(dead_code))]
fn list(items: &str) -> impl Iterator<Item = String> {
    items
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(str::to_owned)
}
