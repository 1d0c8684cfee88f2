//! The lease layer's two traits for code that drives any engine: an
//! [`Engine`] (a server that keeps leases) and a [`Lease`] (one held lease,
//! a [`LeaseGuard`](crate::LeaseGuard) whatever the engine). An engine
//! implements [`Engine`] with its server operations (`ops.rs`).

use std::fmt;
use std::time::{Duration, Instant, SystemTime};

use lockfile::OwnerRecord;
use lockfile::check::{CheckOptions, Health};
use lockfile::history::{LastRun, RunEnd};
use lockfile::tick::{Claim, TickClaim};
use lockfile::wait::Wait;

use crate::{LeaseReport, LeaseSignal, Result};

/// What a caller asks of one acquisition, whatever the engine. Built as
/// every options type of this project is (`&mut self` setters, as std's
/// `OpenOptions`): chain the setters in the call that uses it, or keep a
/// `let mut` and set what a run needs.
///
/// ```
/// use std::time::Duration;
/// use lockfile::wait::Wait;
/// let mut request = lockfile_lease::LeaseRequest::new();
/// request
///     .wait(Wait::up_to(Some(Duration::from_secs(30))))
///     .ttl(Duration::from_secs(15))
///     .job("nightly-report")
///     .max_runtime(Duration::from_secs(3600));
/// assert_eq!(request.ttl, Some(Duration::from_secs(15)));
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct LeaseRequest {
    /// Whether and how long to wait while someone else holds the lease.
    /// Default: [`Wait::No`].
    pub wait: Wait,
    /// The lease's time to live; `None` for the engine's default.
    pub ttl: Option<Duration>,
    /// The job name written in the owner record.
    pub job: Option<String>,
    /// The run's maximum runtime, written in the owner record
    /// (`max_runtime_seconds`), so that `inspect` and `check` can say that a
    /// holder is `overrunning`.
    pub max_runtime: Option<Duration>,
    /// Claim the tick of the run's start (`--once-per`), atomically with
    /// taking the lease: see [`Engine::acquire`].
    pub tick: Option<TickClaim>,
    /// The slot this lease is of, written in the owner record: set by
    /// [`acquire_slot`](crate::slots::acquire_slot) for each slot it tries.
    pub slot: Option<lockfile::record::Slot>,
}

impl LeaseRequest {
    /// A request with every default: no wait, the engine's TTL.
    pub fn new() -> LeaseRequest {
        LeaseRequest::default()
    }

    /// Wait as `wait` says while someone else holds the lease.
    pub fn wait(&mut self, wait: Wait) -> &mut Self {
        self.wait = wait;
        self
    }

    /// Ask for this time to live.
    pub fn ttl(&mut self, ttl: Duration) -> &mut Self {
        self.ttl = Some(ttl);
        self
    }

    /// Name the job in the owner record.
    pub fn job(&mut self, job: impl Into<String>) -> &mut Self {
        self.job = Some(job.into());
        self
    }

    /// Claim the tick of the run's start, atomically with taking the lease.
    pub fn claim_tick(&mut self, claim: TickClaim) -> &mut Self {
        self.tick = Some(claim);
        self
    }

    /// Record the run's maximum runtime in the owner record.
    pub fn max_runtime(&mut self, max_runtime: Duration) -> &mut Self {
        self.max_runtime = Some(max_runtime);
        self
    }

    /// The owner record a holder writes for this request, renewing every
    /// `renew_every` (a third of the TTL): the core crate's record, with the
    /// job and the maximum runtime.
    pub fn owner_record(&self, renew_every: Duration) -> OwnerRecord {
        let mut record = OwnerRecord::current(self.job.as_deref(), Some(renew_every));
        record.max_runtime_ms = self
            .max_runtime
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        record.slot = self.slot;
        record
    }
}

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
///   its lease by its [`deadline`](LeaseSignal::deadline);
/// - a fencing token larger than every earlier holder's;
/// - a run history that outlives the lease, written with a compare-and-set
///   ([`Lease::record_outcome`]).
pub trait Engine: fmt::Debug + Send + Sync {
    /// The engine's name in reports, messages and metrics: `etcd`,
    /// `postgres`.
    fn kind(&self) -> &'static str;

    /// Takes the lease on `name`: without waiting, or waiting as
    /// `request.wait` says while someone else holds it. Returns once the
    /// lease is held and its renewal runs in the background.
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
    fn acquire(&self, name: &str, request: &LeaseRequest) -> Result<Box<dyn Lease>>;

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

/// A held lease, renewed in the background until released (the
/// [`LeaseGuard`](crate::LeaseGuard) of every engine). Dropping it releases
/// it too, logging errors.
///
/// Holding a lease is a belief with an expiry date: pass
/// [`fencing_token`](Lease::fencing_token) to every resource the work
/// changes, and stop the work by the [`deadline`](Lease::deadline)
/// ([`LeaseSignal::wait_step`] with a [`StopPolicy`](crate::policy::StopPolicy)).
pub trait Lease: fmt::Debug + Send + Sync {
    /// The lease name.
    fn name(&self) -> &str;

    /// Where the engine keeps it (an etcd key, a table row's name).
    fn key(&self) -> &str;

    /// The fencing token: larger than every earlier holder's of any lease on
    /// the same server.
    fn fencing_token(&self) -> u64;

    /// The owner record the holder wrote.
    fn record(&self) -> &OwnerRecord;

    /// The TTL the server granted.
    fn ttl(&self) -> Duration;

    /// The engine's own id of the lease, if it has one (etcd's lease id).
    fn lease_id(&self) -> Option<i64> {
        None
    }

    /// The lease's deadline and lost signal, for any thread.
    fn signal(&self) -> LeaseSignal;

    /// The claim on the run's tick taken with the lease, when asked for
    /// ([`LeaseRequest::claim_tick`]).
    fn claim(&self) -> Option<&Claim>;

    /// Records how this run ended in the lease's run history, with the
    /// engine's compare-and-set, within
    /// [`write_until`](crate::history::write_until) of the deadline. Returns the run
    /// written. Call it before [`release`](Lease::release).
    ///
    /// # Errors
    ///
    /// A server error or [`Error::Conflict`](crate::Error::Conflict); the
    /// history is then left as it was.
    fn record_outcome(&self, end: RunEnd) -> Result<LastRun>;

    /// Releases the lease: stops renewing, and frees it on the server if it
    /// is still ours. Never waits on the server past the deadline.
    ///
    /// # Errors
    ///
    /// A server error. A lease lost before the release is no error: it
    /// returns [`Released::AfterLoss`](crate::Released::AfterLoss).
    /// Renewal has stopped either way.
    fn release(self: Box<Self>) -> Result<crate::Released>;

    /// The latest moment (monotonic clock) the holder can be sure it still
    /// holds the lease. See [`LeaseSignal::deadline`].
    fn deadline(&self) -> Instant {
        self.signal().deadline()
    }

    /// `Ok` while the lease is certainly held. See [`LeaseSignal::check`].
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`](crate::Error::LeaseLost) with the reason.
    fn check(&self) -> Result<()> {
        self.signal().check()
    }

    /// Whether the lease may have lapsed.
    fn is_lost(&self) -> bool {
        self.signal().is_lost()
    }
}
