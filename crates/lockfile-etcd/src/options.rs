//! `LeaseOptions`: the builder for everything about taking a lease.
//!
//! Every other module reads the options, so this one depends on none of
//! them. Its finishing methods live with what they make: `acquire` and
//! `try_acquire` in `engine.rs`, `inspect` and `inspect_all` in
//! `inspect.rs`.

use std::fmt;
use std::time::Duration;

use lockfile_lease::LeaseRequest;

/// The endpoint used when none is given: a local etcd on its default port.
pub const DEFAULT_ENDPOINT: &str = "http://127.0.0.1:2379";

/// The lease TTL used when none is given.
///
/// Short, so that a dead holder blocks the next run for at most this long;
/// long enough that a renewal every [`DEFAULT_TTL`]` / 3` survives a slow
/// network and a busy etcd.
pub const DEFAULT_TTL: Duration = Duration::from_secs(10);

/// How long one request to etcd may take when no other bound is given.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Options for taking a lease; finish with [`acquire`](LeaseOptions::acquire)
/// or [`try_acquire`](LeaseOptions::try_acquire), or look at a lease with
/// [`inspect`](LeaseOptions::inspect).
///
/// ```no_run
/// use std::time::Duration;
/// use lockfile_etcd::LeaseOptions;
///
/// # fn main() -> Result<(), lockfile_etcd::Error> {
/// let guard = LeaseOptions::new()
///     .endpoints(["http://etcd-1:2379", "http://etcd-2:2379", "http://etcd-3:2379"])
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
    pub(crate) endpoints: Vec<String>,
    pub(crate) ttl: Duration,
    /// The job and the maximum runtime that [`acquire`](LeaseOptions::acquire)
    /// and [`try_acquire`](LeaseOptions::try_acquire) ask for; each sets
    /// its own wait.
    pub(crate) own: LeaseRequest,
    pub(crate) timeout: Option<Duration>,
    pub(crate) request_timeout: Duration,
    pub(crate) user: Option<(String, String)>,
}

impl Default for LeaseOptions {
    fn default() -> Self {
        LeaseOptions::new()
    }
}

impl fmt::Debug for LeaseOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseOptions")
            // Never print a password in an endpoint.
            .field(
                "endpoints",
                &crate::endpoint::Endpoints::parse(&self.endpoints).map(|e| e.shown),
            )
            .field("ttl", &self.ttl)
            .field("job", &self.own.job)
            .field("max_runtime", &self.own.max_runtime)
            .field("timeout", &self.timeout)
            .field("request_timeout", &self.request_timeout)
            // Never print the password.
            .field("user", &self.user.as_ref().map(|(name, _)| name))
            .finish()
    }
}

impl LeaseOptions {
    /// Options with every default.
    pub fn new() -> LeaseOptions {
        LeaseOptions {
            endpoints: vec![DEFAULT_ENDPOINT.to_owned()],
            ttl: DEFAULT_TTL,
            own: LeaseRequest::new(),
            timeout: None,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            user: None,
        }
    }

    /// The etcd endpoints (`http://host:port`), replacing the default. Give
    /// every member of the cluster: the client fails over between them.
    ///
    /// An endpoint may carry credentials (`http://user:password@host:port`,
    /// percent-encoded), the same in every endpoint: they are the
    /// [`user`](LeaseOptions::user) to authenticate as, never sent as part
    /// of the address. Messages show every endpoint rebuilt, the password
    /// as `***`; one that cannot be read for certain (a raw `@`, `/`, `?`
    /// or `#` in the password) is refused by its position, never shown.
    ///
    /// Default: [`DEFAULT_ENDPOINT`].
    pub fn endpoints<I, S>(&mut self, endpoints: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.endpoints = endpoints.into_iter().map(Into::into).collect();
        self
    }

    /// The lease's time-to-live: how long after the last renewal etcd keeps
    /// the lease, and so how long a dead holder blocks the next one.
    ///
    /// etcd counts whole seconds: a fraction rounds up. etcd may also grant
    /// more than asked (its minimum is 1.5 × its election timeout, rounded up
    /// to a second: 2 s by default); the guard uses the TTL etcd granted,
    /// see [`LeaseGuard::ttl`](crate::LeaseGuard::ttl). The lease is renewed
    /// every third of it.
    ///
    /// Default: [`DEFAULT_TTL`].
    pub fn ttl(&mut self, ttl: Duration) -> &mut Self {
        self.ttl = ttl;
        self
    }

    /// The job name written into the owner record, shown by `inspect` and in
    /// contention errors, by [`acquire`](LeaseOptions::acquire) and
    /// [`try_acquire`](LeaseOptions::try_acquire). ([`Engine::acquire`](crate::Engine::acquire)
    /// takes it from its [`LeaseRequest`](crate::LeaseRequest).)
    ///
    /// Default: none.
    pub fn job(&mut self, name: impl Into<String>) -> &mut Self {
        self.own.job(name);
        self
    }

    /// The run's maximum runtime, written in the owner record
    /// (`max_runtime_seconds`), so that `inspect` reports an `overrunning`
    /// holder, by [`acquire`](LeaseOptions::acquire) and
    /// [`try_acquire`](LeaseOptions::try_acquire), as
    /// [`job`](LeaseOptions::job). The lease does not enforce it: its holder
    /// does (`lockfile run --max-runtime`).
    ///
    /// Default: none.
    pub fn max_runtime(&mut self, max_runtime: Duration) -> &mut Self {
        self.own.max_runtime(max_runtime);
        self
    }

    /// The longest [`acquire`](LeaseOptions::acquire) waits for the lease to
    /// come free before returning [`Error::Timeout`](crate::Error::Timeout).
    /// ([`Engine::acquire`](crate::Engine::acquire) waits as its
    /// [`LeaseRequest`](crate::LeaseRequest) says.)
    ///
    /// The wait is a watch on the key: it wakes when the holder's key is
    /// deleted (released, or expired with its lease), not on a polling tick.
    ///
    /// Default: none, wait as long as it takes.
    pub fn timeout(&mut self, timeout: Duration) -> &mut Self {
        self.timeout = Some(timeout);
        self
    }

    /// How long one request to etcd may take before it counts as failed.
    ///
    /// Renewals are held to the shorter of this and a third of the TTL: an
    /// unanswered renewal makes the guard reconnect and try again, while
    /// its deadline keeps running.
    ///
    /// Default: [`DEFAULT_REQUEST_TIMEOUT`].
    pub fn request_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.request_timeout = timeout;
        self
    }

    /// Authenticate to etcd as this user (etcd's role-based access control).
    ///
    /// Default: no authentication.
    pub fn user(&mut self, name: impl Into<String>, password: impl Into<String>) -> &mut Self {
        self.user = Some((name.into(), password.into()));
        self
    }
}
