//! `LeaseGuard`: a held lease, renewed in the background until released.
//!
//! The calls that take a lease live here too, with what they make:
//! [`LeaseOptions::acquire`] and [`LeaseOptions::try_acquire`] as well as
//! the guard's own shortcuts. So the options depend on no other module.

use std::time::{Duration, Instant};

use lockfile::OwnerRecord;
use lockfile::history::{LastRun, RunEnd};

use lockfile_lease::session::Session;

use crate::session::{self, Record};
use crate::{LeaseOptions, LeaseSignal, LostReason, Operation, Result, history_key_for, key_for};
use lockfile::wait::Wait;

/// A held lease. Dropping it releases the lease; [`release`](LeaseGuard::release)
/// does the same and reports errors.
///
/// A thread of the guard's own renews the lease every third of the TTL and
/// watches the key, so renewal goes on while the caller's (synchronous) work
/// runs. The guard knows the latest moment it can be sure it still holds the
/// lease ([`deadline`](LeaseGuard::deadline)) and says so the moment that
/// certainty ends ([`check`](LeaseGuard::check), [`signal`](LeaseGuard::signal)).
///
/// Holding a lease is a belief with an expiry date, not a fact: a process
/// paused past its deadline (a stop signal, a long GC, a VM migration) wakes up
/// still "holding" it. Pass [`fencing_token`](LeaseGuard::fencing_token) to
/// every resource you change, and have the resource refuse tokens older than
/// the newest it has seen (the crate's `fenced_store` example shows one).
#[derive(Debug)]
#[must_use = "if unused the lease is released immediately"]
pub struct LeaseGuard {
    name: String,
    key: String,
    history_key: String,
    lease_id: i64,
    ttl: Duration,
    token: u64,
    record: OwnerRecord,
    claim: Option<lockfile::tick::Claim>,
    acquired_at: Instant,
    signal: LeaseSignal,
    /// Dropping it releases the lease.
    session: Session<Record>,
}

impl LeaseOptions {
    /// Takes the lease on `name`, waiting while someone else holds it: as
    /// long as it takes, or up to [`timeout`](LeaseOptions::timeout).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName) for a name that
    /// cannot be a key; [`Error::Timeout`](crate::Error::Timeout) when the
    /// timeout passed; [`Error::Server`](crate::Error::Server) or
    /// [`Error::Unanswered`](crate::Error::Unanswered) when etcd fails or
    /// does not answer.
    pub fn acquire(&self, name: &str) -> Result<LeaseGuard> {
        let wait = Wait::up_to(self.timeout);
        LeaseGuard::start(self, name, wait)
    }

    /// Takes the lease on `name` if nobody holds it, without waiting.
    ///
    /// # Errors
    ///
    /// [`Error::Contended`](crate::Error::Contended), carrying the holder's
    /// record and fencing token, when someone holds the lease; otherwise as
    /// [`acquire`](LeaseOptions::acquire).
    pub fn try_acquire(&self, name: &str) -> Result<LeaseGuard> {
        LeaseGuard::start(self, name, Wait::No)
    }
}

impl LeaseGuard {
    /// Starts the lease's thread and returns once it holds the lease.
    pub(crate) fn start(opts: &LeaseOptions, name: &str, wait: Wait) -> Result<LeaseGuard> {
        let key = key_for(name)?;
        let history_key = history_key_for(name)?;
        let (acquired, session) = session::spawn(opts, &key, &history_key, wait)?;
        Ok(LeaseGuard {
            name: name.to_owned(),
            key,
            history_key,
            lease_id: acquired.lease_id,
            ttl: acquired.ttl,
            token: acquired.token,
            record: acquired.record,
            claim: acquired.claim,
            acquired_at: acquired.acquired_at,
            signal: acquired.signal,
            session,
        })
    }

    /// Takes the lease on `name` from the local etcd with every default,
    /// waiting as long as it takes. Same as `LeaseOptions::new().acquire(name)`.
    ///
    /// # Errors
    ///
    /// As [`LeaseOptions::acquire`].
    pub fn acquire(name: &str) -> Result<LeaseGuard> {
        LeaseOptions::new().acquire(name)
    }

