//! Run-once leases across hosts, on Redis: the cross-host sibling of the
//! `lockfile` crate's kernel lock, with the same owner record, the same
//! error style, a fencing token that never goes backwards, and an honest
//! deadline.
//!
//! This is an engine of the lease layer (`lockfile-lease`):
//! [`LeaseOptions`] implements its [`Engine`] trait with Redis's server
//! operations, and a held lease is the layer's [`LeaseGuard`] (a
//! [`Lease`]). The layer renews, keeps the deadline, releases and writes
//! the run history; this crate says how each is asked of Redis.
//!
//! ```no_run
//! use std::time::Duration;
//! use lockfile_redis::LeaseOptions;
//!
//! # fn main() -> Result<(), lockfile_redis::Error> {
//! match LeaseOptions::new("redis://jobs@redis-1:6379")
//!     .password(std::env::var("REDISCLI_AUTH").unwrap_or_default())
//!     .ttl(Duration::from_secs(10))
//!     .job("nightly-report")
//!     .try_acquire("nightly-report")
//! {
//!     Ok(guard) => {
//!         for batch in 0..3 {
//!             guard.check()?; // the lease may have lapsed: stop
//!             // ... write the batch, carrying guard.fencing_token() ...
//!         }
//!         if let Some(loss) = guard.release()?.loss() {
//!             eprintln!("the batches may have overlapped another holder: {loss}");
//!         }
//!     }
//!     // Someone else holds it; the error names them (pid, host, job, since).
//!     Err(e) if e.is_contended() => eprintln!("skipped: {e}"),
//!     Err(e) => return Err(e),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # How it works
//!
//! Every operation is one Lua script, atomic on the server (sent by its
//! SHA-1, `EVALSHA`, and whole after `NOSCRIPT`); the keys of a name are
//! listed in the `key` module's table: `lockfile:{NAME}:lease` and so on.
//!
//! - **Acquire.** If the lease's key is free: draw the fencing token, set
//!   the key (a hash: the token, the owner record, the TTL) with `PEXPIRE`,
//!   and with `--once-per` write the tick's claim into the run history if
//!   its version is still the one read, with the server's `TIME`. When
//!   held, the script answers the holder's record and what is left of its
//!   TTL: [`Error::Contended`].
//! - **Fencing token.** The larger of the last token plus one and the
//!   server's `TIME` in microseconds, kept in a key without expiry. A
//!   server restarted without persistence has lost the counter, and its
//!   clock still carries new tokens above every earlier one. This rests on
//!   one assumption: the server's clock never steps back past the largest
//!   token issued (a clock set back by an hour makes the next tokens repeat
//!   that hour's, if the counter is gone too).
//! - **Renewal.** Every third of the TTL, `PEXPIRE` only while the key
//!   holds our token. The deadline is the layer's: the send time of the
//!   last successful renewal plus the TTL, on the monotonic clock; Redis
//!   expires the key on its own clock, a TTL after it *received* that
//!   renewal, which is no earlier.
//! - **Release.** `DEL` only while the key holds our token, and `PUBLISH`
//!   on `lockfile:{NAME}:released`, which a waiting acquire is subscribed
//!   to; it also wakes at the holder's expiry by the server's count and at
//!   least every [`poll_interval`](lockfile_lease::engine::poll_interval).
//! - **Run history.** A hash without expiry (`version`, `doc`), written
//!   with a compare-and-set on the version, so that the last success
//!   outlives the lease.
//!
//! # What Redis can lose, and what is refused
//!
//! - **A replica** refuses the writes; after a failover to an asynchronous
//!   replica, a lease it had not yet received is free there, and a second
//!   holder can be granted it while the first still runs. The fencing token
//!   protects the data only where the data checks it. A connection to a
//!   server whose `ROLE` is not `master` is refused. Redis Cluster and
//!   Sentinel discovery are not supported: connect to one primary.
//! - **Eviction.** With `maxmemory` set, every `allkeys-*` policy and every
//!   `volatile-*` one (lease keys carry a TTL) may evict a lease's key and
//!   hand the lock to the next contender: refused. When `CONFIG` is not
//!   permitted (managed Redis), a warning says so once, and the run goes on.
//! - **The server's clock.** Redis keeps an expiry as a wall-clock time: a
//!   step forward of the server's clock (NTP stepping rather than slewing,
//!   a VM restored) past a TTL expires every lease at once, and the next
//!   contender is granted one while its holder is still within its
//!   deadline, until the holder's next renewal finds the key gone. Slew the
//!   server's clock, never step it; the fencing token protects the data
//!   meanwhile. A step back past the largest token issued is the one
//!   assumption the tokens rest on (above).
//! - **Persistence.** Without it, a restart frees every lease (a second
//!   holder can start while the first runs, as after a failover) and loses
//!   the run histories; the tokens still rise (above). With AOF
//!   (`appendfsync everysec`), a crash can lose the last second of writes.
//!
//! # Events
//!
//! As every engine's (the lease layer emits them): `lock_acquired` carries
//! `ttl_ms` and `woken_by`, `lock_released` `deleted`.

#![deny(missing_docs)]
// The owner record comes from the core crate, which is Unix-only.
#![cfg(unix)]

mod acquire;
mod conn;
mod engine;
mod history;
mod inspect;
mod key;
mod ops;
mod options;
mod script;
mod server;
mod state;
mod url;

pub use key::MAX_PREFIX_LEN;
// The lease layer's types, which this crate implements.
pub use lockfile_lease::error::{BoxError, LostReason, Operation};
pub use lockfile_lease::history::History;
pub use lockfile_lease::name::MAX_NAME_LEN;
pub use lockfile_lease::policy::{Step, StopPolicy};
pub use lockfile_lease::report::LeaseState;
pub use lockfile_lease::signal::Renewals;
pub use lockfile_lease::{
    Engine, Error, Lease, LeaseGuard, LeaseReport, LeaseRequest, LeaseSignal, Released, Result,
    Wait,
};
pub use options::{DEFAULT_PREFIX, DEFAULT_REQUEST_TIMEOUT, DEFAULT_TTL, LeaseOptions};

/// This engine's name in reports, messages and metrics.
pub const ENGINE: &str = "redis";

/// The Lua source of the lease's scripts, exactly as the engine sends them
/// (`EVALSHA` by its SHA-1, `EVAL` after `NOSCRIPT`): for programs that
/// replay the engine's round trips, such as the benchmarks' raw floors.
/// The keys are a name's (`PREFIX{NAME}:lease`, `:token`, `:history`, and
/// the channel `:released`); each script's comment in the source lists
/// its keys and arguments. What the scripts say may change in any release,
/// with the engine that sends them: they are shown, not promised.
pub mod scripts {
    /// Takes the lease if its key is free, drawing the fencing token (KEYS:
    /// lease, token, history; ARGV: owner record, TTL in ms, history
    /// version or "", history or "", most bytes read back).
    pub fn acquire() -> &'static str {
        crate::script::ACQUIRE.source()
    }

    /// Renews the lease while its key holds our token (KEYS: lease; ARGV:
    /// token, TTL in ms).
    pub fn renew() -> &'static str {
        crate::script::RENEW.source()
    }

    /// Deletes the lease while its key holds our token, and publishes the
    /// release to waiters (KEYS: lease; ARGV: token, channel).
    pub fn release() -> &'static str {
        crate::script::RELEASE.source()
    }
}
