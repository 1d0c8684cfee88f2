//! `Lease`: one held lease, whatever the engine, for code that holds any
//! engine's lease (every engine's is a [`LeaseGuard`](crate::LeaseGuard)).

use std::fmt;
use std::time::{Duration, Instant};

use lockfile::OwnerRecord;
use lockfile::history::{LastRun, RunEnd};
use lockfile::tick::Claim;

use crate::{LeaseSignal, Result};

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
    /// ([`LeaseRequest::claim_tick`](crate::LeaseRequest::claim_tick)).
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
