//! `LeaseOptions`: the builder for everything about taking a lease on
//! Redis.
//!
//! Every other module reads the options, so this one depends on none of
//! them. Its finishing methods live with what they make: `acquire` and
//! `try_acquire` in `engine.rs`, `inspect` and `inspect_all` in
//! `inspect.rs`.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use lockfile_lease::LeaseRequest;

/// The lease TTL used when none is given: as etcd's and PostgreSQL's.
pub const DEFAULT_TTL: Duration = Duration::from_secs(10);

/// How long one request to Redis may take when no other bound is given.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The prefix of every key and channel, when none is given.
pub const DEFAULT_PREFIX: &str = "lockfile:";

/// Options for taking a lease on Redis; finish with
/// [`acquire`](LeaseOptions::acquire) or
/// [`try_acquire`](LeaseOptions::try_acquire), or look at a lease with
/// [`inspect`](LeaseOptions::inspect).
///
/// ```no_run
/// use std::time::Duration;
/// use lockfile_redis::LeaseOptions;
///
/// # fn main() -> Result<(), lockfile_redis::Error> {
/// let guard = LeaseOptions::new("redis://jobs@redis-1:6379/0")
///     .password(std::env::var("REDISCLI_AUTH").unwrap_or_default())
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
    pub(crate) ttl: Duration,
    /// The job and the maximum runtime that [`acquire`](LeaseOptions::acquire)
    /// and [`try_acquire`](LeaseOptions::try_acquire) ask for; each sets
    /// its own wait.
    pub(crate) own: LeaseRequest,
    pub(crate) timeout: Option<Duration>,
    pub(crate) request_timeout: Duration,
    pub(crate) prefix: String,
    pub(crate) ca: Option<PathBuf>,
    pub(crate) password: Option<String>,
}

impl fmt::Debug for LeaseOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseOptions")
            // The URL as every message shows it: never its password.
            .field(
                "server",
                &crate::url::Server::parse(&self.url, None).map(|s| s.shown),
            )
            .field("ttl", &self.ttl)
            .field("job", &self.own.job)
            .field("max_runtime", &self.own.max_runtime)
            .field("timeout", &self.timeout)
            .field("request_timeout", &self.request_timeout)
            .field("prefix", &self.prefix)
            .field("ca", &self.ca)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .finish()
    }
}

impl LeaseOptions {
    /// Options for the Redis server at `url`, every other option at its
    /// default.
    ///
    /// `redis://[USER[:PASSWORD]@]HOST[:PORT][/DB]`, or `rediss://` for TLS
    /// (the server's name is verified against the system's roots, or
    /// against [`ca`](LeaseOptions::ca)). User and password are
    /// percent-encoded; messages show the server as `user:***@host:port`,
    /// never the password. `#insecure` (no certificate check) is refused.
    pub fn new(url: impl Into<String>) -> LeaseOptions {
        LeaseOptions {
            url: url.into(),
            ttl: DEFAULT_TTL,
            own: LeaseRequest::new(),
            timeout: None,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            prefix: DEFAULT_PREFIX.to_owned(),
            ca: None,
            password: None,
        }
    }

    /// The lease's time to live: how long after the last renewal Redis
    /// keeps the lease's key, and so how long a dead holder blocks the next
    /// one. Redis counts milliseconds. The lease is renewed every third of
    /// it.
    ///
    /// Default: [`DEFAULT_TTL`].
    pub fn ttl(&mut self, ttl: Duration) -> &mut Self {
        self.ttl = ttl;
        self
    }

    /// The job name written into the owner record, by
    /// [`acquire`](LeaseOptions::acquire) and
    /// [`try_acquire`](LeaseOptions::try_acquire).
    /// ([`Engine::acquire`](crate::Engine::acquire) takes it from its
    /// [`LeaseRequest`](crate::LeaseRequest).)
    ///
    /// Default: none.
    pub fn job(&mut self, name: impl Into<String>) -> &mut Self {
        self.own.job(name);
        self
    }

    /// The run's maximum runtime, written in the owner record, so that
    /// `inspect` reports an `overrunning` holder, as
    /// [`job`](LeaseOptions::job). The lease does not enforce it: its
    /// holder does (`lockfile run --max-runtime`).
    ///
    /// Default: none.
    pub fn max_runtime(&mut self, max_runtime: Duration) -> &mut Self {
        self.own.max_runtime(max_runtime);
        self
    }

    /// The longest [`acquire`](LeaseOptions::acquire) waits for the lease
    /// to come free before returning [`Error::Timeout`](crate::Error::Timeout).
    ///
    /// The wait wakes on the holder's release (a Pub/Sub message), at the
    /// holder's expiry by the server's count, and at least every
    /// [`poll_interval`](lockfile_lease::engine::poll_interval) of the TTL.
    ///
    /// Default: none, wait as long as it takes.
    pub fn timeout(&mut self, timeout: Duration) -> &mut Self {
        self.timeout = Some(timeout);
        self
    }

    /// How long one request to Redis may take before it counts as failed.
    /// Renewals are held to the shorter of this and a third of the TTL.
    ///
    /// Default: [`DEFAULT_REQUEST_TIMEOUT`].
    pub fn request_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.request_timeout = timeout;
        self
    }

    /// The prefix of every key and channel: `PREFIX{NAME}:lease` and so
    /// on. At most 100 bytes of printable ASCII, without `{` or `}` (the
    /// name's braces make the keys of one name one hash slot).
    ///
    /// Default: [`DEFAULT_PREFIX`].
    pub fn prefix(&mut self, prefix: impl Into<String>) -> &mut Self {
        self.prefix = prefix.into();
        self
    }

    /// The PEM file of the certificate authority that signs a `rediss://`
    /// server's certificate, instead of the system's roots. The server's
    /// name is still verified.
    ///
    /// Default: the system's roots.
    pub fn ca(&mut self, path: impl Into<PathBuf>) -> &mut Self {
        self.ca = Some(path.into());
        self
    }

    /// The password to authenticate with when the URL has none (as
    /// redis-cli takes `REDISCLI_AUTH`): a command line and a URL in a
    /// crontab are readable by others, an environment variable need not be.
    ///
    /// Default: the URL's, if any.
    pub fn password(&mut self, password: impl Into<String>) -> &mut Self {
        let password = password.into();
        self.password = (!password.is_empty()).then_some(password);
        self
    }
}
