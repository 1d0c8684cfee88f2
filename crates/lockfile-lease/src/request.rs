//! `LeaseRequest`: what a caller asks of one acquisition, whatever the
//! engine.

use std::time::Duration;

use lockfile::OwnerRecord;
use lockfile::tick::TickClaim;
use lockfile::wait::Wait;

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
    /// taking the lease: see [`Engine::acquire`](crate::Engine::acquire).
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
