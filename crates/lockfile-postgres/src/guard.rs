//! `LeaseGuard`: a held lease, renewed in the background until released.
//! Its methods are the lease layer's [`Lease`] trait.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use lockfile::OwnerRecord;
use lockfile::history::{LastRun, RunEnd};
use lockfile::tick::Claim;
use lockfile_lease::session::Session;
use lockfile_lease::{Lease, LeaseRequest, LeaseSignal, Result};

use crate::LeaseOptions;
use crate::conn::Conn;
use crate::history::{self, Holder};
use crate::key::{history_key_for, key_for};
use crate::session;

/// A held lease on PostgreSQL. Dropping it releases the lease;
/// [`Lease::release`] does the same and reports errors.
///
/// A thread of the guard's own renews the lease every third of the TTL, so
/// renewal goes on while the caller's work runs. Holding a lease is a belief
/// with an expiry date: pass [`Lease::fencing_token`] to every resource the
/// work changes, and stop by [`Lease::deadline`].
#[derive(Debug)]
#[must_use = "if unused the lease is released immediately"]
pub struct LeaseGuard {
    name: String,
    key: String,
    token: u64,
    ttl: Duration,
    record: OwnerRecord,
    claim: Option<Claim>,
    signal: LeaseSignal,
    /// For the run history, on connections of its own.
    history: Conn,
    /// Dropping it releases the lease.
    session: Session<Infallible>,
}

impl LeaseGuard {
    /// Starts the lease's thread and returns once it holds the lease.
    pub(crate) fn start(
        opts: &LeaseOptions,
        name: &str,
        request: &LeaseRequest,
    ) -> Result<LeaseGuard> {
        let key = key_for(&opts.schema, name)?;
        let conn = Conn::new(opts, &key)?;
        let history = conn.for_key(&history_key_for(&opts.schema, name)?);
        let (acquired, session) =
            session::spawn(conn, name, opts.ttl_for(request), request.clone())?;
        Ok(LeaseGuard {
            name: name.to_owned(),
            key,
            token: acquired.token,
            ttl: acquired.ttl,
            record: acquired.record,
            claim: acquired.claim,
            signal: acquired.signal,
            history,
            session,
        })
    }
}

impl Lease for LeaseGuard {
    fn name(&self) -> &str {
        &self.name
    }

    /// `SCHEMA.leases/NAME`.
    fn key(&self) -> &str {
        &self.key
    }

    /// Drawn from the schema's sequence `fencing_tokens` under the lease
    /// row's lock: larger than every earlier holder's of this name.
    fn fencing_token(&self) -> u64 {
        self.token
    }

    fn record(&self) -> &OwnerRecord {
        &self.record
    }

    fn ttl(&self) -> Duration {
        self.ttl
    }

    fn signal(&self) -> LeaseSignal {
        self.signal.clone()
    }

    /// Taken in the acquire's transaction, on the database's clock.
    fn claim(&self) -> Option<&Claim> {
        self.claim.as_ref()
    }

    /// Writes the run into the `history` document (compare-and-set on its
    /// version) and the `runs` table, pruning runs older than the retention,
    /// on a connection of its own, within
    /// [`write_until`](lockfile_lease::history::write_until) of the deadline.
    fn record_outcome(&self, end: RunEnd) -> Result<LastRun> {
        let until = lockfile_lease::history::write_until(
            self.signal.deadline(),
            Instant::now(),
            self.history.request_timeout,
        );
        let holder = Holder {
            record: &self.record,
            fencing_token: self.token,
            claim: self.claim.as_ref(),
        };
        history::record(&self.history, &self.name, &holder, end, until)
    }

    /// Stops renewing and expires the row if it is still ours (same
    /// token), so that the next holder need not wait; never waits on the
    /// server past the deadline.
    fn release(mut self: Box<Self>) -> Result<()> {
        self.session.release()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_and_options_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<LeaseGuard>();
        send_sync::<LeaseOptions>();
    }
}
