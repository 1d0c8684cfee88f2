//! The lease layer's trait for code that drives any engine: an [`Engine`],
//! a server that keeps leases. An engine implements it with its server
//! operations (`ops.rs`); what it hands out is a
//! [`LeaseGuard`](crate::LeaseGuard), a [`Lease`] whatever the engine.

use std::fmt;
use std::time::{Duration, SystemTime};

use lockfile::check::{CheckOptions, Health};

use crate::acquisition::Acquisition;
// Where they were defined before they had files of their own.
pub use crate::lease::Lease;
pub use crate::request::LeaseRequest;
use crate::{LeaseReport, Result};

/// How often a waiting acquire asks the server again, for a lease of `ttl`,
/// when the engine has no way to be told that the lease came free: a tenth
/// of the TTL, at most a second, at least 10 ms. The next holder so starts at
/// most this long after the lease is released.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(lockfile_lease::engine::poll_interval(Duration::from_secs(30)), Duration::from_secs(1));
/// assert_eq!(lockfile_lease::engine::poll_interval(Duration::from_secs(2)), Duration::from_millis(200));
/// ```
pub fn poll_interval(ttl: Duration) -> Duration {
    (ttl / 10).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

/// A server that keeps leases: etcd, PostgreSQL. Cheap to share; every call
/// connects as it needs.
///
/// An engine promises, for each name:
/// - at most one holder at a time, as long as every holder stops acting on
///   its lease by its [`deadline`](crate::LeaseSignal::deadline);
/// - a fencing token larger than every earlier holder's;
/// - a run history that outlives the lease, written with a compare-and-set
///   ([`Lease::record_outcome`]).
pub trait Engine: fmt::Debug + Send + Sync {
    /// The engine's name in reports, messages and metrics: `etcd`,
    /// `postgres`.
    fn kind(&self) -> &'static str;

    /// Starts taking the lease on `name`, as [`acquire`](Self::acquire)
    /// does, on the lease's own thread, and returns at once: the
    /// [`Acquisition`] is waited for ([`wait`](Acquisition::wait)) or, with
    /// the `tokio` feature, awaited. An engine builds its server operations
    /// for `name` and hands them to
    /// [`LeaseGuard::start`](crate::LeaseGuard::start).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName),
    /// [`Error::InvalidOptions`](crate::Error::InvalidOptions), or
    /// [`Error::Io`](crate::Error::Io) when the thread cannot be started;
    /// the rest comes from the acquisition.
    fn start(&self, name: &str, request: &LeaseRequest) -> Result<Acquisition>;

    /// Takes the lease on `name`: without waiting, or waiting as
    /// `request.wait` says while someone else holds it. Returns once the
    /// lease is held and its renewal runs in the background: [`start`](Self::start),
    /// then [`wait`](Acquisition::wait).
    ///
    /// With `request.tick`, the lease is taken only together with a claim
    /// on the run's tick, in one atomic step on the name's run history
    /// ([`History::claimed`](crate::history::History::claimed), decided on the
    /// engine's clock: the server's when it has one, else the local one).
    ///
    /// # Errors
    ///
    /// [`Error::Contended`](crate::Error::Contended) or
    /// [`Error::Timeout`](crate::Error::Timeout) (see
    /// [`Error::is_contended`](crate::Error::is_contended)) with the
    /// holder's record; [`Error::InvalidName`](crate::Error::InvalidName),
    /// [`Error::InvalidOptions`](crate::Error::InvalidOptions), a refused
    /// tick ([`Error::is_tick_refused`](crate::Error::is_tick_refused)), or
    /// a server error naming the operation and the key.
    fn acquire(&self, name: &str, request: &LeaseRequest) -> Result<Box<dyn Lease>> {
        Ok(Box::new(self.start(name, request)?.wait()?))
    }

    /// Who holds the lease on `name`, with its token, TTL and run history.
    /// Never takes or changes anything. The report's findings are judged with
    /// the default [`InspectOptions`](lockfile::inspect::InspectOptions).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName), or a server error.
    fn inspect(&self, name: &str) -> Result<LeaseReport>;

    /// Every lease the engine knows of, sorted by name: at least the held
    /// ones, and the free ones whose history it keeps where it can list them.
    ///
    /// # Errors
    ///
    /// A server error.
    fn inspect_all(&self) -> Result<Vec<LeaseReport>>;

    /// Inspects the lease on `name` and judges its health now, as
    /// `lockfile check` does: the same verdicts as for a lock file, except
    /// `hung`, which a lease cannot tell (its renewals prove that the
    /// wrapper lives, not that the command makes progress).
    ///
    /// ```no_run
    /// # fn health(engine: &dyn lockfile_lease::Engine) -> lockfile_lease::Result<()> {
    /// use std::time::Duration;
    /// let health = engine.check(
    ///     "nightly",
    ///     lockfile::check::CheckOptions::new().expect_every(Duration::from_secs(86_400)),
    /// )?;
    /// println!("{health}"); // OK: etcd lease `nightly`: last success 2h ago
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`inspect`](Self::inspect): a check says `UNKNOWN` for them.
    fn check(&self, name: &str, opts: &CheckOptions) -> Result<Health<LeaseReport>> {
        let now = SystemTime::now();
        let report = self.inspect(name)?.judged(opts.inspect_options(), now);
        Ok(opts.judge(report, now))
    }
}
