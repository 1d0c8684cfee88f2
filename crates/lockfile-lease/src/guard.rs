//! `LeaseGuard`: a held lease, whatever the engine, renewed on a thread of
//! its own until released.

use std::time::{Duration, Instant};

use lockfile::OwnerRecord;
use lockfile::history::{LastRun, RunEnd};
use lockfile::tick::Claim;

use crate::Released;
use crate::error::{LostReason, Result};
use crate::lease::Lease;
use crate::session::Session;
use crate::signal::LeaseSignal;

/// A held lease, on any engine. Dropping it releases the lease;
/// [`release`](LeaseGuard::release) does the same and reports errors.
///
/// Dropped outside a tokio runtime, the drop waits until the server was
/// told (as `release` does). Dropped inside one, it only asks the lease's
/// thread to release, and returns at once: no worker is blocked, and the
/// thread frees the lease within about two request timeouts (never past the
/// deadline), logging `release_failed` if it cannot. A process that exits
/// right after would end that thread before the server heard: await
/// [`shutdown::releases`](crate::shutdown::releases) before `main` returns.
///
/// A thread of the guard's own renews the lease every third of the TTL
/// (through the engine's [`LeaseOps`](crate::ops::LeaseOps)), so renewal goes on while the
/// caller's (synchronous) work runs. The guard knows the latest moment it
/// can be sure it still holds the lease ([`deadline`](LeaseGuard::deadline)) and says
/// so the moment that certainty ends ([`check`](LeaseGuard::check),
/// [`signal`](LeaseGuard::signal)).
///
/// Holding a lease is a belief with an expiry date, not a fact: a process
/// paused past its deadline (a stop signal, a long GC, a VM migration)
/// wakes up still "holding" it. Pass [`fencing_token`](LeaseGuard::fencing_token) to every
/// resource you change, and have the resource refuse tokens older than the
/// newest it has seen.
#[derive(Debug)]
#[must_use = "if unused the lease is released immediately"]
pub struct LeaseGuard {
    name: String,
    key: String,
    token: u64,
    ttl: Duration,
    lease_id: Option<i64>,
    record: OwnerRecord,
    claim: Option<Claim>,
    acquired_at: Instant,
    signal: LeaseSignal,
    /// Dropping it releases the lease.
    session: Session,
}

/// What the lease's thread hands the guard once the lease is held.
#[derive(Debug)]
pub(crate) struct Acquired {
    pub(crate) token: u64,
    pub(crate) ttl: Duration,
    pub(crate) lease_id: Option<i64>,
    pub(crate) record: OwnerRecord,
    pub(crate) claim: Option<Claim>,
    pub(crate) acquired_at: Instant,
    pub(crate) signal: LeaseSignal,
}

impl LeaseGuard {
    /// The guard of the lease `name` on `key`, held by `session`'s thread.
    pub(crate) fn held(name: &str, key: &str, acquired: Acquired, session: Session) -> LeaseGuard {
        LeaseGuard {
            name: name.to_owned(),
            key: key.to_owned(),
            token: acquired.token,
            ttl: acquired.ttl,
            lease_id: acquired.lease_id,
            record: acquired.record,
            claim: acquired.claim,
            acquired_at: acquired.acquired_at,
            signal: acquired.signal,
            session,
        }
    }
}

impl LeaseGuard {
    /// The lease name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where the engine keeps the lease (an etcd key, a table row's name).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Where the engine keeps the lease's run history, which outlives the
    /// lease: see [`record_outcome`](LeaseGuard::record_outcome).
    pub fn history_key(&self) -> &str {
        self.session.history_key()
    }

    /// The fencing token: larger than every earlier holder's (etcd: the
    /// key's create revision; PostgreSQL: drawn from the schema's sequence
    /// under the lease row's lock).
    ///
    /// Give it to every resource the work changes (the `lockfile` command
    /// exports it as `LOCKFILE_FENCING_TOKEN`), and have the resource reject
    /// a token lower than the highest it has accepted.
    pub fn fencing_token(&self) -> u64 {
        self.token
    }

    /// The owner record stored with the lease. Its `heartbeat_interval_ms`
    /// is the renewal interval (a third of the TTL).
    pub fn record(&self) -> &OwnerRecord {
        &self.record
    }