    /// Takes the lease on `name` from the local etcd with every default if
    /// nobody holds it, without waiting. Same as
    /// `LeaseOptions::new().try_acquire(name)`.
    ///
    /// # Errors
    ///
    /// [`Error::Contended`](crate::Error::Contended) with the holder's record
    /// when someone holds the lease (see
    /// [`Error::is_contended`](crate::Error::is_contended)); otherwise as
    /// [`LeaseOptions::acquire`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> Result<(), lockfile_etcd::Error> {
    /// match lockfile_etcd::LeaseGuard::try_acquire("nightly") {
    ///     Ok(guard) => { /* run the job */ guard.release()?; }
    ///     Err(e) if e.is_contended() => eprintln!("skipped: {e}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn try_acquire(name: &str) -> Result<LeaseGuard> {
        LeaseOptions::new().try_acquire(name)
    }

    /// The fencing token: the key's create revision in etcd. Every later
    /// acquisition of any lease in the same etcd cluster gets a larger one.
    ///
    /// Give it to every resource the work changes (the `lockfile` command
    /// exports it as `LOCKFILE_FENCING_TOKEN`), and have the resource reject a
    /// token lower than the highest it has accepted.
    pub fn fencing_token(&self) -> u64 {
        self.token
    }

    /// The owner record stored as the key's value. Its
    /// `heartbeat_interval_ms` is the renewal interval (a third of the TTL).
    pub fn record(&self) -> &OwnerRecord {
        &self.record
    }

    /// The claim on the run's tick taken with the lease, when one was asked
    /// for ([`LeaseRequest::claim_tick`](crate::LeaseRequest::claim_tick)).
    pub fn claim(&self) -> Option<&lockfile::tick::Claim> {
        self.claim.as_ref()
    }

    /// The lease name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The etcd key (`lockfile/locks/NAME`).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The etcd key of the lease's run history (`lockfile/history/NAME`),
    /// which has no lease: see [`record_outcome`](LeaseGuard::record_outcome).
    pub fn history_key(&self) -> &str {
        &self.history_key
    }

    /// The etcd lease id.
    pub fn lease_id(&self) -> i64 {
        self.lease_id
    }

    /// The TTL etcd granted (at least the one asked for).
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// When the transaction that took the lease was sent (monotonic clock).
    /// The lease was not ours before this.
    pub fn acquired_at(&self) -> Instant {
        self.acquired_at
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

    /// `Ok` while the lease is certainly held,
    /// [`Error::LeaseLost`](crate::Error::LeaseLost) as soon as it may have
    /// lapsed. See [`LeaseSignal::check`].
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

    /// A handle on the lease's deadline and lost signal for other threads,
    /// with the child-supervision policy ([`LeaseSignal::wait_step`]).
    pub fn signal(&self) -> LeaseSignal {
        self.signal.clone()
    }

    /// Records how this run ended in the lease's run history, the key
    /// [`history_key`](LeaseGuard::history_key), for
    /// [`LeaseOptions::inspect`] (`last_run`): the outcome, exit status or
    /// signal, and the count of failures in a row, as the core crate's
    /// [`LockGuard::record_outcome`](lockfile::LockGuard::record_outcome)
    /// records them in a lock file. The key has no lease, so the history
    /// outlives the lease and later holders, until a later run records its
    /// own. Returns the history written.
    ///
    /// The failures in a row are counted from the history in etcd at the
    /// moment of writing, not from an earlier read: the write is a
    /// transaction that succeeds only if the key has not changed since it
    /// was read, and starts again from the key's new value if it has.
    ///
    /// Works after a loss too (record [`Outcome::LeaseLost`](lockfile::history::Outcome::LeaseLost)),
    /// but is bounded by the lease's deadline: it waits on etcd at most the
    /// request timeout, and at most until 200 ms past the deadline, though
    /// never less than 100 ms. Call it before
    /// [`release`](LeaseGuard::release), so that the next holder finds the
    /// history written.
    ///
    /// # Errors
    ///
    /// [`Error::Server`](crate::Error::Server) or
    /// [`Error::Unanswered`](crate::Error::Unanswered) naming the history key
    /// when etcd fails or does not answer in time (the history is then left
    /// as it was); [`Error::Conflict`](crate::Error::Conflict) when other
    /// writers changed it under every attempt.
    pub fn record_outcome(&self, end: RunEnd) -> Result<LastRun> {
        self.session
            .ask(Operation::RecordRun, &self.history_key, |reply| {
                Record(end, reply)
            })
    }

    /// Releases the lease: stops renewing, deletes the key if it is still
    /// ours (its create revision is our fencing token and it is attached to
    /// our lease), revokes the lease, and joins the renewal thread.
    ///
    /// Never waits on etcd past the lease's deadline: after it, the key goes
    /// with its lease whatever we do, and a release after the deadline asks
    /// nothing of etcd. Before it, blocks for at most about two request
    /// timeouts when etcd does not answer, and far less when it refuses
    /// connections.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`](crate::Error::LeaseLost) when the lease had been
    /// lost before the release (whatever was done under it may have
    /// overlapped another holder); [`Error::Server`](crate::Error::Server) or
    /// [`Error::Unanswered`](crate::Error::Unanswered) when etcd could not be
    /// told. In every case renewal has stopped when this returns, and an
    /// unreleased lease expires after its TTL.
    pub fn release(mut self) -> Result<()> {
        self.session.release()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    #[test]
    fn guards_signals_and_errors_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<LeaseGuard>();
        send_sync::<LeaseSignal>();
        send_sync::<LeaseOptions>();
        send_sync::<Error>();
    }
}
