//! `LeaseOptions`: the builder for everything about taking a lease on
//! PostgreSQL. Every other module reads the options, so this one depends on
//! none of them.

use std::fmt;
use std::time::Duration;

use lockfile_lease::LeaseRequest;

use crate::schema::DEFAULT_SCHEMA;

/// The lease TTL used when none is given: short, so that a dead holder
/// blocks the next run for at most this long; long enough that a renewal
/// every third of it survives a slow network and a busy server.
pub const DEFAULT_TTL: Duration = Duration::from_secs(10);

/// How long one statement may take when no other bound is given.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Options for taking a lease on PostgreSQL; finish with
/// [`acquire`](LeaseOptions::acquire) or
/// [`try_acquire`](LeaseOptions::try_acquire), or use it as an
/// [`Engine`](crate::Engine).
///
/// ```no_run
/// use std::time::Duration;
/// use lockfile_postgres::LeaseOptions;
///
/// # fn main() -> Result<(), lockfile_postgres::Error> {
/// let guard = LeaseOptions::new("postgres://app@db.internal/jobs")
///     .ttl(Duration::from_secs(10))
///     .job("nightly-backup")
///     .timeout(Duration::from_secs(60))
///     .acquire("nightly-backup")?;
/// println!("fencing token {}", guard.fencing_token());
/// let released = guard.release()?; // says whether the lease was lost first
/// assert!(!released.was_lost());
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct LeaseOptions {
    pub(crate) url: String,
    pub(crate) schema: String,
    pub(crate) ttl: Duration,
    pub(crate) request_timeout: Duration,
    pub(crate) listen: Option<String>,
    /// The job and the maximum runtime that [`acquire`](LeaseOptions::acquire)
    /// and [`try_acquire`](LeaseOptions::try_acquire) ask for; each sets
    /// its own wait.
    pub(crate) own: LeaseRequest,
    pub(crate) timeout: Option<Duration>,
}

impl fmt::Debug for LeaseOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseOptions")
            // Never print the password.
            .field("url", &crate::server::shown(&self.url))
            .field("schema", &self.schema)
            .field("ttl", &self.ttl)
            .field("request_timeout", &self.request_timeout)
            .field("listen", &self.listen.as_deref().map(crate::server::shown))
            .field("job", &self.own.job)
            .field("max_runtime", &self.own.max_runtime)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl LeaseOptions {
    /// Options for the server at `url`: a `postgres://user@host:port/db`
    /// URL or libpq's `host=… user=…` form, with any of libpq's parameters
    /// (`sslmode` up to `verify-full`, `sslrootcert`,
    /// `target_session_attrs=read-write`, …). What it leaves out comes from
    /// libpq's environment, as for `psql`: `PGHOST`, `PGPORT`, `PGUSER`,
    /// `PGDATABASE`, `PGPASSWORD`, the password file (`PGPASSFILE`, or
    /// `~/.pgpass`), `PGSSLMODE`, `PGSSLROOTCERT` and `~/.postgresql/`. Prefer those to a password in the
    /// URL, which every local user can read in a command line.
    pub fn new(url: impl Into<String>) -> LeaseOptions {
        LeaseOptions {
            url: url.into(),
            schema: DEFAULT_SCHEMA.to_owned(),
            ttl: DEFAULT_TTL,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            listen: None,
            own: LeaseRequest::new(),
            timeout: None,
        }
    }

    /// The schema that holds the tables (`lockfile postgres init` creates
    /// it). Several schemas keep separate sets of leases in one database.
    ///
    /// Default: [`DEFAULT_SCHEMA`](crate::schema::DEFAULT_SCHEMA), `lockfile`.
    pub fn schema(&mut self, schema: impl Into<String>) -> &mut Self {
        self.schema = schema.into();
        self
    }

    /// The lease's time-to-live when the request names none: how long after
    /// the last renewal the server keeps the lease, by its own clock, and so
    /// how long a dead holder blocks the next one. Renewed every third of it.
    ///
    /// Default: [`DEFAULT_TTL`].
    pub fn ttl(&mut self, ttl: Duration) -> &mut Self {
        self.ttl = ttl;
        self
    }

    /// How long one statement may take before it counts as failed (and is
    /// cancelled). Renewals are held to the shorter of this and a third of
    /// the TTL; every statement to the time left before its deadline.
    ///
    /// Default: [`DEFAULT_REQUEST_TIMEOUT`].
    pub fn request_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.request_timeout = timeout;
        self
    }

    /// Wake a waiting acquire as soon as the lease is released, by
    /// `LISTEN` on a connection to `url` (the same forms and environment as
    /// [`new`](LeaseOptions::new)'s URL). Every release notifies, at its
    /// commit, even through PgBouncer; but a listener needs a session of
    /// its own, so `url` must reach PostgreSQL directly, never through a
    /// pooler in transaction mode.
    ///
    /// The connection is opened once the acquire finds the lease held (the
    /// wait polls on meanwhile, and asks again as soon as it is subscribed,
    /// so a release in between is never missed), and closed when the
    /// acquire returns. Without it, or when it cannot be
    /// opened or dies (a `listen_failed` warning, once), the acquire asks
    /// again every [`poll_interval`](lockfile_lease::engine::poll_interval),
    /// and at the latest when the holder's row expires by the server's
    /// clock; it never fails because of the listener.
    ///
    /// Default: none (polling).
    pub fn listen(&mut self, url: impl Into<String>) -> &mut Self {
        self.listen = Some(url.into());
        self
    }

    /// The job name written into the owner record by
    /// [`acquire`](LeaseOptions::acquire) and
    /// [`try_acquire`](LeaseOptions::try_acquire). ([`Engine::acquire`](crate::Engine::acquire)
    /// takes it from its [`LeaseRequest`].)
    ///
    /// Default: none.
    pub fn job(&mut self, name: impl Into<String>) -> &mut Self {
        self.own.job(name);
        self
    }

    /// The run's maximum runtime, written in the owner record
    /// (`max_runtime_seconds`) by [`acquire`](LeaseOptions::acquire) and
    /// [`try_acquire`](LeaseOptions::try_acquire), so that `inspect`
    /// reports an `overrunning` holder. The lease does not enforce it.
    ///
    /// Default: none.
    pub fn max_runtime(&mut self, max_runtime: Duration) -> &mut Self {
        self.own.max_runtime(max_runtime);
        self
    }

    /// The longest [`acquire`](LeaseOptions::acquire) waits for the lease
    /// to come free before returning [`Error::Timeout`](crate::Error::Timeout).
    ///
    /// Default: none, wait as long as it takes.
    pub fn timeout(&mut self, timeout: Duration) -> &mut Self {
        self.timeout = Some(timeout);
        self
    }

    /// The TTL for `request`: its own, or these options'.
    pub(crate) fn ttl_for(&self, request: &LeaseRequest) -> Duration {
        request.ttl.unwrap_or(self.ttl)
    }
}