    /// The TTL the server granted (etcd may grant more than asked).
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The engine's own id of the lease, if it has one (etcd's lease id).
    pub fn lease_id(&self) -> Option<i64> {
        self.lease_id
    }

    /// The claim on the run's tick taken with the lease, when one was asked
    /// for ([`LeaseRequest::claim_tick`](crate::LeaseRequest::claim_tick)).
    pub fn claim(&self) -> Option<&Claim> {
        self.claim.as_ref()
    }

    /// When the request that took the lease was sent (monotonic clock). The
    /// lease was not ours before this.
    pub fn acquired_at(&self) -> Instant {
        self.acquired_at
    }

    /// A handle on the lease's deadline and lost signal for other threads,
    /// with the child-supervision policy ([`LeaseSignal::wait_step`]).
    pub fn signal(&self) -> LeaseSignal {
        self.signal.clone()
    }

    /// The latest moment (monotonic clock) the guard can be sure it still
    /// holds the lease: the send time of the last successful renewal plus
    /// the TTL. See [`LeaseSignal::deadline`].
    pub fn deadline(&self) -> Instant {
        self.signal.deadline()
    }

    /// The send time of the last renewal that succeeded.
    pub fn last_renewal(&self) -> Instant {
        self.signal.last_renewal()
    }

    /// `Ok` while the lease is certainly held, [`Error::LeaseLost`](crate::Error::LeaseLost) as soon
    /// as it may have lapsed. See [`LeaseSignal::check`].
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`](crate::Error::LeaseLost) with the reason.
    pub fn check(&self) -> Result<()> {
        self.signal.check()
    }

    /// Whether the lease may have lapsed.
    pub fn is_lost(&self) -> bool {
        self.signal.is_lost()
    }

    /// Blocks until the lease is lost (returning why) or `timeout` passes.
    /// See [`LeaseSignal::wait_lost`].
    pub fn wait_lost(&self, timeout: Duration) -> Option<LostReason> {
        self.signal.wait_lost(timeout)
    }

    /// Records how this run ended in the lease's run history
    /// ([`history_key`](LeaseGuard::history_key)), for `inspect`
    /// (`last_run`): the outcome, exit status or signal, and the count of
    /// failures in a row, as the core crate's
    /// [`LockGuard::record_outcome`](lockfile::LockGuard::record_outcome)
    /// records them in a lock file. The history outlives the lease and later
    /// holders, until a later run records its own. Returns the run written.
    ///
    /// The failures in a row are counted from the history on the server at
    /// the moment of writing, not from an earlier read: the engine writes
    /// with a compare-and-set, and starts again from the new history if it
    /// changed in between.
    ///
    /// Works after a loss too (record [`Outcome::LeaseLost`](lockfile::history::Outcome::LeaseLost)),
    /// but is bounded by the lease's deadline
    /// ([`write_until`](crate::history::write_until)): it waits on the
    /// server at most the request timeout, and at most until 200 ms past the
    /// deadline, though never less than 100 ms. Renewals go on meanwhile.
    /// Call it before [`release`](LeaseGuard::release), so that the next
    /// holder finds the history written.
    ///
    /// # Errors
    ///
    /// [`Error::Server`](crate::Error::Server) or [`Error::Unanswered`](crate::Error::Unanswered) naming the history key
    /// when the server fails or does not answer in time (the history is
    /// then left as it was); [`Error::Conflict`](crate::Error::Conflict) when other writers changed
    /// it under every attempt.
    pub fn record_outcome(&self, end: RunEnd) -> Result<LastRun> {
        self.session.record(end)
    }

    /// Releases the lease: stops renewing, frees it on the server if it is
    /// still ours (etcd: deletes the key and revokes the lease; PostgreSQL:
    /// expires the row), and joins the lease's thread.
    ///
    /// Never waits on the server past the lease's deadline: after it, the
    /// lease is gone whatever we do, and a release after the deadline asks
    /// nothing of the server. Before it, blocks for at most about two
    /// request timeouts when the server does not answer.
    ///
    /// Returns whether the lease was still held ([`Released::WhileHeld`]),
    /// or had been lost before the release ([`Released::AfterLoss`]: what
    /// was done under it may have overlapped another holder). A loss is not
    /// an error here: the lease is let go either way, and there is nothing
    /// left for the caller to do about it but say so.
    ///
    /// # Errors
    ///
    /// [`Error::Server`](crate::Error::Server) or [`Error::Unanswered`](crate::Error::Unanswered) when the server could not
    /// be told. In every case renewal has stopped when this returns, and an
    /// unreleased lease expires after its TTL.
    pub fn release(mut self) -> Result<Released> {
        self.session.release()
    }

    /// [`record_outcome`](LeaseGuard::record_outcome), awaited: the task's
    /// thread is not blocked while the lease's thread writes.
    ///
    /// # Errors
    ///
    /// As [`record_outcome`](LeaseGuard::record_outcome).
    #[cfg(feature = "tokio")]
    pub async fn record_outcome_async(&self, end: RunEnd) -> Result<LastRun> {
        self.session.record_async(end).await
    }

    /// [`release`](LeaseGuard::release), awaited: the task's thread is not
    /// blocked while the lease's thread frees the lease on the server.
    /// Renewal has stopped when it completes.
    ///
    /// Cancel-safe: a release cancelled half-way goes on, on the lease's
    /// thread, and logs a failure (`release_failed`) itself. So does
    /// dropping the guard inside a runtime, which never blocks (see
    /// [`LeaseGuard`]).
    ///
    /// # Errors
    ///
    /// As [`release`](LeaseGuard::release).
    #[cfg(feature = "tokio")]
    pub async fn release_async(mut self) -> Result<Released> {
        self.session.release_async().await
    }
}

/// The holder's calls, for code that holds any engine's lease as a
/// [`Lease`].
impl Lease for LeaseGuard {
    fn name(&self) -> &str {
        LeaseGuard::name(self)
    }

    fn key(&self) -> &str {
        LeaseGuard::key(self)
    }

    fn fencing_token(&self) -> u64 {
        LeaseGuard::fencing_token(self)
    }

    fn record(&self) -> &OwnerRecord {
        LeaseGuard::record(self)
    }

    fn ttl(&self) -> Duration {
        LeaseGuard::ttl(self)
    }

    fn lease_id(&self) -> Option<i64> {
        LeaseGuard::lease_id(self)
    }

    fn signal(&self) -> LeaseSignal {
        LeaseGuard::signal(self)
    }

    fn claim(&self) -> Option<&Claim> {
        LeaseGuard::claim(self)
    }

    fn record_outcome(&self, end: RunEnd) -> Result<LastRun> {
        LeaseGuard::record_outcome(self, end)
    }

    fn release(self: Box<Self>) -> Result<Released> {
        LeaseGuard::release(*self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_and_signals_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<LeaseGuard>();
        send_sync::<LeaseSignal>();
        send_sync::<crate::Error>();
    }
}
